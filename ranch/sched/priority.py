"""priority/multifactor as Slurm 22.05 computes it (priority_multifactor.c), over plain data."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ranch.conf.model import ClusterConfig, PartitionConfig

TOP = 0xFFFFFFFF  # a priority is a uint32; 0 is a held job's
FLAGS = frozenset({"ACCRUE_ALWAYS", "CALCULATE_RUNNING", "DEPTH_OBLIVIOUS", "NO_FAIR_TREE",
                   "INCR_ONLY", "MAX_TRES", "NO_NORMAL_ALL", "NO_NORMAL_ASSOC", "NO_NORMAL_PART",
                   "NO_NORMAL_QOS", "NO_NORMAL_TRES", "SMALL_RELATIVE_TO_TIME", "FAIR_TREE"})
# the TRES in slurmctld's order (assoc_mgr_tres_name_array): sprio lists them so
TRES_ORDER = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")


@attrs.frozen
class Weights:
    """PriorityWeight*: each a uint32 (default 0); `tres`: PriorityWeightTRES, by lower-case
    TRES name (mem: per MB)."""

    age: int = 0
    assoc: int = 0
    fairshare: int = 0
    jobsize: int = 0
    partition: int = 0
    qos: int = 0
    tres: tuple[tuple[str, float], ...] = ()


@attrs.frozen
class Settings:
    """The multifactor plugin's settings: weights, PriorityMaxAge (seconds),
    PriorityFavorSmall, PriorityFlags (upper case; NO_NORMAL_ALL already expanded)."""

    weights: Weights = Weights()
    max_age: int = 7 * 86400
    favor_small: bool = False
    flags: frozenset[str] = frozenset()
    damp: float = 1.0  # FairShareDampeningFactor (classic fair share only)

    def has(self, flag: str) -> bool:
        return flag in self.flags


@attrs.frozen
class Cluster:
    """What the factors normalise against: the node count and CPUs of the whole cluster
    (node_record_count, cluster_cpus), the highest partition PriorityJobFactor, the highest QOS
    and association Priority."""

    nodes: int
    cpus: int
    part_max: int = 0
    qos_max: int = 0
    assoc_max: int = 0


@attrs.frozen
class JobInput:
    """One pending job as the factors read it. `accrue`: when its age began (None: not yet
    eligible); `time_limit` minutes (None: the partition's MaxTime, `part_max_time`, None for
    UNLIMITED); `tres`: what it asks (cpu, mem in MB, node, gres/gpu, billing); `part_tres`:
    its partition's totals of the same; `fairshare`: its association's factor."""

    accrue: float | None
    min_nodes: int
    cpus: int
    time_limit: int | None = None
    part_max_time: int | None = None
    part_factor: int = 0
    qos_priority: int = 0
    assoc_priority: int = 0
    fairshare: float = 0.0
    tres: tuple[tuple[str, float], ...] = ()
    part_tres: tuple[tuple[str, float], ...] = ()
    nice: int = 0
    site: int = 0


@attrs.frozen
class Factors:
    """A job's factors, each weighted as slurmctld keeps them (prio_factors after
    _get_priority_internal: factor x weight); `norm` the factors themselves in [0, 1] (or as
    they are under NO_NORMAL_*); `tres` (name, weighted) and `tres_norm` only those not 0."""

    age: float = 0.0
    assoc: float = 0.0
    fairshare: float = 0.0
    jobsize: float = 0.0
    partition: float = 0.0
    qos: float = 0.0
    tres: tuple[tuple[str, float], ...] = ()
    tres_norm: tuple[tuple[str, float], ...] = ()
    norm: tuple[float, float, float, float, float, float] = (0.0,) * 6
    nice: int = 0
    site: int = 0


def _unlimited(minutes: int | None) -> int:
    return 0xFFFFFFFF if minutes is None else minutes  # INFINITE as slurmctld keeps it


def job_size(job: JobInput, s: Settings, c: Cluster) -> float:
    """set_priority_factors' job size: favour large (nodes and CPUs over the cluster's, halved),
    PriorityFavorSmall (the complement), or SMALL_RELATIVE_TO_TIME (CPUs per minute of limit)."""
    nodes, cpus = max(c.nodes, 1), max(c.cpus, 1)
    if s.has("SMALL_RELATIVE_TO_TIME"):
        js = job.min_nodes * c.cpus / nodes
        if job.cpus > js:
            js = float(job.cpus)
        limit = job.time_limit if job.time_limit is not None else _unlimited(job.part_max_time)
        js /= limit or 1
        js /= cpus
        if s.favor_small:
            js = 1.0 - js
    elif s.favor_small:
        js = (c.nodes - job.min_nodes) / nodes
        if job.cpus:
            js += (c.cpus - job.cpus) / cpus
            js /= 2
    else:
        js = job.min_nodes / nodes
        if job.cpus:
            js += job.cpus / cpus
            js /= 2
    return min(max(js, 0.0), 1.0)


def tres_factors(job: JobInput, s: Settings) -> list[tuple[str, float]]:
    """_get_tres_factors: each TRES asked over the partition's total (as asked under
    NO_NORMAL_TRES), in slurmctld's TRES order."""
    totals = dict(job.part_tres)
    out = []
    for name, value in sorted(job.tres, key=lambda t: tres_rank(t[0])):
        if s.has("NO_NORMAL_TRES"):
            out.append((name, float(value)))
        elif value and totals.get(name):
            out.append((name, value / totals[name]))
    return out


