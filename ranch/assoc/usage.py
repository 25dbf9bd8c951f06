"""Decayed usage per association and QOS, as priority/multifactor keeps it (Slurm 22.05)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ranch.assoc.db import AcctDb
from ranch.assoc.records import Assoc


@attrs.frozen
class UsageSettings:
    """PriorityDecayHalfLife (seconds; 0 = no decay), PriorityCalcPeriod (seconds),
    PriorityUsageResetPeriod, and TRESBillingWeights (lower-case TRES name -> weight; empty:
    billing = CPUs, Slurm's default)."""

    half_life: int = 7 * 86400
    calc_period: int = 300
    reset: str = "NONE"
    weights: tuple[tuple[str, float], ...] = ()
    max_tres: bool = False  # PriorityFlags=MAX_TRES: the per-node TRES' highest, not their sum


@attrs.frozen
class RunningJob:
    """What accrual needs of one running job: its association's key, QOS, allocated TRES
    (cpu, mem in MB, node, gres/gpu), start and end (seconds since the epoch; inf: running)."""

    user: str
    account: str
    partition: str
    qos: str
    tres: tuple[tuple[str, float], ...]
    start: float
    end: float = math.inf
    weights: tuple[tuple[str, float], ...] = ()  # its partition's TRESBillingWeights
    until: float = math.inf  # start + time limit (TRESRunMins; inf: no limit)


@attrs.frozen
class Usage:
    """Raw usage (billable TRES-seconds, decayed) by association id and by QOS name, the
    wall time the last calc period ran (0: never), the wall seconds run (decayed, times
    UsageFactor: slurmctld's grp_used_wall, what GrpWall is judged on) by each, and the
    TRES-seconds by TRES (usage_tres_raw, what GrpTRESMins is judged on) by each."""

    assocs: Mapping[int, float] = attrs.field(factory=dict)
    qos: Mapping[str, float] = attrs.field(factory=dict)
    last_decay: float = 0.0
    last_reset: float = 0.0
    walls: Mapping[int, float] = attrs.field(factory=dict)
    qos_walls: Mapping[str, float] = attrs.field(factory=dict)
    tres: Mapping[int, Mapping[str, float]] = attrs.field(factory=dict)
    qos_tres: Mapping[str, Mapping[str, float]] = attrs.field(factory=dict)


def _scaled(by: Mapping, scale: float) -> dict:
    return {k: {t: v * scale for t, v in got.items()} for k, got in by.items()}


class _Adds:
    """One period's additions, summed per association chain and per QOS first (10,000 jobs
    share a few hundred chains, and their TRES a few shapes), then laid on each association of
    a chain once."""

    def __init__(self) -> None:
        # chain (or QOS name) -> [billing, wall, {the job's TRES pairs: wall seconds}]
        self.chains: dict[Any, list] = {}
        self.qos: dict[Any, list] = {}

    def add(self, chain: tuple[int, ...], qos: str | None, add: float, span: float,
            tres: tuple[tuple[str, float], ...]) -> None:
        got = self.chains.get(chain)
        if got is None:
            got = self.chains[chain] = [0.0, 0.0, {}]
        got[0] += add
        got[1] += span
        got[2][tres] = got[2].get(tres, 0.0) + span
        if qos is None:
            return
        got = self.qos.get(qos)
        if got is None:
            got = self.qos[qos] = [0.0, 0.0, {}]
        got[0] += add
        got[1] += span
        got[2][tres] = got[2].get(tres, 0.0) + span

    def onto(self, assocs: dict, walls: dict, tres: dict, qos: dict, qos_walls: dict,
             qos_tres: dict) -> None:
        for targets, by in (((assocs, walls, tres), self._by_assoc()),
                            ((qos, qos_walls, qos_tres), self.qos.items())):
            billing, wall, per_tres = targets
            for key, (add, span, shapes) in by:
                billing[key] = billing.get(key, 0.0) + add
                wall[key] = wall.get(key, 0.0) + span
                got = per_tres.setdefault(key, {})
                for pairs, seconds in shapes.items():
                    for name, amount in pairs:
                        if amount:
                            got[name] = got.get(name, 0.0) + amount * seconds

    def _by_assoc(self) -> Iterable[tuple[int, list]]:
        for chain, sums in self.chains.items():
            for aid in chain:
                yield aid, sums


def decay_factor(half_life: int) -> float:
    """Slurm's per-second decay: 1 - ln 2 (0.693) / half-life; no half-life, no decay."""
    return 1.0 - 0.693 / half_life if half_life > 0 else 1.0


# the TRES MAX_TRES takes the highest of (assoc_mgr_tres_weighted): cpu, mem, node, any gres
NODE_TRES = ("cpu", "mem", "node")


def billable(tres: Iterable[tuple[str, float]], weights: Iterable[tuple[str, float]],
             max_tres: bool = False) -> float:
    """The job's billing TRES: CPUs unless TRESBillingWeights says otherwise; then the
    weighted sum (memory in MB, its weight per MB as conf/values.py keeps it), or under
    PriorityFlags=MAX_TRES the highest weighted node TRES plus the sum of the others."""
    w = dict(weights)
    got = dict(tres)
    if not w:
        return float(got.get("cpu", 0.0))
    total = highest = 0.0
    for name, weight in w.items():
        if name == "billing":
            continue
        amount = weight * got.get(name, 0.0)
        if max_tres and (name in NODE_TRES or name.startswith("gres/")):
            highest = max(highest, amount)
        else:
            total += amount
    return highest + total


def ancestry(db: AcctDb, a: Assoc) -> list[Assoc]:
    """`a` and every association above it, to root's."""
    out: list[Assoc] = []
    node: Assoc | None = a
    while node is not None and node not in out:
        out.append(node)
        node = db.parent_of(node)
    return out


class Index:
    """One pass over the tree's associations, so that each job finds its association and the
    ids above it in O(depth): 10,000 running jobs in one calc period must not scan the tree
    each (AcctDb's lookups are linear)."""

    def __init__(self, db: AcctDb, cluster: str) -> None:
        self.db = db
        self.cluster = cluster
        mine = [a for a in db.assocs if a.cluster == cluster]
        self.by_key = {(a.account, a.user, a.partition): a for a in mine}
        self.defaults = {u.name: u.default_account for u in db.users}
        self._chains: dict[int, tuple[int, ...]] = {}

    def chain(self, job: RunningJob) -> tuple[int, ...]:
        """The ids of the job's association and every one above it (none: no association)."""
        account = job.account or self.defaults.get(job.user, "")
        a = (self.by_key.get((account, job.user, job.partition))
             or self.by_key.get((account, job.user, "")))
        if a is None:
            return ()
        got = self._chains.get(a.id)
        if got is None:
            got = self._chains[a.id] = tuple(n.id for n in ancestry(self.db, a))
        return got


def reset_due(period: str, last: float, now: float) -> bool:
    """Whether PriorityUsageResetPeriod's boundary (UTC) lies in (last, now]."""
    if period in ("NONE", "NOW") or last <= 0:
        return False
    a, b = time.gmtime(last), time.gmtime(now)
    if period == "DAILY":
        return (a.tm_year, a.tm_yday) != (b.tm_year, b.tm_yday)
    if period == "WEEKLY":  # Slurm resets at Sunday's midnight
        day = 86400
        week_start = (now // day - (b.tm_wday + 1) % 7) * day
        return last < week_start <= now
    if period == "MONTHLY":
        return (a.tm_year, a.tm_mon) != (b.tm_year, b.tm_mon)
    if period == "QUARTERLY":
        return (a.tm_year, (a.tm_mon - 1) // 3) != (b.tm_year, (b.tm_mon - 1) // 3)
    return a.tm_year != b.tm_year


def accrue(usage: Usage, db: AcctDb, cluster: str, settings: UsageSettings,
           running: Iterable[RunningJob], now: float) -> Usage:
    """One calc period (`_decay_apply_new_usage`): all usage scaled by decay^elapsed, then each
    running job adds run_delta * decay^run_delta * billing * its QOS's UsageFactor to its
    association, every ancestor, and its QOS. The first call only marks the time."""
    if usage.last_decay <= 0 or now <= usage.last_decay:
        return attrs.evolve(usage, last_decay=max(now, usage.last_decay),
                            last_reset=usage.last_reset or now)
    elapsed = now - usage.last_decay
    d = decay_factor(settings.half_life)
    scale = d ** elapsed
    assocs = {k: v * scale for k, v in usage.assocs.items()}
    qos = {k: v * scale for k, v in usage.qos.items()}
    walls = {k: v * scale for k, v in usage.walls.items()}
    qos_walls = {k: v * scale for k, v in usage.qos_walls.items()}
    tres, qos_tres = _scaled(usage.tres, scale), _scaled(usage.qos_tres, scale)
    last_reset = usage.last_reset
    if settings.half_life <= 0 and reset_due(settings.reset, usage.last_reset, now):
        assocs, qos, walls, qos_walls, last_reset = {}, {}, {}, {}, now
        tres, qos_tres = {}, {}
    index, qos_records = Index(db, cluster), {q.name: q for q in db.qos}
    adds = _Adds()
    for job in running:
        run_delta = min(now, job.end) - max(usage.last_decay, job.start)
        if run_delta <= 0:
            continue
        record = qos_records.get(job.qos)
        factor = record.usage_factor if record is not None else 1.0
        if record is not None and "NoDecay" in record.flags:
            span = run_delta * factor
        else:
            span = run_delta * d ** run_delta * factor
        add = span * billable(job.tres, job.weights or settings.weights, settings.max_tres)
        adds.add(index.chain(job), job.qos if record is not None else None, add, span, job.tres)
    adds.onto(assocs, walls, tres, qos, qos_walls, qos_tres)
    return Usage(assocs, qos, now, last_reset, walls, qos_walls, tres, qos_tres)


# sshare's TRESRunMins lists the cluster's TRES in this order (AccountingStorageTRES' defaults)
RUN_TRES = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")


def run_minutes(db: AcctDb, cluster: str, settings: UsageSettings,
                running: Iterable[RunningJob], now: float) -> dict[int, dict[str, int]]:
    """TRESRunMins by association id: each running job's TRES times the minutes its time
    limit has left, summed up the tree (a job without a limit counts none: Ranch's choice)."""
    out: dict[int, dict[str, int]] = {}
    index = Index(db, cluster)
    for job in running:
        if job.end < math.inf or job.until == math.inf:
            continue
        left = max(0.0, job.until - now) / 60
        tres = dict(job.tres)
        tres["billing"] = billable(job.tres, job.weights or settings.weights, settings.max_tres)
        for aid in index.chain(job):
            got = out.setdefault(aid, {})
            for name, amount in tres.items():
                got[name] = got.get(name, 0) + int(amount * left)
    return out


def run_minutes_text(got: dict[str, int]) -> str:
    return ",".join(f"{name}={got.get(name, 0)}" for name in RUN_TRES)


def seeded(db: AcctDb, cluster: str, settings: UsageSettings, finished: Iterable[RunningJob],
           now: float) -> Usage:
    """Usage as the calc periods would have left it for jobs that ran before usage was kept
    (the job history, on a first start): each job's billing x UsageFactor integrated over its
    run, decayed to `now` (the limit of the per-period sum: (d^(now-end) - d^(now-start)) /
    ln(1/d); d = 1: the run time)."""
    d = decay_factor(settings.half_life)
    index, qos_records = Index(db, cluster), {q.name: q for q in db.qos}
    assocs: dict[int, float] = {}
    qos: dict[str, float] = {}
    walls: dict[int, float] = {}
    qos_walls: dict[str, float] = {}
    tres: dict[int, dict[str, float]] = {}
    qos_tres: dict[str, dict[str, float]] = {}
    adds = _Adds()
    for job in finished:
        start, end = job.start, min(job.end, now)
        if end <= start:
            continue
        record = qos_records.get(job.qos)
        if d < 1.0 and not (record is not None and "NoDecay" in record.flags):
            weight = (d ** (now - end) - d ** (now - start)) / math.log(1 / d)
        else:
            weight = end - start
        span = weight * (record.usage_factor if record is not None else 1.0)
        add = span * billable(job.tres, job.weights or settings.weights, settings.max_tres)
        adds.add(index.chain(job), job.qos if record is not None else None, add, span, job.tres)
    adds.onto(assocs, walls, tres, qos, qos_walls, qos_tres)
    return Usage(assocs, qos, now, now, walls, qos_walls, tres, qos_tres)


def reset(usage: Usage, now: float) -> Usage:
    """PriorityUsageResetPeriod=NOW (at start) or a reset boundary: all usage to zero."""
    return Usage({}, {}, usage.last_decay, now)


# -- plain JSON for the journal -------------------------------------------------------------------


def to_json(usage: Usage) -> dict[str, object]:
    out: dict[str, object] = {
        "assocs": {str(k): v for k, v in sorted(usage.assocs.items())},
        "qos": dict(sorted(usage.qos.items())), "last_decay": usage.last_decay,
        "last_reset": usage.last_reset}
    if usage.walls or usage.qos_walls:  # GrpWall's (a record without them reads as none)
        out["walls"] = {str(k): v for k, v in sorted(usage.walls.items())}
        out["qos_walls"] = dict(sorted(usage.qos_walls.items()))
    if usage.tres or usage.qos_tres:  # GrpTRESMins' (likewise)
        out["tres"] = {str(k): dict(sorted(v.items())) for k, v in sorted(usage.tres.items())}
        out["qos_tres"] = {k: dict(sorted(v.items())) for k, v in sorted(usage.qos_tres.items())}
    return out


def from_json(raw: object) -> Usage:
    """A journaled usage record; a damaged one is refused with a ValueError naming the field."""
    if not isinstance(raw, dict):
        raise ValueError("usage record: not an object")
    out: dict[str, dict] = {}
    for kind in ("assocs", "qos", "walls", "qos_walls"):
        got = raw.get(kind, {} if kind.endswith("walls") else None)
        if not isinstance(got, dict) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
                for v in got.values()):
            raise ValueError(f"usage record {kind}: not a map of non-negative numbers")
        out[kind] = got
    try:
        assocs = {int(k): float(v) for k, v in out["assocs"].items()}
        walls = {int(k): float(v) for k, v in out["walls"].items()}
    except ValueError:
        raise ValueError("usage record assocs: a key is not an association id") from None
    times = []
    for name in ("last_decay", "last_reset"):
        v = raw.get(name)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"usage record {name}: not a number")
        times.append(float(v))
    tres: dict[str, dict] = {}
    for kind in ("tres", "qos_tres"):
        got = raw.get(kind, {})
        if not isinstance(got, dict) or not all(
                isinstance(per, dict) and all(isinstance(v, int | float) and
                                              not isinstance(v, bool) and v >= 0
                                              for v in per.values())
                for per in got.values()):
            raise ValueError(f"usage record {kind}: not a map of TRES to non-negative numbers")
        tres[kind] = {k: {str(t): float(v) for t, v in per.items()} for k, per in got.items()}
    try:
        by_assoc = {int(k): v for k, v in tres["tres"].items()}
    except ValueError:
        raise ValueError("usage record tres: a key is not an association id") from None
    return Usage(assocs, {str(k): float(v) for k, v in out["qos"].items()}, times[0], times[1],
                 walls, {str(k): float(v) for k, v in out["qos_walls"].items()},
                 by_assoc, tres["qos_tres"])

