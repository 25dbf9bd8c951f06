"""AccountingStorageEnforce's submission rule over the tree (assoc/enforce.py), without a
controller: each refusal in slurmctld 22.05's words, and what a job keeps when it passes."""

from __future__ import annotations

from ranch.assoc import enforce, ops
from ranch.assoc.db import AcctDb
from ranch.assoc.enforce import Refusal, Resolved

ALL = enforce.enforced(["associations", "limits", "qos"])


def tree() -> AcctDb:
    """physics (MaxSubmitJobs=2, inherited) > theory; alice in theory (DefaultAccount) and in
    physics for partition gpu only; QOS high allowed on theory, its DefaultQOS normal."""
    db = AcctDb.fresh().add_cluster("c1")
    db = ops.add_qos(db, ("high", "low")).db
    db = ops.add_accounts(db, ("physics",), settings={"MaxSubmitJobs": "2"}).db
    db = ops.add_accounts(db, ("theory",), parent="physics").db
    db = ops.add_users(db, ("alice",), ("theory",), default_account="theory").db
    db = ops.add_users(db, ("alice",), ("physics",), partitions=("gpu",)).db
    theory = db.base_assoc("theory", "c1")
    assert theory is not None
    return ops.modify_assocs(db, [theory], {}, qos=("normal", "high"), def_qos="high")[0]


def run(db: AcctDb, flags: frozenset[str] = ALL, *, user: str = "alice", account: str = "",
        parts: tuple[str, ...] = ("main",), qos: str = "", held: int = 0,
        count: int = 1) -> Resolved | Refusal:
    """`held`: the jobs alice has not ended in theory's association (partition main)."""
    return enforce.check(db, flags, cluster="c1", user=user, account=account, partitions=parts,
                         qos=qos, count=count,
                         groups=lambda: {("alice", "theory", "main", "high"): held})


def test_the_flags_imply_associations_as_read_config_does() -> None:
    assert enforce.enforced(["limits"]) == {"limits", "associations"}
    assert enforce.enforced(["QOS"]) == {"qos", "associations"}
    assert enforce.enforced(["safe"]) == {"safe", "limits", "associations"}
    assert enforce.enforced([]) == frozenset()
    assert {"associations", "limits", "qos"} <= enforce.enforced(["all"])


def test_without_associations_nothing_is_checked_or_filled_in() -> None:
    assert run(tree(), frozenset(), user="nobody", account="ghost", qos="x") == \
        Resolved("ghost", "x")


def test_the_default_account_and_the_inherited_default_qos_are_filled_in() -> None:
    assert run(tree()) == Resolved("theory", "high")
    assert run(tree(), account="Theory", qos="normal") == Resolved("theory", "normal")


def test_no_association_for_user_account_or_partition_is_invalid_account() -> None:
    db = tree()
    bad = Refusal("Invalid account or account/partition combination specified")
    assert run(db, user="bob") == bad  # no user record at all
    assert run(db, account="nosuch") == bad
    assert run(db, account="physics") == bad  # alice's physics association is gpu's only
    assert run(db, account="physics", parts=("gpu",)) == Resolved("physics", "normal")
    assert run(db, account="physics", parts=("gpu", "main")) == bad  # each partition needs one


def test_a_qos_unknown_or_not_allowed_is_invalid_qos_only_when_qos_is_enforced() -> None:
    db, bad = tree(), Refusal("Invalid qos specification")
    assert run(db, qos="nosuch") == bad
    assert run(db, qos="low") == bad  # exists, not in theory's list
    assert run(db, enforce.enforced(["associations"]), qos="low") == Resolved("theory", "low")


def test_max_submit_jobs_is_inherited_and_counts_the_jobs_held_and_asked() -> None:
    db = tree()
    policy = Refusal("Job violates accounting/QOS policy (job submit limit, user's size and/or "
                     "time limits)", "AssocMaxSubmitJobLimit")
    assert run(db, held=1) == Resolved("theory", "high")
    assert run(db, held=2) == policy
    assert run(db, held=1, count=2) == policy  # an array's tasks count each
    assert run(db, enforce.enforced(["associations", "qos"]), held=5) == Resolved("theory", "high")


def test_max_submit_jobs_counts_the_jobs_of_the_jobs_own_association() -> None:
    """used_submit_jobs is kept per association: alice's gpu association (MaxSubmitJobs=1)
    holds her gpu jobs only; her partition-less one the rest (acct_policy.c)."""
    db = AcctDb.fresh().add_cluster("c1")
    db = ops.add_accounts(db, ("physics",)).db
    db = ops.add_users(db, ("alice",), ("physics",), default_account="physics").db
    db = ops.add_users(db, ("alice",), ("physics",), partitions=("gpu",),
                       settings={"MaxSubmitJobs": "1"}).db
    policy = Refusal(enforce.POLICY, "AssocMaxSubmitJobLimit")

    def submit(part: str, jobs: dict[tuple[str, str, str, str], int]) -> Resolved | Refusal:
        return enforce.check(db, ALL, cluster="c1", user="alice", account="",
                             partitions=[part], qos="", groups=lambda: jobs)
    in_gpu = {("alice", "physics", "gpu", "normal"): 1}
    assert submit("main", in_gpu) == Resolved("physics", "normal")
    assert submit("gpu", in_gpu) == policy
    assert submit("gpu", {("alice", "physics", "main", "normal"): 5}) == \
        Resolved("physics", "normal")


def test_a_qos_that_requires_a_reservation_refuses_a_job_without_one() -> None:
    """_determine_and_validate_qos: RequiresReservation without --reservation is
    ESLURM_INVALID_QOS, whatever the other flags."""
    db = tree()
    db = ops.modify_qos(db, ["high"], {"flags": ("RequiresReservation",)}, {})[0]
    only = enforce.enforced(["associations"])
    assert run(db, only) == Refusal(enforce.INVALID_QOS)
    assert enforce.check(db, only, cluster="c1", user="alice", account="", partitions=["main"],
                         qos="", reservation="r1") == Resolved("theory", "high")
    assert run(db, only, qos="normal") == Resolved("theory", "normal")