def tres_rank(name: str) -> tuple[int, str]:
    return (TRES_ORDER.index(name), "") if name in TRES_ORDER else (len(TRES_ORDER), name)


def factors(job: JobInput, s: Settings, c: Cluster, now: float) -> Factors:
    """set_priority_factors then the weighting of _get_priority_internal."""
    w = s.weights
    age = 0.0
    if w.age and job.accrue is not None and job.accrue > 0:
        diff = max(int(now) - int(job.accrue), 0)
        age = diff / s.max_age if s.max_age and diff < s.max_age else 1.0
    fs = job.fairshare if w.fairshare else 0.0
    js = job_size(job, s, c) if w.jobsize else 0.0
    part = 0.0
    if job.part_factor and w.partition:
        part = float(job.part_factor) if s.has("NO_NORMAL_PART") else (
            job.part_factor / c.part_max if c.part_max else 0.0)
    assoc = 0.0
    if w.assoc:
        assoc = float(job.assoc_priority) if s.has("NO_NORMAL_ASSOC") else (
            job.assoc_priority / c.assoc_max if c.assoc_max else 0.0)
    qos = 0.0
    if job.qos_priority and w.qos:
        qos = float(job.qos_priority) if s.has("NO_NORMAL_QOS") else (
            job.qos_priority / c.qos_max if c.qos_max else 0.0)
    weights = dict(w.tres)
    tres_w: list[tuple[str, float]] = []
    tres_n: list[tuple[str, float]] = []
    if weights:
        for name, value in tres_factors(job, s):
            weighted = value * weights.get(name, 0.0)
            if weighted:
                tres_w.append((name, weighted))
                tres_n.append((name, value))
    return Factors(age * w.age, assoc * w.assoc, fs * w.fairshare, js * w.jobsize,
                   part * w.partition, qos * w.qos, tuple(tres_w), tuple(tres_n),
                   (age, assoc, fs, js, part, qos), job.nice, job.site)


def total(f: Factors) -> int:
    """_get_priority_internal's sum, in its order, then at least 1 (0 is held), truncated to
    an integer and at most 2^32-1."""
    prio = (f.age + f.assoc + f.fairshare + f.jobsize + f.partition + f.qos
            + sum(v for _, v in f.tres) + float(f.site) - float(f.nice))
    if prio < 1:
        prio = 1.0
    return min(int(prio), TOP)


def shown_total(f: Factors) -> float:
    """sprio's PRIORITY (get_priority_from_factors): the same sum in print.c's order."""
    prio = (f.age + f.assoc + f.fairshare + f.jobsize + f.partition + f.qos
            + float(f.site) - float(f.nice))
    for _, v in f.tres:
        prio += v
    return max(prio, 1.0)


