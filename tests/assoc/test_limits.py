"""AccountingStorageEnforce=limits at scheduling (assoc/limits.py over assoc/enforce.rule), without
a controller: each limit's pending reason as slurmctld 22.05 names it, association limits
checked up through every account to root, QOS before association, a QOS limit hiding the
association's same limit."""

from __future__ import annotations

import pytest

from ranch.assoc import enforce, ops
from ranch.assoc.db import AcctDb
from ranch.assoc.limits import Ask, Rule, Tally, reason, tres


def tree(acct: dict[str, str] | None = None, top: dict[str, str] | None = None,
         user: dict[str, str] | None = None, qos: dict[str, str] | None = None) -> AcctDb:
    """top (limits `top`) > physics (limits `acct`) > alice (limits `user`), QOS normal
    (limits `qos`)."""
    db = AcctDb.fresh().add_cluster("c1")
    db = ops.add_accounts(db, ("top",), settings=top or {}).db
    db = ops.add_accounts(db, ("physics",), parent="top", settings=acct or {}).db
    db = ops.add_users(db, ("alice", "bob"), ("physics",), default_account="physics",
                       settings=user or {}).db
    if qos:
        db = ops.modify_qos(db, ["normal"], {}, qos)[0]
    return db


def rule(db: AcctDb, user: str = "alice") -> Rule:
    got = enforce.rule(db, cluster="c1", user=user, account="", partition="", qos="")
    assert got is not None
    return got


def judge(db: AcctDb, ask: Ask, running: list[tuple[str, Ask]] = (), user: str = "alice") -> str:
    """The reason `user`'s job asking `ask` waits, with `running` (user, ask) already started."""
    tally = Tally()
    for who, a in running:
        tally.add(rule(db, who), who, "physics", a)
    return reason(rule(db, user), ask, tally, user, "physics")


ONE = Ask(cpus=1, mem=100, nodes=1)


def test_tres_lists_read_as_sacctmgr_stores_them() -> None:
    assert tres("cpu=4,mem=2G,node=1,gres/gpu=2") == {"cpu": 4, "mem": 2048, "node": 1,
                                                     "gres/gpu": 2}
    assert tres("mem=500") == {"mem": 500}
    assert tres("") == {}


def test_no_limit_no_reason() -> None:
    assert judge(tree(), ONE, [("alice", ONE)] * 5) == ""


@pytest.mark.parametrize(("limits", "running", "want"), [
    ({"MaxJobs": "1"}, 1, "AssocMaxJobsLimit"),
    ({"MaxJobs": "2"}, 1, ""),
    ({"GrpJobs": "1"}, 1, "AssocGrpJobsLimit"),
    ({"GrpTRES": "cpu=2"}, 2, "AssocGrpCpuLimit"),
    ({"GrpTRES": "cpu=2"}, 1, ""),
    ({"GrpTRES": "mem=150"}, 1, "AssocGrpMemLimit"),
    ({"GrpTRES": "node=1"}, 1, "AssocGrpNodeLimit"),
])
def test_each_user_association_limit(limits, running, want) -> None:
    assert judge(tree(user=limits), ONE, [("alice", ONE)] * running) == want


def test_gpu_limits_are_grp_gres() -> None:
    gpu = Ask(cpus=1, nodes=1, gpus=1)
    assert judge(tree(user={"GrpTRES": "gres/gpu=1"}), gpu, [("alice", gpu)]) == "AssocGrpGRES"
    assert judge(tree(user={"GrpTRES": "gres/gpu=1"}), ONE, [("alice", gpu)]) == ""
    assert judge(tree(qos={"GrpTRES": "gres/gpu=1"}), gpu, [("bob", gpu)]) == "QOSGrpGRES"


def test_per_job_limits_and_wall() -> None:
    big = Ask(cpus=4, nodes=2, minutes=120)
    assert judge(tree(user={"MaxTRES": "cpu=2"}), big) == "AssocMaxCpuPerJobLimit"
    assert judge(tree(user={"MaxTRES": "node=1"}), big) == "AssocMaxNodePerJobLimit"
    assert judge(tree(user={"MaxTRES": "mem=10"}), Ask(mem=20)) == "AssocMaxMemPerJob"
    assert judge(tree(user={"MaxTRESPerNode": "cpu=1"}), big) == "AssocMaxCpuPerNode"
    assert judge(tree(user={"MaxWall": "60"}), big) == "AssocMaxWallDurationPerJobLimit"
    assert judge(tree(user={"MaxWall": "60"}), Ask(minutes=60)) == ""
    assert judge(tree(user={"MaxWall": "60"}), Ask(minutes=None)) == ""  # fitted to it
    assert judge(tree(qos={"MaxWall": "60"}), big) == "QOSMaxWallDurationPerJobLimit"
    assert judge(tree(qos={"MaxTRES": "cpu=2"}), big) == "QOSMaxCpuPerJobLimit"


