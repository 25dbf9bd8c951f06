"""AccountingStorageEnforce at submission (slurmctld 22.05 job_mgr.c _job_create): a job's
association, its QOS and its submit limit, resolved over the AcctDb or refused in sbatch's words."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import attrs

from ranch.assoc.acctmgr_values import minutes
from ranch.assoc.db import AcctDb
from ranch.assoc.limits import Limits, Rule
from ranch.assoc.records import ASSOC_LIMITS, Assoc

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
    """What the job keeps: the account and QOS it runs under."""

    account: str
    qos: str


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
          partitions: Sequence[str], qos: str, held: Callable[[str], int],
          count: int = 1) -> Resolved | Refusal:
    """A submission by `user` with -A `account` ("" = the user's DefaultAccount) into
    `partitions` (each needs an association: _check_for_part_assocs) with -q `qos` ("" = the
    association's default), `count` jobs (an array's tasks). `held(account)`: the jobs the user
    holds (pending or running) under that account, for MaxSubmitJobs."""
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
    if "limits" in enforce:
        cap = db.effective(first, "MaxSubmitJobs")
        if cap and held(account) + count > int(cap):
            return Refusal(POLICY, "AssocMaxSubmitJobLimit")
    return Resolved(account, chosen)


def _limits(pairs: dict[str, str]) -> Limits:
    walls = {k: minutes(v) for k, v in pairs.items() if k in ("MaxWall", "GrpWall") and v}
    return Limits.of(pairs, walls)


def rule(db: AcctDb, *, cluster: str, user: str, account: str, partition: str,
         qos: str) -> Rule | None:
    """The limits over a job run by `user` under `account` and `qos` ("" = the defaults) in
    `partition` (assoc/limits.py), None when it has no association (InvalidAccount's case)."""
    if not account:
        known = db.user(user)
        account = known.default_account if known is not None else ""
    own = association(db, cluster, user, account.lower(), partition)
    if own is None:
        return None
    name = qos.lower() or default_qos(db, own)
    record = db.qos_named(name)
    chain = [(own.id, _limits({n: db.effective(own, n) for n in ASSOC_LIMITS}))]
    node = db.parent_of(own)
    while node is not None:
        chain.append((node.id, _limits(dict(node.limits))))
        node = db.parent_of(node)
    return Rule(qos=_limits(dict(record.limits)) if record is not None else None,
                qos_name=name, chain=tuple(chain))
