"""AccountingStorageEnforce at submission (slurmctld 22.05 job_mgr.c _job_create): a job's
association, its QOS and its submit limit, resolved over the AcctDb or refused in sbatch's words."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from ranch.assoc import submitlimits
from ranch.assoc.acctmgr_values import minutes
from ranch.assoc.db import AcctDb
from ranch.assoc.partpolicy import PartPolicy
from ranch.assoc.records import ASSOC_LIMITS, Assoc
from ranch.assoc.tally import TRES, Ask, Limits, Rule
from ranch.assoc.usage import Usage

# slurm_strerror (src/common/slurm_errno.c) of the errors _job_create answers
# ESLURM_INVALID_ACCOUNT
INVALID_ACCOUNT = "Invalid account or account/partition combination specified"
INVALID_QOS = "Invalid qos specification"  # ESLURM_INVALID_QOS
POLICY = ("Job violates accounting/QOS policy (job submit limit, user's size and/or time "
          "limits)")  # ESLURM_ACCOUNTING_POLICY


def enforced(words: Iterable[str]) -> frozenset[str]:
    """The flags AccountingStorageEnforce sets (read_config.c): limits and qos imply
    associations, safe implies limits."""
    flags = {w.strip().lower() for w in words if w.strip()}
    if "all" in flags:  # everything but nojobs and nosteps
        flags |= {"associations", "limits", "qos", "safe", "wckeys"}
    if flags & {"limits", "qos", "safe"}:
        flags.add("associations")
    if "safe" in flags:
        flags.add("limits")
    return frozenset(flags)


@attrs.frozen
class Resolved:
    """What the job keeps: the account and QOS it runs under, and the time limit (minutes) its
    limits gave it when it asked none (None: they gave none)."""

    account: str
    qos: str
    time_limit: int | None = None


@attrs.frozen
class Refusal:
    """`message`: slurm_strerror's words (sbatch: "Batch job submission failed: ...");
    `reason`: job_reason_string slurmctld sends with ESLURM_ACCOUNTING_POLICY (sbatch prints it
    on a line of its own first), else ""."""

    message: str
    reason: str = ""


def association(db: AcctDb, cluster: str, user: str, account: str,
                partition: str) -> Assoc | None:
    """assoc_mgr_fill_in_assoc: the user's association for the account in that partition, else
    the one for every partition."""
    return (db.find_assoc(cluster, account, user, partition)
            or db.find_assoc(cluster, account, user, ""))


def default_qos(db: AcctDb, a: Assoc) -> str:
    """assoc_mgr_get_default_qos_info: the association's DefaultQOS (inherited), else its only
    allowed QOS, else normal."""
    named = db.effective_def_qos(a)
    if named:
        return named
    allowed = db.effective_qos(a)
    return allowed[0] if len(allowed) == 1 else "normal"


def check(db: AcctDb, enforce: frozenset[str], *, cluster: str, user: str, account: str,
          partitions: Sequence[str], qos: str, reservation: str = "",
          count: int = 1, ask: Ask | None = None,
          parts: Mapping[str, PartPolicy] | None = None, part_enforce: str = "NO",
          spent: Usage | None = None,
          groups: Callable[[], submitlimits.Groups] | None = None,
          rule_of: Callable[[str, str, str, str], Rule | None] | None = None
          ) -> Resolved | Refusal:
    """A submission by `user` with -A `account` ("" = the user's DefaultAccount) into
    `partitions` (each needs an association: _check_for_part_assocs) with -q `qos` ("" = the
    association's default) and --reservation `reservation`, `count` jobs (an array's tasks)
    each asking `ask`; `parts`: each partition's QOS= and Allow/Deny words, refused here
    under EnforcePartLimits (`part_enforce` ALL or ANY); `groups`: the jobs not ended by
    (user, account, partition, QOS), read only when a submit limit over the job needs them
    (MaxSubmitJobs counts the job's own association's: one with a partition is its own);
    `rule_of`: the limits over a
    job of (user, account, partition, QOS) as `rule` gives them, remembered by the caller."""
    if "associations" not in enforce:
        return Resolved(account, qos)
    if not account:
        known = db.user(user)
        account = known.default_account if known is not None else ""
    account = account.lower()  # slurmdbd keeps account names in lower case
    assocs = [association(db, cluster, user, account, p) for p in partitions]
    first = assocs[0] if assocs else None
    if first is None or None in assocs:
        return Refusal(INVALID_ACCOUNT)
    chosen = qos.lower() or default_qos(db, first)
    if "qos" in enforce and (db.qos_named(chosen) is None
                             or chosen not in db.effective_qos(first)):
        return Refusal(INVALID_QOS)
    if requires_reservation(db, chosen) and not reservation:
        # _determine_and_validate_qos: "can only be used in a reservation" (log), whatever
        # the flags, refused with ESLURM_INVALID_QOS's words
        return Refusal(INVALID_QOS)
    parts = parts or {}
    denied = _part_access(parts, partitions, account, chosen, part_enforce)
    if denied is not None:
        return denied
    fitted = None
    if "limits" in enforce:
        resolve = rule_of or _resolver(db, cluster, parts, spent)
        for i, p in enumerate(partitions):
            got = resolve(user, account, p, chosen)
            if got is None:
                continue
            counts = None
            if groups is not None and _counts_submits(got):
                counts = submitlimits.queued(groups(), resolve)
            # used_submit_jobs is kept on each association (acct_policy.c
            # _adjust_limit_usage), so MaxSubmitJobs counts the jobs of the job's own one
            held = counts.assoc.get(got.chain[0][0], 0) if counts is not None else 0
            why = submitlimits.refusal(got, ask or Ask(), held, count, counts, user, account)
            if why:
                return Refusal(POLICY, why)
            if not i and ask is not None and ask.minutes is None:
                fitted = submitlimits.fitted(got, ask)
    return Resolved(account, chosen, fitted)


_SUBMITS = ("GrpSubmitJobs", "MaxSubmitJobsPerUser", "MaxSubmitJobsPerAccount")


def _counts_submits(got: Rule) -> bool:
    """Whether a limit over the job counts the jobs submitted (the count is read then only)."""
    return any(n in q.counts for _, q in got.ordered() for n in _SUBMITS) or any(
        "GrpSubmitJobs" in lim.counts for _, lim in got.chain) or (
        bool(got.chain) and "MaxSubmitJobs" in got.chain[0][1].counts)


def requires_reservation(db: AcctDb, qos: str) -> bool:
    """A QOS with the RequiresReservation flag: only jobs with --reservation may use it."""
    record = db.qos_named(qos)
    return record is not None and "RequiresReservation" in record.flags


def _resolver(db: AcctDb, cluster: str, parts: Mapping[str, PartPolicy],
              spent: Usage | None) -> Callable[[str, str, str, str], Rule | None]:
    def of(user: str, account: str, partition: str, qos: str) -> Rule | None:
        return rule(db, cluster=cluster, user=user, account=account, partition=partition,
                    qos=qos, part=parts.get(partition), spent=spent)
    return functools.cache(of)


def _part_access(parts: Mapping[str, PartPolicy], partitions: Sequence[str], account: str,
                 qos: str, part_enforce: str) -> Refusal | None:
    """_part_access_check under EnforcePartLimits: the account (AllowAccounts, DenyAccounts)
    then the QOS (AllowQos, DenyQos); ALL refuses if any partition refuses, ANY if all do."""
    if part_enforce not in ("ALL", "ANY"):
        return None
    refused: list[Refusal] = []
    for p in partitions:
        policy = parts.get(p)
        if policy is None:
            continue
        if not policy.account_ok(account):
            refused.append(Refusal(INVALID_ACCOUNT))
        elif not policy.qos_ok(qos):
            refused.append(Refusal(INVALID_QOS))
    if refused and (part_enforce == "ALL" or len(refused) == len(partitions)):
        return refused[0]
    return None


def _limits(pairs: dict[str, str], used: float = 0.0, wall: float = 0.0,
            flags: tuple[str, ...] = (), by_tres: Mapping[str, float] | None = None) -> Limits:
    """Parsed limits; `by_tres`: the decayed TRES-seconds GrpTRESMins is judged on (a usage
    record kept before them: the billable usage `used` as the CPU's); `wall`: the decayed wall
    seconds run, GrpWall's (acct_policy counts whole minutes)."""
    walls = {k: minutes(v) for k, v in pairs.items() if k in ("MaxWall", "GrpWall") and v}
    got = Limits.of(pairs, walls)
    spent = (tuple(by_tres.get(t, 0.0) / 60 for t in TRES) if by_tres
             else (used / 60, 0.0, 0.0, 0.0))
    return attrs.evolve(got, used_mins=spent, wall_mins=float(wall // 60),
                        flags=frozenset(flags))


def _qos_limits(db: AcctDb, name: str, spent: Usage | None) -> Limits | None:
    record = db.qos_named(name)
    if record is None:
        return None
    if spent is None:
        return _limits(dict(record.limits), flags=record.flags)
    return _limits(dict(record.limits), spent.qos.get(name, 0.0),
                   spent.qos_walls.get(name, 0.0), record.flags, spent.qos_tres.get(name))


def rule(db: AcctDb, *, cluster: str, user: str, account: str, partition: str,
         qos: str, part: PartPolicy | None = None, safe: bool = False,
         spent: Usage | None = None) -> Rule | None:
    """The limits over a job run by `user` under `account` and `qos` ("" = the defaults) in
    `partition`, whose QOS= and Allow/Deny words are `part` (assoc/limits.py); `spent`: the
    decayed usage so far; None when it has no association (InvalidAccount's case)."""
    if not account:
        known = db.user(user)
        account = known.default_account if known is not None else ""
    own = association(db, cluster, user, account.lower(), partition)
    if own is None:
        return None
    name = qos.lower() or default_qos(db, own)
    assocs = spent.assocs if spent is not None else {}
    walls = spent.walls if spent is not None else {}
    by_tres = spent.tres if spent is not None else {}
    chain = [(own.id, _limits({n: db.effective(own, n) for n in ASSOC_LIMITS},
                              assocs.get(own.id, 0.0), walls.get(own.id, 0.0),
                              by_tres=by_tres.get(own.id)))]
    node = db.parent_of(own)
    while node is not None:
        chain.append((node.id, _limits(dict(node.limits), assocs.get(node.id, 0.0),
                                       walls.get(node.id, 0.0), by_tres=by_tres.get(node.id))))
        node = db.parent_of(node)
    pq = part.qos if part is not None else ""
    return Rule(qos=_qos_limits(db, name, spent), qos_name=name, chain=tuple(chain),
                part_qos=_qos_limits(db, pq, spent) if pq else None, part_qos_name=pq,
                safe=safe,
                part_reason=part.reason(account.lower(), name) if part is not None else "")
