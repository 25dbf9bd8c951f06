"""AccountingStorageEnforce=limits at scheduling (slurmctld 22.05 acct_policy.c
acct_policy_job_runnable_pre_select / _post_select): whether a pending job may start now under
its QOS's, its partition's QOS's and its associations' limits, given what the running jobs hold
and what was used, and else the pending reason job_reason_string gives."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ranch.assoc import reasons as r
from ranch.assoc.tally import EMPTY, TRES, Ask, Limits, Rule, Tally, Used, tres

__all__ = ["TRES", "Ask", "Limits", "Rule", "Tally", "Used", "reason", "tres"]


class _Seen:
    """qos_rec: the limits a QOS looked at already, hidden from the next QOS and from the
    associations: count names, and (TRES list name, TRES) pairs."""

    def __init__(self) -> None:
        self.counts: set[str] = set()
        self.tres: set[tuple[str, str]] = set()

    def skip(self, kind: str) -> set[str]:
        return {t for k, t in self.tres if k == kind}


def reason(rule: Rule, ask: Ask, tally: Tally, user: str, account: str,
           now: float = 0.0) -> str:
    """The reason the job waits for a limit, "" if none holds it. Slurm's order: the counts
    and walls first (pre_select), each QOS (the first hiding a limit the next sets) before the
    associations; then the TRES (post_select) in the same order. `now`: wall seconds, for the
    running jobs' TRES-minutes left."""
    seen = _Seen()
    for name, q in rule.ordered():
        why = _qos_counts(name, q, rule, ask, tally, user, account, seen)
        if why:
            return why
    why = _assoc_counts(rule, ask, tally, seen) or rule.part_reason  # then select_nodes'
    if why:
        return why
    seen = _Seen()
    for name, q in rule.ordered():
        why = _qos_tres(name, q, rule, ask, tally, user, account, seen, now)
        if why:
            return why
    return _assoc_tres(rule, ask, tally, seen, now)


def _first(seen: _Seen, name: str, limits: Limits) -> int | None:
    """A count limit the QOS sets that no QOS before it set (then marked seen)."""
    if name not in limits.counts or name in seen.counts:
        return None
    seen.counts.add(name)
    return limits.counts[name]


def _grp_wall(cap: int, used: float, ask: Ask, safe: bool) -> bool:
    """GrpWall: the wall used (decayed minutes) reached it, or (safe) would pass it."""
    span = math.inf if ask.limit is None else ask.limit
    return used >= cap or (safe and used + span > cap)


def _qos_counts(name: str, q: Limits, rule: Rule, ask: Ask, tally: Tally, user: str,
                account: str, seen: _Seen) -> str:
    cap = _first(seen, "GrpJobs", q)
    if cap is not None and tally.qos.get(name, EMPTY).jobs >= cap:
        return "QOSGrpJobsLimit"
    cap = _first(seen, "GrpWall", q)
    if cap is not None and _grp_wall(cap, q.wall_mins, ask, rule.safe):
        return "QOSGrpWallLimit"
    cap = _first(seen, "MaxJobsPerAccount", q)
    if cap is not None and tally.qos_acct.get((name, account), EMPTY).jobs >= cap:
        return "MaxJobsPerAccount"
    cap = _first(seen, "MaxJobsPerUser", q)
    if cap is not None and tally.qos_user.get((name, user), EMPTY).jobs >= cap:
        return "QOSMaxJobsPerUserLimit"
    cap = _first(seen, "MaxWall", q)
    if cap is not None and ask.minutes is not None and ask.minutes > cap:
        return "QOSMaxWallDurationPerJobLimit"
    return ""


def _assoc_counts(rule: Rule, ask: Ask, tally: Tally, seen: _Seen) -> str:
    q = seen.counts
    for depth, (key, lim) in enumerate(rule.chain):
        a = lim.counts
        used = tally.assoc.get(key, EMPTY).jobs
        if "GrpJobs" not in q and "GrpJobs" in a and used >= a["GrpJobs"]:
            return "AssocGrpJobsLimit"
        if "GrpWall" not in q and "GrpWall" in a and \
                _grp_wall(a["GrpWall"], lim.wall_mins, ask, rule.safe):
            return "AssocGrpWallLimit"
        if depth:
            continue  # the Max* limits are the job's own association's (inherited down)
        if not {"MaxJobsPerAccount", "MaxJobsPerUser"} & q and "MaxJobs" in a and \
                used >= a["MaxJobs"]:
            return "AssocMaxJobsLimit"
        if "MaxWall" not in q and "MaxWall" in a and ask.minutes is not None and \
                ask.minutes > a["MaxWall"]:
            return "AssocMaxWallDurationPerJobLimit"
    return ""


