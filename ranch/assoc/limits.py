"""AccountingStorageEnforce=limits at scheduling (slurmctld 22.05 acct_policy.c): whether a
pending job may start now under its QOS's and its associations' limits, given what the running
jobs hold, and else the pending reason job_reason_string gives (slurm_protocol_defs.c)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import attrs

# The TRES Ranch counts, in Slurm's TRES id order (cpu 1, mem 2, node 4, then gres): a job over
# two limits at one level is held by the first in this order (_validate_tres_usage_limits)
TRES = ("cpu", "mem", "node", "gres/gpu")
_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}

# _get_tres_state_reason: the reason for each kind of limit, by TRES (cpu, mem, node, gres)
QOS_GRP = ("QOSGrpCpuLimit", "QOSGrpMemLimit", "QOSGrpNodeLimit", "QOSGrpGRES")
QOS_PER_JOB = ("QOSMaxCpuPerJobLimit", "QOSMaxMemoryPerJob", "QOSMaxNodePerJobLimit",
               "QOSMaxGRESPerJob")
# node has no per-node reason of its own: the unknown one stays
QOS_PER_NODE = ("QOSMaxCpuPerNode", "QOSMaxMemoryPerNode", "QOSMaxUnknownPerNode",
                "QOSMaxGRESPerNode")
QOS_PER_ACCT = ("MaxCpuPerAccount", "MaxMemoryPerAccount", "MaxNodePerAccount",
                "MaxGRESPerAccount")
QOS_PER_USER = ("QOSMaxCpuPerUserLimit", "QOSMaxMemoryPerUser", "QOSMaxNodePerUserLimit",
                "QOSMaxGRESPerUser")
ASSOC_GRP = ("AssocGrpCpuLimit", "AssocGrpMemLimit", "AssocGrpNodeLimit", "AssocGrpGRES")
ASSOC_PER_JOB = ("AssocMaxCpuPerJobLimit", "AssocMaxMemPerJob", "AssocMaxNodePerJobLimit",
                 "AssocMaxGRESPerJob")
ASSOC_PER_NODE = ("AssocMaxCpuPerNode", "AssocMaxMemPerNode", "AssocMaxUnknownPerNode",
                  "AssocMaxGRESPerNode")


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
    """What a pending job would hold once started: CPUs, memory (MB), nodes, GPUs, and the
    time limit it asked for (minutes; None: it asked none, Slurm fits it to the limit)."""

    cpus: int = 1
    mem: int = 0
    nodes: int = 1
    gpus: int = 0
    minutes: int | None = None

    def counts(self) -> tuple[int, int, int, int]:
        return self.cpus, self.mem, self.nodes, self.gpus


@attrs.frozen
class Limits:
    """One association's or one QOS's limits, parsed: the counts and each TRES list."""

    counts: Mapping[str, int] = attrs.field(factory=dict)  # GrpJobs, MaxJobs, MaxWall, ...
    tres: Mapping[str, Mapping[str, int]] = attrs.field(factory=dict)  # GrpTRES -> {cpu: 4}

    @classmethod
    def of(cls, pairs: Mapping[str, str], minutes: Mapping[str, int]) -> Limits:
        """From sacctmgr's stored texts; `minutes`: the time limits already in minutes."""
        counts = {k: int(v) for k, v in pairs.items() if v.isdigit()}
        counts.update(minutes)
        lists = {k: tres(v) for k, v in pairs.items() if "TRES" in k}
        return cls(counts, {k: v for k, v in lists.items() if v})


@attrs.frozen
class Rule:
    """The limits over one job: its QOS (None: no QOS record) and its association chain, the
    job's own first (its Max* limits inherited as slurmdbd fills them in) then each account
    above it to root (Grp* only count there); `chain` keys name each for the usage tally."""

    qos: Limits | None
    qos_name: str
    chain: tuple[tuple[Hashable, Limits], ...]


@attrs.define
class Used:
    """What running jobs hold under one association, QOS, or QOS and user/account."""

    jobs: int = 0
    tres: list[int] = attrs.Factory(lambda: [0, 0, 0, 0])

    def add(self, ask: Ask, sign: int = 1) -> None:
        self.jobs += sign
        for i, n in enumerate(ask.counts()):
            self.tres[i] += sign * n


_EMPTY = Used()


@attrs.define
class Tally:
    """The usage the limits are judged against (acct_policy's grp_used_* and used_limits): a
    job counts in its association and every one above it, its QOS, and its QOS per user and
    per account."""

    assoc: dict[Hashable, Used] = attrs.Factory(dict)
    qos: dict[str, Used] = attrs.Factory(dict)
    qos_user: dict[tuple[str, str], Used] = attrs.Factory(dict)
    qos_acct: dict[tuple[str, str], Used] = attrs.Factory(dict)

    def add(self, rule: Rule, user: str, account: str, ask: Ask, sign: int = 1) -> None:
        """Count a job that holds `ask` (sign -1: one that no longer does)."""
        for key, _ in rule.chain:
            self.assoc.setdefault(key, Used()).add(ask, sign)
        q = rule.qos_name
        self.qos.setdefault(q, Used()).add(ask, sign)
        self.qos_user.setdefault((q, user), Used()).add(ask, sign)
        self.qos_acct.setdefault((q, account), Used()).add(ask, sign)


