"""A submission against its limits (slurmctld 22.05 acct_policy.c _acct_policy_validate): under
a QOS with DenyOnLimit (strict checking) a job whose own size or time breaks a QOS or
association limit is refused with the limit's reason, where without it the job would pend; the
submit caps (MaxSubmitJobs, GrpSubmitJobs, MaxSubmitJobsPerUser/PerAccount) refuse whatever the
flags; and a job that asked no time limit gets the one its limits give."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

import attrs

from ranch.assoc import reasons as r
from ranch.assoc.tally import TRES, Ask, Limits, Rule

# (user, account, partition, QOS) of jobs not ended -> how many
Groups = Mapping[tuple[str, str, str, str], int]


@attrs.frozen
class Queued:
    """The jobs not ended (slurmctld's used_submit_jobs) by association (each one above the
    job's too), by QOS (the job's and its partition's), by QOS and user, by QOS and account."""

    assoc: Mapping[Hashable, int] = attrs.field(factory=dict)
    qos: Mapping[str, int] = attrs.field(factory=dict)
    qos_user: Mapping[tuple[str, str], int] = attrs.field(factory=dict)
    qos_acct: Mapping[tuple[str, str], int] = attrs.field(factory=dict)


def queued(groups: Groups, rule_of: Callable[[str, str, str, str], Rule | None]) -> Queued:
    """Count the jobs of each (user, account, partition, QOS) group where their limits do."""
    assoc: dict[Hashable, int] = {}
    qos: dict[str, int] = {}
    qos_user: dict[tuple[str, str], int] = {}
    qos_acct: dict[tuple[str, str], int] = {}
    for (user, account, partition, name), n in groups.items():
        got = rule_of(user, account, partition, name)
        if got is None:
            continue
        for key, _ in got.chain:
            assoc[key] = assoc.get(key, 0) + n
        for q, _ in got.ordered() or ((got.qos_name, None),):
            qos[q] = qos.get(q, 0) + n
            qos_user[(q, user)] = qos_user.get((q, user), 0) + n
            qos_acct[(q, account)] = qos_acct.get((q, account), 0) + n
    return Queued(assoc, qos, qos_user, qos_acct)


def _over(limits: Mapping[str, int], want: tuple[int, ...], skip: set[str],
          per: int = 1, least: bool = False) -> int:
    """The first TRES (index) the job alone breaks: over the limit (per node: floored, as
    _validate_tres_limits_* divide), or short of a minimum; -1 if none."""
    for i, t in enumerate(TRES):
        cap = limits.get(t)
        if cap is None or t in skip:
            continue
        ask = want[i] // per if per > 1 else want[i]
        if (ask < cap) if least else (want[i] and ask > cap):
            return i
    return -1


def _too_long(limits: Mapping[str, int], want: tuple[int, ...], minutes: int | None,
              skip: set[str]) -> int:
    """_validate_tres_time_limits: the first TRES whose limit in TRES-minutes, over what the
    job asks of it, is shorter than the time limit it asked (none asked: it is fitted)."""
    if minutes is None:
        return -1
    for i, t in enumerate(TRES):
        cap = limits.get(t)
        if cap is None or t in skip or not want[i]:
            continue
        if minutes > cap // want[i]:
            return i
    return -1


class _Masks:
    """qos_rec: a limit the first QOS sets hides the same in the next QOS and the
    associations."""

    def __init__(self) -> None:
        self.tres: dict[str, set[str]] = {}
        self.counts: set[str] = set()

    def of(self, kind: str) -> set[str]:
        return self.tres.setdefault(kind, set())

    def mark(self, kind: str, limits: Mapping[str, int]) -> None:
        self.of(kind).update(limits)


def refusal(rule: Rule, ask: Ask, held: int = 0, count: int = 1,
            queued: Queued | None = None, user: str = "", account: str = "") -> str:
    """The reason the submission is refused ("" if none): `held` the jobs the user holds
    under the association already (MaxSubmitJobs), `count` the jobs it adds (array tasks),
    `queued` the jobs not ended under each limit (GrpSubmitJobs, MaxSubmitJobsPerUser and
    PerAccount, counted whatever the flags), `user` and `account` the job's."""
    strict = rule.strict()
    masks = _Masks()
    sub = _Submits(queued or Queued(), count, masks)
    for name, q in rule.ordered():
        why = _qos(name, q, ask, masks, sub, strict, user, account)
        if why:
            return why
    for depth, (key, lim) in enumerate(rule.chain):
        why = _assoc(lim, ask, masks, strict, own=not depth, held=held, count=count,
                     submitted=sub.over(lim, "GrpSubmitJobs", sub.queued.assoc.get(key, 0)))
        if why:
            return why
    return ""


class _Submits:
    """The submit counts: a QOS's first limit hides the same in the next QOS."""

    def __init__(self, queued: Queued, count: int, masks: _Masks) -> None:
        self.queued, self.count, self.masks = queued, count, masks

    def over(self, limits: Limits, name: str, used: int, qos: bool = False) -> bool:
        cap = limits.counts.get(name)
        if cap is None or name in self.masks.counts:
            return False
        if qos:
            self.masks.counts.add(name)
        return used + self.count > cap


def _qos(name: str, q: Limits, ask: Ask, masks: _Masks, sub: _Submits, strict: bool,
         user: str, account: str) -> str:
    want = ask.counts()

    def tres(kind: str) -> Mapping[str, int]:
        return q.tres.get(kind, {}) if strict else {}

    i = _over(tres("MaxTRESPerAccount"), want, masks.of("MaxTRESPerAccount"))
    masks.mark("MaxTRESPerAccount", tres("MaxTRESPerAccount"))
    if i >= 0:
        return r.QOS_PER_ACCT[i]
    skip = masks.of("GrpTRES") | masks.of("MaxTRESPerUser")
    i = _over(tres("MaxTRESPerUser"), want, skip)
    if i >= 0:
        return r.QOS_PER_USER[i]
    i = _over(tres("GrpTRES"), want, skip)
    if i >= 0:
        return r.QOS_GRP[i]
    masks.mark("GrpTRES", tres("GrpTRES"))
    masks.mark("MaxTRESPerUser", tres("MaxTRESPerUser"))
    if sub.over(q, "GrpSubmitJobs", sub.queued.qos.get(name, 0), qos=True):
        return "QOSGrpSubmitJobsLimit"
    for kind, names in (("MaxTRESMins", r.QOS_MINS_PER_JOB), ("GrpTRESMins", r.QOS_GRP_MIN),
                        ("GrpTRESRunMins", r.QOS_GRP_RUN_MIN)):
        i = _too_long(tres(kind), want, ask.minutes, masks.of(kind))
        masks.mark(kind, tres(kind))
        if i >= 0:
            return names[i]
    for wall, why in (("MaxWall", "QOSMaxWallDurationPerJobLimit"),
                      ("GrpWall", "QOSGrpWallLimit")):
        cap = q.counts.get(wall)
        if cap is None or wall in masks.counts:
            continue
        masks.counts.add(wall)
        if strict and ask.minutes is not None and ask.minutes > cap:
            return why
    for kind, names, per in (("MaxTRES", r.QOS_PER_JOB, 1),
                             ("MaxTRESPerNode", r.QOS_PER_NODE, max(ask.nodes, 1))):
        i = _over(tres(kind), want, masks.of(kind), per)
        masks.mark(kind, tres(kind))
        if i >= 0:
            return names[i]
    if sub.over(q, "MaxSubmitJobsPerAccount", sub.queued.qos_acct.get((name, account), 0),
                qos=True):
        return "MaxSubmitJobsPerAccount"
    if sub.over(q, "MaxSubmitJobsPerUser", sub.queued.qos_user.get((name, user), 0), qos=True):
        return "QOSMaxSubmitJobPerUserLimit"
    i = _over(tres("MinTRES"), want, masks.of("MinTRES"), least=True)
    masks.mark("MinTRES", tres("MinTRES"))
    return r.QOS_MIN[i] if i >= 0 else ""


def _assoc(lim: Limits, ask: Ask, masks: _Masks, strict: bool, *, own: bool, held: int,
           count: int, submitted: bool) -> str:
    want = ask.counts()

    def tres(kind: str) -> Mapping[str, int]:
        return lim.tres.get(kind, {}) if strict else {}

    i = _over(tres("GrpTRES"), want, masks.of("GrpTRES"))
    if i >= 0:
        return r.ASSOC_GRP[i]
    if submitted:  # GrpSubmitJobs, whatever the flags
        return "AssocGrpSubmitJobsLimit"
    for kind, names in (("GrpTRESMins", r.ASSOC_GRP_MIN),
                        ("GrpTRESRunMins", r.ASSOC_GRP_RUN_MIN)):
        i = _too_long(tres(kind), want, ask.minutes, masks.of(kind))
        if i >= 0:
            return names[i]
    if _wall(lim, "GrpWall", ask, masks, strict):
        return "AssocGrpWallLimit"
    if not own:
        return ""
    for kind, names, per in (("MaxTRES", r.ASSOC_PER_JOB, 1),
                             ("MaxTRESPerNode", r.ASSOC_PER_NODE, max(ask.nodes, 1))):
        i = _over(tres(kind), want, masks.of(kind), per)
        if i >= 0:
            return names[i]
    cap = lim.counts.get("MaxSubmitJobs")
    if cap is not None and held + count > cap and \
            not {"MaxSubmitJobsPerAccount", "MaxSubmitJobsPerUser"} & masks.counts:
        return "AssocMaxSubmitJobLimit"
    i = _too_long(tres("MaxTRESMins"), want, ask.minutes, masks.of("MaxTRESMins"))
    if i >= 0:
        return r.ASSOC_MINS_PER_JOB[i]
    return "AssocMaxWallDurationPerJobLimit" if _wall(lim, "MaxWall", ask, masks, strict) else ""


def _wall(lim: Limits, name: str, ask: Ask, masks: _Masks, strict: bool) -> bool:
    cap = lim.counts.get(name)
    return (strict and cap is not None and name not in masks.counts
            and ask.minutes is not None and ask.minutes > cap)


def fitted(rule: Rule, ask: Ask) -> int | None:
    """The time limit (minutes) the limits give a job that asked none and whose partition has
    no DefaultTime, None if no limit gives one (_validate_time_limit / _set_time_limit): the
    first wall limit met sets it, a QOS's MaxWall and GrpWall lower it after. Under strict
    checking the TRES-minutes limits count too (over what the job asks of that TRES) and every
    limit lowers it (_validate_tres_time_limits looks at nothing otherwise)."""
    strict = rule.strict()
    want = ask.counts()
    got: int | None = None
    masks = _Masks()

    def meet(cap: int, direct: bool = False) -> None:
        nonlocal got
        if got is None:
            got = cap
        elif strict or direct:
            got = min(got, cap)

    def tres_minutes(limits: Limits, kinds: tuple[str, ...], qos: bool) -> None:
        if not strict:
            return
        for kind in kinds:
            caps = limits.tres.get(kind, {})
            for i, t in enumerate(TRES):
                if t in caps and want[i] and t not in masks.of(kind):
                    meet(caps[t] // want[i])
            if qos:
                masks.mark(kind, caps)

    for _, q in rule.ordered():
        tres_minutes(q, ("MaxTRESMins", "GrpTRESMins", "GrpTRESRunMins"), qos=True)
        for name in ("MaxWall", "GrpWall"):
            if name in q.counts and name not in masks.counts:
                masks.counts.add(name)
                meet(q.counts[name], direct=True)
    for depth, (_, lim) in enumerate(rule.chain):
        tres_minutes(lim, ("GrpTRESMins", "GrpTRESRunMins"), qos=False)
        if "GrpWall" in lim.counts and "GrpWall" not in masks.counts:
            meet(lim.counts["GrpWall"])
        if not depth:
            tres_minutes(lim, ("MaxTRESMins",), qos=False)
            if "MaxWall" in lim.counts and "MaxWall" not in masks.counts:
                meet(lim.counts["MaxWall"])
    return got