def _usage(limits: dict[str, int] | None, want: Sequence[float], *,
           used: Sequence[float] | None = None, spent: Sequence[float] | None = None,
           safe: bool = False, skip: set[str] | None = None, per: int = 1,
           least: bool = False) -> int:
    """_validate_tres_usage_limits / _validate_tres_limits_*: the index (into TRES) of the
    first limit the job breaks, -1 if none. With `used` (what running jobs hold): `spent`
    (usage so far) reached it while the job asks that TRES; `safe`: the ask alone over it, or
    the ask and `used` over what `spent` left. Without: `least`, a minimum the ask falls short
    of; else the ask (per node with `per`, rounded up) over it."""
    for i, t in enumerate(TRES):
        cap = (limits or {}).get(t)
        if cap is None or (skip is not None and t in skip):
            continue
        ask = want[i]
        if used is not None:
            so_far = spent[i] if spent is not None else 0.0
            if spent is not None and ask and so_far >= cap:
                return i
            if safe and (ask > cap or (ask and ask + used[i] > cap - so_far)):
                return i
        elif least:
            if ask < cap:
                return i
        elif (-(-ask // per) if per > 1 else ask) > cap:
            return i
    return -1


def _mark(seen: _Seen, kind: str, limits: dict[str, int] | None) -> None:
    for t in limits or {}:
        seen.tres.add((kind, t))


def _qos_tres(name: str, q: Limits, rule: Rule, ask: Ask, tally: Tally, user: str,
              account: str, seen: _Seen, now: float) -> str:
    counts, mins = ask.counts(), ask.tres_minutes()
    grp = tally.qos.get(name, EMPTY)
    nodes = max(ask.nodes, 1)
    acct = tally.qos_acct.get((name, account), EMPTY)
    usr = tally.qos_user.get((name, user), EMPTY)
    run = grp.run_minutes(now)
    checks = (
        ("GrpTRESMins", dict(want=mins, used=run, spent=q.used_mins, safe=rule.safe),
         r.QOS_GRP_MIN),
        ("GrpTRES", dict(want=counts, used=grp.tres, safe=True), r.QOS_GRP),
        ("GrpTRESRunMins", dict(want=mins, used=run, safe=True), r.QOS_GRP_RUN_MIN),
        ("MaxTRESMins", dict(want=mins), r.QOS_MINS_PER_JOB),
        ("MaxTRES", dict(want=counts), r.QOS_PER_JOB),
        # sacctmgr's MaxTRESPerNode: the job's TRES over its nodes
        ("MaxTRESPerNode", dict(want=counts, per=nodes), r.QOS_PER_NODE),
        ("MinTRES", dict(want=counts, least=True), r.QOS_MIN),
        ("MaxTRESPerAccount", dict(want=counts, used=acct.tres, safe=True), r.QOS_PER_ACCT),
        ("MaxTRESPerUser", dict(want=counts, used=usr.tres, safe=True), r.QOS_PER_USER),
    )
    for kind, how, names in checks:
        limits = dict(q.tres.get(kind, {}))
        i = _usage(limits, skip=seen.skip(kind), **how)
        _mark(seen, kind, limits)
        if i >= 0:
            return names[i]
    return ""


def _assoc_tres(rule: Rule, ask: Ask, tally: Tally, seen: _Seen, now: float) -> str:
    counts, mins = ask.counts(), ask.tres_minutes()
    nodes = max(ask.nodes, 1)
    for depth, (key, lim) in enumerate(rule.chain):
        used = tally.assoc.get(key, EMPTY)
        run = used.run_minutes(now)
        checks = [
            ("GrpTRESMins", dict(want=mins, used=run, spent=lim.used_mins, safe=rule.safe),
             r.ASSOC_GRP_MIN),
            ("GrpTRES", dict(want=counts, used=used.tres, safe=True), r.ASSOC_GRP),
            ("GrpTRESRunMins", dict(want=mins, used=run, safe=True), r.ASSOC_GRP_RUN_MIN)]
        if not depth:  # the Max* limits: the job's own association's (inherited down)
            checks += [("MaxTRESMins", dict(want=mins), r.ASSOC_MINS_PER_JOB),
                       ("MaxTRES", dict(want=counts), r.ASSOC_PER_JOB),
                       ("MaxTRESPerNode", dict(want=counts, per=nodes), r.ASSOC_PER_NODE)]
        for kind, how, names in checks:
            i = _usage(dict(lim.tres.get(kind, {})), skip=seen.skip(kind),
                       **how)  # type: ignore[arg-type]
            if i >= 0:
                return names[i]
    return ""
