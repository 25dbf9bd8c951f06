"""The evidence behind an accounting limit's pending reason: which limit, its value, what the
jobs holding under it use, and their ids ("4 of 4 jobs of QOS normal running: 12,13,14,15").
The rule is ranch/assoc/limits.py's Rule, read here as plain fields (sched imports no assoc)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import attrs

TRES = ("cpu", "mem", "node", "gres/gpu")  # assoc/limits.py's order
UNIT = {"mem": " MB"}

# reason -> (level, the limit's key, TRES index or -1 for a count), as assoc/limits.py names
# them (job_reason_string): level "qos", "qos_user", "qos_acct", "qos_job", "qos_node",
# "assoc" (the first association up the chain over it), "assoc_job", "assoc_node"
_COUNTS = {
    "QOSGrpJobsLimit": ("qos", "GrpJobs"), "MaxJobsPerAccount": ("qos_acct", "MaxJobsPerAccount"),
    "QOSMaxJobsPerUserLimit": ("qos_user", "MaxJobsPerUser"),
    "QOSMaxWallDurationPerJobLimit": ("qos_job", "MaxWall"),
    "AssocGrpJobsLimit": ("assoc", "GrpJobs"), "AssocMaxJobsLimit": ("assoc_own", "MaxJobs"),
    "AssocMaxWallDurationPerJobLimit": ("assoc_job", "MaxWall"),
}
_TRES_REASONS = {
    ("qos", "GrpTRES"): ("QOSGrpCpuLimit", "QOSGrpMemLimit", "QOSGrpNodeLimit", "QOSGrpGRES"),
    ("qos_job", "MaxTRES"): ("QOSMaxCpuPerJobLimit", "QOSMaxMemoryPerJob",
                             "QOSMaxNodePerJobLimit", "QOSMaxGRESPerJob"),
    ("qos_node", "MaxTRESPerNode"): ("QOSMaxCpuPerNode", "QOSMaxMemoryPerNode",
                                     "QOSMaxUnknownPerNode", "QOSMaxGRESPerNode"),
    ("qos_acct", "MaxTRESPerAccount"): ("MaxCpuPerAccount", "MaxMemoryPerAccount",
                                        "MaxNodePerAccount", "MaxGRESPerAccount"),
    ("qos_user", "MaxTRESPerUser"): ("QOSMaxCpuPerUserLimit", "QOSMaxMemoryPerUser",
                                     "QOSMaxNodePerUserLimit", "QOSMaxGRESPerUser"),
    ("assoc", "GrpTRES"): ("AssocGrpCpuLimit", "AssocGrpMemLimit", "AssocGrpNodeLimit",
                           "AssocGrpGRES"),
    ("assoc_job", "MaxTRES"): ("AssocMaxCpuPerJobLimit", "AssocMaxMemPerJob",
                               "AssocMaxNodePerJobLimit", "AssocMaxGRESPerJob"),
    ("assoc_node", "MaxTRESPerNode"): ("AssocMaxCpuPerNode", "AssocMaxMemPerNode",
                                       "AssocMaxUnknownPerNode", "AssocMaxGRESPerNode"),
}
# The limits judged on TRES-minutes (decayed usage, running jobs' minutes left, the job's own
# minutes) and QOS MinTRESPerJob: their evidence is the limit itself, not the jobs holding now.
_MINUTE_REASONS = {
    ("qos", "GrpTRESMins"): ("QOSGrpCPUMinutesLimit", "QOSGrpMemoryMinutes", "QOSGrpNodeMinutes",
                             "QOSGrpGRESMinutes"),
    ("qos", "GrpTRESRunMins"): ("QOSGrpCPURunMinutesLimit", "QOSGrpMemoryRunMinutes",
                                "QOSGrpNodeRunMinutes", "QOSGrpGRESRunMinutes"),
    ("qos_job", "MaxTRESMins"): ("QOSMaxCpuMinutesPerJobLimit", "QOSMaxMemoryMinutesPerJob",
                                 "QOSMaxNodeMinutesPerJob", "QOSMaxGRESMinutesPerJob"),
    ("qos_job", "MinTRES"): ("QOSMinCpuNotSatisfied", "QOSMinMemory", "QOSMinNode",
                             "QOSMinGRES"),
    ("assoc", "GrpTRESMins"): ("AssocGrpCPUMinutesLimit", "AssocGrpMemMinutes",
                               "AssocGrpNodeMinutes", "AssocGrpGRESMinutes"),
    ("assoc", "GrpTRESRunMins"): ("AssocGrpCPURunMinutesLimit", "AssocGrpMemRunMinutes",
                                  "AssocGrpNodeRunMinutes", "AssocGrpGRESRunMinutes"),
    ("assoc_job", "MaxTRESMins"): ("AssocMaxCpuMinutesPerJobLimit", "AssocMaxMemMinutesPerJob",
                                   "AssocMaxNodeMinutesPerJob", "AssocMaxGRESMinutesPerJob"),
}
_MINUTE_WORDS = {
    "GrpTRESMins": "its decayed usage and the running jobs' minutes left have reached it",
    "GrpTRESRunMins": "the running jobs' minutes left, with this job's, pass it",
    "MaxTRESMins": "this job's TRES-minutes (its request times its time limit) pass it",
    "MinTRES": "this job asks less than it",
}
REASONS: dict[str, tuple[str, str, int]] = {
    **{r: (lv, key, -1) for r, (lv, key) in _COUNTS.items()},
    **{r: (lv, key, i) for (lv, key), rs in _TRES_REASONS.items() for i, r in enumerate(rs)},
    **{r: (lv, key, i) for (lv, key), rs in _MINUTE_REASONS.items() for i, r in enumerate(rs)},
}


@attrs.frozen
class Holding:
    """A job holding resources, as the limits count it: its association chain's keys, and
    what it holds (cpus, mem MB, nodes, GPUs)."""

    job_id: int
    user: str
    account: str
    qos: str
    assocs: tuple[Hashable, ...]
    counts: tuple[int, int, int, int]


@attrs.frozen
class LimitView:
    """The limits over the pending job (`rule`: assoc/limits.py's Rule: qos, qos_name, chain),
    what it asks (cpus, mem, nodes, GPUs; minutes asked) and the jobs holding now."""

    rule: Any
    user: str
    account: str
    ask: tuple[int, int, int, int]
    minutes: int | None
    holding: tuple[Holding, ...] = ()


def _fmt(i: int, n: int) -> str:
    return f"{n}{UNIT.get(TRES[i], '')}"


def _ids(jobs: Sequence[Holding]) -> str:
    ids = sorted(h.job_id for h in jobs)
    shown = ",".join(map(str, ids[:12]))
    return shown + (f",... ({len(ids)} jobs)" if len(ids) > 12 else "")


def limit_evidence(reason: str, view: LimitView, job_id: int) -> tuple[str, tuple[str, ...]]:
    """(the sentence, further lines) for a job an accounting limit holds."""
    got = REASONS.get(reason)
    rule = view.rule
    if got is None or rule is None:
        return f"{reason}: an accounting limit holds it", ()
    level, key, tres = got
    qname = rule.qos_name
    if key in _MINUTE_WORDS:
        return _minutes_evidence(reason, level, key, tres, view), ()
    others = [h for h in view.holding if h.job_id != job_id]
    if level.startswith("qos"):
        limits: Mapping[str, Any] = {}
        if rule.qos is not None:
            limits = rule.qos.counts if tres < 0 else rule.qos.tres.get(key, {})
        scope, whose = _qos_scope(level, qname, view, others)
    else:
        limits, scope, whose = _assoc_scope(level, key, tres, rule, view, others)
    if tres < 0:
        cap = limits.get(key)
        if key == "MaxWall":
            return (f"{reason}: it asks {view.minutes} min, {whose}'s MaxWall is {cap} min; "
                    f"a shorter --time may start it", ())
        return (f"{reason}: {len(scope)} of {cap} jobs of {whose} running: {_ids(scope)}",
                tuple(f"job {h.job_id} ({h.user}, {h.account})" for h in sorted(
                    scope, key=lambda h: h.job_id)[:6]))
    cap = limits.get(TRES[tres])
    asked = view.ask[tres]
    if level.endswith("_job") or level.endswith("_node"):
        per = " per node" if level.endswith("_node") else ""
        return (f"{reason}: it asks {_fmt(tres, asked)} {TRES[tres]}, over {whose}'s {key} "
                f"{TRES[tres]}={_fmt(tres, cap or 0)}{per}", ())
    used = sum(h.counts[tres] for h in scope)
    return (f"{reason}: {whose} holds {_fmt(tres, used)} of {key} {TRES[tres]}="
            f"{_fmt(tres, cap or 0)} in jobs {_ids(scope) or '(none)'}; this job asks "
            f"{_fmt(tres, asked)}", ())


def _minutes_evidence(reason: str, level: str, key: str, tres: int, view: LimitView) -> str:
    """A TRES-minutes or MinTRES limit: which one, at what value, and what passes it."""
    rule = view.rule
    name = TRES[tres]
    if level.startswith("qos"):
        cap = rule.qos.tres.get(key, {}).get(name) if rule.qos is not None else None
        whose = f"QOS {rule.qos_name}"
    else:  # the job's own association for Max*, else the first one up the chain setting it
        chain = list(rule.chain) if level == "assoc" else list(rule.chain)[:1]
        cap, whose = None, f"association {view.user}/{view.account}"
        for depth, (_, lim) in enumerate(chain):
            cap = lim.tres.get(key, {}).get(name)
            if cap is not None:
                if depth:
                    whose = f"a parent account's association ({depth} above {view.account})"
                break
    unit = "" if key == "MinTRES" else " min"
    shown = "(unset)" if cap is None else f"{_fmt(tres, cap)}{unit}"
    return f"{reason}: {whose}'s {key} {name}={shown}: {_MINUTE_WORDS[key]}"


def _qos_scope(level: str, qname: str, view: LimitView, others: list[Holding]
               ) -> tuple[list[Holding], str]:
    if level == "qos_user":
        return ([h for h in others if h.qos == qname and h.user == view.user],
                f"QOS {qname} for user {view.user}")
    if level == "qos_acct":
        return ([h for h in others if h.qos == qname and h.account == view.account],
                f"QOS {qname} for account {view.account}")
    return [h for h in others if h.qos == qname], f"QOS {qname}"


def _assoc_scope(level: str, key: str, tres: int, rule: Any, view: LimitView,
                 others: list[Holding]) -> tuple[Mapping[str, Any], list[Holding], str]:
    """The association whose limit binds: the job's own for Max*, else the first up the
    chain whose Grp* limit the holding jobs and this one break."""
    chain = list(rule.chain)
    own = f"association {view.user}/{view.account}"
    if level != "assoc" or not chain:
        akey, lim = chain[0] if chain else (None, None)
        limits = {} if lim is None else (lim.counts if tres < 0 else lim.tres.get(key, {}))
        return limits, [h for h in others if akey in h.assocs], own
    for depth, (akey, lim) in enumerate(chain):
        scope = [h for h in others if akey in h.assocs]
        limits = lim.counts if tres < 0 else lim.tres.get(key, {})
        name = TRES[tres] if tres >= 0 else key
        cap = limits.get(name)
        if cap is None:
            continue
        used = len(scope) if tres < 0 else sum(h.counts[tres] for h in scope)
        if used + (1 if tres < 0 else view.ask[tres]) > cap or (tres < 0 and used >= cap):
            return limits, scope, own if depth == 0 else f"a parent account's association " \
                f"({depth} above {view.account})"
    akey, lim = chain[0]
    return (lim.counts if tres < 0 else lim.tres.get(key, {}),
            [h for h in others if akey in h.assocs], own)