def reason(rule: Rule, ask: Ask, tally: Tally, user: str, account: str) -> str:
    """The reason the job waits for a limit, "" if none holds it. Slurm's order: the counts
    and walls first (acct_policy_job_runnable_pre_select), QOS before associations; then the
    TRES (…_post_select), QOS before associations. A limit the QOS sets hides the same
    limit of every association (qos_rec's "already set")."""
    return _counts(rule, ask, tally, user, account) or _tres(rule, ask, tally, user, account)


def _counts(rule: Rule, ask: Ask, tally: Tally, user: str, account: str) -> str:
    q = rule.qos.counts if rule.qos is not None else {}
    name = rule.qos_name
    if "GrpJobs" in q and tally.qos.get(name, _EMPTY).jobs >= q["GrpJobs"]:
        return "QOSGrpJobsLimit"
    if "MaxJobsPerAccount" in q and \
            tally.qos_acct.get((name, account), _EMPTY).jobs >= q["MaxJobsPerAccount"]:
        return "MaxJobsPerAccount"
    if "MaxJobsPerUser" in q and \
            tally.qos_user.get((name, user), _EMPTY).jobs >= q["MaxJobsPerUser"]:
        return "QOSMaxJobsPerUserLimit"
    if "MaxWall" in q and ask.minutes is not None and ask.minutes > q["MaxWall"]:
        return "QOSMaxWallDurationPerJobLimit"
    for depth, (key, lim) in enumerate(rule.chain):
        a = lim.counts
        used = tally.assoc.get(key, _EMPTY).jobs
        if "GrpJobs" not in q and "GrpJobs" in a and used >= a["GrpJobs"]:
            return "AssocGrpJobsLimit"
        if depth:
            continue  # the Max* limits are the job's own association's (inherited down)
        if not {"MaxJobsPerAccount", "MaxJobsPerUser"} & q.keys() and "MaxJobs" in a and \
                used >= a["MaxJobs"]:
            return "AssocMaxJobsLimit"
        if "MaxWall" not in q and "MaxWall" in a and ask.minutes is not None and \
                ask.minutes > a["MaxWall"]:
            return "AssocMaxWallDurationPerJobLimit"
    return ""


def _over(limits: Mapping[str, int], ask: Sequence[int], used: Sequence[int] | None,
          skip: Mapping[str, int], per: int = 1) -> int:
    """The index (into TRES) of the first limit the ask breaks, -1 if none: the ask alone over
    it, or (with `used`) the ask and the usage together; a TRES in `skip` is the QOS's."""
    for i, t in enumerate(TRES):
        cap = limits.get(t)
        if cap is None or t in skip:
            continue
        want = -(-ask[i] // per) if per > 1 else ask[i]
        if want > cap or (used is not None and ask[i] and used[i] + ask[i] > cap):
            return i
    return -1


def _tres(rule: Rule, ask: Ask, tally: Tally, user: str, account: str) -> str:
    counts = ask.counts()
    q = rule.qos.tres if rule.qos is not None else {}
    name = rule.qos_name
    nodes = max(ask.nodes, 1)
    checks = (("GrpTRES", tally.qos.get(name, _EMPTY).tres, 1, QOS_GRP),
              ("MaxTRES", None, 1, QOS_PER_JOB), ("MaxTRESPerNode", None, nodes, QOS_PER_NODE),
              ("MaxTRESPerAccount", tally.qos_acct.get((name, account), _EMPTY).tres, 1,
               QOS_PER_ACCT),
              ("MaxTRESPerUser", tally.qos_user.get((name, user), _EMPTY).tres, 1,
               QOS_PER_USER))
    for kind, used, per, reasons in checks:
        i = _over(q.get(kind, {}), counts, used, {}, per)
        if i >= 0:
            return reasons[i]
    for depth, (key, lim) in enumerate(rule.chain):
        i = _over(lim.tres.get("GrpTRES", {}), counts, tally.assoc.get(key, _EMPTY).tres,
                  q.get("GrpTRES", {}))
        if i >= 0:
            return ASSOC_GRP[i]
        if depth:
            continue
        i = _over(lim.tres.get("MaxTRES", {}), counts, None, q.get("MaxTRES", {}))
        if i >= 0:
            return ASSOC_PER_JOB[i]
        i = _over(lim.tres.get("MaxTRESPerNode", {}), counts, None,
                  q.get("MaxTRESPerNode", {}), nodes)
        if i >= 0:
            return ASSOC_PER_NODE[i]
    return ""