def test_max_limits_are_inherited_from_the_account() -> None:
    assert judge(tree(acct={"MaxJobs": "1"}), ONE, [("alice", ONE)]) == "AssocMaxJobsLimit"
    # MaxJobs counts the user's own association: bob's job is not alice's
    assert judge(tree(acct={"MaxJobs": "1"}), ONE, [("bob", ONE)]) == ""
    assert judge(tree(top={"MaxWall": "10"}), Ask(minutes=11)) == \
        "AssocMaxWallDurationPerJobLimit"


def test_grp_limits_count_the_whole_subtree_up_to_root() -> None:
    # bob's job counts against physics's and top's group limits, held for alice
    assert judge(tree(acct={"GrpJobs": "1"}), ONE, [("bob", ONE)]) == "AssocGrpJobsLimit"
    assert judge(tree(top={"GrpTRES": "cpu=1"}), ONE, [("bob", ONE)]) == "AssocGrpCpuLimit"
    db = tree()
    root = db.base_assoc("root", "c1")
    db = ops.modify_assocs(db, [root], {"GrpJobs": "2"})[0]
    assert judge(db, ONE, [("bob", ONE)]) == ""
    assert judge(db, ONE, [("bob", ONE), ("bob", ONE)]) == "AssocGrpJobsLimit"


def test_qos_limits() -> None:
    assert judge(tree(qos={"MaxJobsPerUser": "1"}), ONE, [("alice", ONE)]) == \
        "QOSMaxJobsPerUserLimit"
    assert judge(tree(qos={"MaxJobsPerUser": "1"}), ONE, [("bob", ONE)]) == ""
    assert judge(tree(qos={"GrpTRES": "cpu=1"}), ONE, [("bob", ONE)]) == "QOSGrpCpuLimit"
    assert judge(tree(qos={"GrpJobs": "1"}), ONE, [("bob", ONE)]) == "QOSGrpJobsLimit"
    assert judge(tree(qos={"MaxTRESPerUser": "cpu=1"}), ONE, [("alice", ONE)]) == \
        "QOSMaxCpuPerUserLimit"
    assert judge(tree(qos={"MaxTRESPerUser": "cpu=1"}), ONE, [("bob", ONE)]) == ""
    assert judge(tree(qos={"MaxTRESPerUser": "node=1"}), ONE, [("alice", ONE)]) == \
        "QOSMaxNodePerUserLimit"


def test_qos_before_association_and_a_qos_limit_hides_the_same_one() -> None:
    both = tree(user={"MaxJobs": "1", "GrpTRES": "cpu=1"},
                qos={"MaxJobsPerUser": "1", "GrpTRES": "cpu=1"})
    assert judge(both, ONE, [("alice", ONE)]) == "QOSMaxJobsPerUserLimit"
    # the counts come before the TRES whoever sets them
    mixed = tree(user={"MaxJobs": "1"}, qos={"GrpTRES": "cpu=1"})
    assert judge(mixed, ONE, [("alice", ONE)]) == "AssocMaxJobsLimit"
    # QOS GrpTRES cpu=10 set: the association's GrpTRES cpu=1 is not looked at
    hidden = tree(user={"GrpTRES": "cpu=1"}, qos={"GrpTRES": "cpu=10"})
    assert judge(hidden, ONE, [("alice", ONE)]) == ""
    # ... but its mem is
    assert judge(tree(user={"GrpTRES": "mem=150"}, qos={"GrpTRES": "cpu=10"}), ONE,
                 [("alice", ONE)]) == "AssocGrpMemLimit"
    # QOS MaxJobsPerUser hides the association's MaxJobs
    assert judge(tree(user={"MaxJobs": "1"}, qos={"MaxJobsPerUser": "5"}), ONE,
                 [("alice", ONE)]) == ""


def test_first_tres_in_slurms_order_names_the_reason() -> None:
    db = tree(user={"GrpTRES": "cpu=1,mem=10,node=1"})
    assert judge(db, ONE, [("alice", ONE)]) == "AssocGrpCpuLimit"


def test_no_association_no_rule() -> None:
    assert enforce.rule(tree(), cluster="c1", user="carol", account="", partition="",
                        qos="") is None