def highest(values: Iterable[int]) -> int:
    """The highest of `values` above 0 (the normalising maximum; 0 when none)."""
    return max((v for v in values if v > 0), default=0)


def top(chosen: list[tuple[int, int, int]], others: list[tuple[int, int, int]]
        ) -> dict[int, tuple[int, int]]:
    """scontrol top (job_mgr.c _set_top): `chosen` (id, priority, nice) in the order asked,
    `others` the pending jobs of the same user, partition, account and QOS (priority above 1).
    The chosen take the highest priorities among all of them, in order (one less on a tie), each
    nice lowered by what it gained; the others lose that total in equal parts, nice raised to
    match, each below the last chosen. Returns id -> (priority, nice)."""
    prios = sorted([p for _, p, _ in chosen] + [p for _, p, _ in others], reverse=True)
    out: dict[int, tuple[int, int]] = {}
    last: int | None = None
    total_delta = 0
    for (jid, prio, nice), next_prio in zip(chosen, prios, strict=False):
        if last is not None and next_prio == last and last > 2:
            next_prio = last - 1
        last = next_prio
        delta = next_prio - prio
        total_delta += delta
        out[jid] = (next_prio, nice - delta)
    count = len(others)
    for jid, prio, nice in others:
        if last is None:
            break
        delta = int(total_delta / count)  # C's division truncates toward zero
        next_prio = prio - delta
        if next_prio >= last:
            next_prio = last - 1
            delta = prio - next_prio
        out[jid] = (next_prio, nice + delta)
        total_delta -= delta
        count -= 1
    return out


# -- what the controller and the simulator both read of a config --------------------------------

# a partition's figures: PriorityJobFactor, PriorityTier, MaxTime (minutes; None: UNLIMITED),
# and its TRES totals (cpu, mem MB, node, gres/gpu)
PartFigures = tuple[int, int, int | None, tuple[tuple[str, float], ...]]
NO_PART: PartFigures = (1, 1, None, ())


def settings_of(config: ClusterConfig) -> Settings:
    """The multifactor settings of a config."""
    p = config.priority
    return Settings(
        Weights(p.weight_age, p.weight_assoc, p.weight_fairshare, p.weight_jobsize,
                p.weight_partition, p.weight_qos, p.tres),
        p.max_age, p.favor_small, frozenset(p.flags), float(p.damp))


def part_number(pc: PartitionConfig | None, key: str) -> int:
    """A partition's PriorityJobFactor or PriorityTier (`Priority=` sets both; default 1)."""
    if pc is None:
        return 1
    opts = dict(pc.options)
    return int(opts.get(key, opts.get("Priority", "1")))


def partitions_of(config: ClusterConfig) -> dict[str, PartFigures]:
    """Each partition's figures, by name."""
    nodes = {n.name: n for n in config.nodes}
    out: dict[str, PartFigures] = {}
    for pc in config.partitions:
        members = [nodes[n] for n in pc.nodes if n in nodes]
        totals = (("cpu", float(sum(n.cpus for n in members))),
                  ("mem", float(sum(n.real_memory for n in members))),
                  ("node", float(len(members))),
                  ("gres/gpu", float(sum(g.count for n in members for g in n.gres
                                         if g.name == "gpu"))))
        out[pc.name] = (part_number(pc, "PriorityJobFactor"), part_number(pc, "PriorityTier"),
                        pc.max_time, totals)
    return out


def cluster_of(config: ClusterConfig, parts: dict[str, PartFigures], qos_max: int = 0
               ) -> Cluster:
    """What the factors normalise against under `config` (the highest QOS priority given)."""
    return Cluster(len(config.nodes), sum(n.cpus for n in config.nodes),
                   max((f for f, _, _, _ in parts.values()), default=0), qos_max, 0)


def order_key(tier: int, priority: int, submit: float, job_id: int
              ) -> tuple[int, int, float, int]:
    """The pending queue's order under multifactor, as Slurm's: partition PriorityTier, then
    priority (both highest first), then submit time, then id."""
    return (-tier, -priority, submit, job_id)
