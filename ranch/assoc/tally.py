"""What the limits are judged on (slurmctld 22.05 acct_policy.c): a job's ask, one association's
or QOS's parsed limits with its decayed usage, the limits over one job, and the running jobs'
tally (grp_used_tres, used_limits, grp_used_tres_run_secs)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import attrs

# The TRES Ranch counts, in Slurm's TRES id order (cpu 1, mem 2, node 4, then gres): a job over
# two limits at one level is held by the first in this order (_validate_tres_usage_limits)
TRES = ("cpu", "mem", "node", "gres/gpu")
_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
NONE4 = (0.0, 0.0, 0.0, 0.0)


def tres(text: str) -> dict[str, int]:
    """A TRES limit as sacctmgr stores it ("cpu=4,mem=2G,gres/gpu=1") as counts; memory in MB
    (no suffix: MB, as sacctmgr reads it)."""
    out: dict[str, int] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        name, value = name.strip().lower(), value.strip()
        if not value:
            continue
        if name == "gres/gpu" or name.startswith("gres/gpu:"):
            name = "gres/gpu"
        if name == "mem" and value[-1:].upper() in _MEM_UNITS:
            out[name] = int(float(value[:-1]) * _MEM_UNITS[value[-1].upper()])
        elif value.isdigit():
            out[name] = int(value)
    return out


@attrs.frozen
class Ask:
    """What a job would hold once started (or holds): CPUs, memory (MB), nodes, GPUs; the time
    limit it asked for (minutes; None: it asked none, Slurm fits it to the limit); `limit`: the
    time limit it runs under (minutes, None: UNLIMITED), for the TRES-minutes limits; `until`:
    when a started job's limit ends (wall seconds; inf: never), for GrpTRESRunMins."""

    cpus: int = 1
    mem: int = 0
    nodes: int = 1
    gpus: int = 0
    minutes: int | None = None
    limit: int | None = None
    until: float = math.inf

    def counts(self) -> tuple[int, int, int, int]:
        return self.cpus, self.mem, self.nodes, self.gpus

    def tres_minutes(self) -> tuple[float, ...]:
        """job_tres_time_limit: each TRES times the time limit (an UNLIMITED job's is
        Slurm's INFINITE times it: more than any limit)."""
        span = math.inf if self.limit is None else self.limit
        return tuple(n * span if n else 0.0 for n in self.counts())


@attrs.frozen
class Limits:
    """One association's or one QOS's limits, parsed: the counts and each TRES list; and what
    it has used (decayed TRES-minutes in TRES order, wall minutes) for GrpTRESMins, GrpWall."""

    counts: Mapping[str, int] = attrs.field(factory=dict)  # GrpJobs, MaxJobs, MaxWall, ...
    tres: Mapping[str, Mapping[str, int]] = attrs.field(factory=dict)  # GrpTRES -> {cpu: 4}
    used_mins: tuple[float, ...] = NONE4
    wall_mins: float = 0.0
    flags: frozenset[str] = frozenset()  # a QOS's (DenyOnLimit, OverPartQOS, ...)

    @classmethod
    def of(cls, pairs: Mapping[str, str], minutes: Mapping[str, int]) -> Limits:
        """From sacctmgr's stored texts; `minutes`: the time limits already in minutes."""
        counts = {k: int(v) for k, v in pairs.items() if v.isdigit()}
        counts.update(minutes)
        lists = {k: tres(v) for k, v in pairs.items() if "TRES" in k}
        return cls(counts, {k: v for k, v in lists.items() if v})


@attrs.frozen
class Rule:
    """The limits over one job: its QOS (None: no QOS record), its partition's QOS (None:
    none), and its association chain, the job's own first (its Max* limits inherited as
    slurmdbd fills them in) then each account above it to root (Grp* only count there);
    `chain` keys name each for the usage tally. `safe`: AccountingStorageEnforce=safe."""

    qos: Limits | None
    qos_name: str
    chain: tuple[tuple[Hashable, Limits], ...]
    part_qos: Limits | None = None
    part_qos_name: str = ""
    safe: bool = False
    part_reason: str = ""  # the partition refuses its account or QOS (assoc/partpolicy.py)

    def ordered(self) -> tuple[tuple[str, Limits], ...]:
        """acct_policy_set_qos_order: the partition's QOS first unless the job's has
        OverPartQOS; the same QOS is looked at once."""
        job = (self.qos_name, self.qos) if self.qos is not None else None
        part = (self.part_qos_name, self.part_qos) if self.part_qos is not None else None
        if part is not None and job is not None and part[0] == job[0]:
            part = None
        if job is not None and part is not None and "OverPartQOS" not in job[1].flags:
            job, part = part, job
        return tuple(x for x in (job, part) if x is not None)

    def strict(self) -> bool:
        """_acct_policy_validate's strict_checking: a QOS over the job has DenyOnLimit, or it
        has no QOS at all."""
        qos = self.ordered()
        return not qos or any("DenyOnLimit" in q.flags for _, q in qos)


@attrs.define
class Used:
    """What running jobs hold under one association, QOS, or QOS and user/account; for the
    TRES-run-minutes, sum(TRES x end time) over jobs with a limit, and the TRES of those
    without (each UNLIMITED: INFINITE run minutes)."""

    jobs: int = 0
    tres: list[int] = attrs.Factory(lambda: [0, 0, 0, 0])
    run_sum: list[float] = attrs.Factory(lambda: [0.0, 0.0, 0.0, 0.0])
    run_open: list[int] = attrs.Factory(lambda: [0, 0, 0, 0])

    def add(self, ask: Ask, sign: int = 1) -> None:
        self.jobs += sign
        for i, n in enumerate(ask.counts()):
            self.tres[i] += sign * n
            if ask.until == math.inf:
                self.run_open[i] += sign * n
            else:
                self.run_sum[i] += sign * n * ask.until

    def run_minutes(self, now: float) -> tuple[float, ...]:
        """grp_used_tres_run_secs / 60 at `now`: what the jobs' limits have left (all of it
        INFINITE while a job without a limit holds that TRES)."""
        return tuple(math.inf if self.run_open[i] > 0
                     else max(0.0, self.run_sum[i] - now * self.tres[i]) / 60
                     for i in range(len(TRES)))


EMPTY = Used()


@attrs.define
class Tally:
    """The usage the limits are judged against (acct_policy's grp_used_* and used_limits): a
    job counts in its association and every one above it, each QOS over it (its own and its
    partition's), and each of them per user and per account."""

    assoc: dict[Hashable, Used] = attrs.Factory(dict)
    qos: dict[str, Used] = attrs.Factory(dict)
    qos_user: dict[tuple[str, str], Used] = attrs.Factory(dict)
    qos_acct: dict[tuple[str, str], Used] = attrs.Factory(dict)

    def add(self, rule: Rule, user: str, account: str, ask: Ask, sign: int = 1) -> None:
        """Count a job that holds `ask` (sign -1: one that no longer does)."""
        for key, _ in rule.chain:
            self.assoc.setdefault(key, Used()).add(ask, sign)
        for q, _ in rule.ordered() or ((rule.qos_name, None),):
            self.qos.setdefault(q, Used()).add(ask, sign)
            self.qos_user.setdefault((q, user), Used()).add(ask, sign)
            self.qos_acct.setdefault((q, account), Used()).add(ask, sign)
