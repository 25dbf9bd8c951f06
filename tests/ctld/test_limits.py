"""AccountingStorageEnforce=limits in the scheduling pass of an assembled controller: a job over
a limit pends with slurmctld 22.05's reason while a later job in the same partition starts, the
limit counts the jobs holding resources (one ending lets the held one start), a QOS limit comes
before the association's, and without `limits` nothing is held."""

from __future__ import annotations

from ranch.assoc import ops, serial
from ranch.assoc.db import AcctDb
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, wall
from .test_jobs import rec

ACCT = "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageEnforce={}\n"


def tree(alice: dict[str, str] | None = None, physics: dict[str, str] | None = None,
         qos: dict[str, str] | None = None) -> AcctDb:
    """physics > alice (limits `alice`), bob; chem > carol; QOS normal (limits `qos`)."""
    db = AcctDb.fresh().add_cluster("test")
    db = ops.add_accounts(db, ("physics",), settings=physics or {}).db
    db = ops.add_accounts(db, ("chem",)).db
    db = ops.add_users(db, ("alice",), ("physics",), default_account="physics",
                       settings=alice or {}).db
    db = ops.add_users(db, ("bob",), ("physics",), default_account="physics").db
    db = ops.add_users(db, ("carol",), ("chem",), default_account="chem").db
    if qos:
        db = ops.modify_qos(db, ["normal"], {}, qos)[0]
    return db


def cluster(db: AcctDb, flags: str = "associations,limits,qos") -> Cluster:
    c = Cluster(make_config(extra=ACCT.format(flags)), wall=wall)
    c.controller.accounts.restore(serial.to_json(db))
    c.start()
    for n in ("n1", "n2", "n3", "n4"):
        register(c, n)
    return c


def submit(c: Cluster, user: str, **kw) -> int:
    uid = {"alice": 1000, "bob": 1001, "carol": 1002}[user]
    got = c.jobs.submission.submit(m.SubmitJob("#!/bin/sh\ntrue\n", user, uid, uid, "/tmp", **kw))
    assert isinstance(got, m.SubmitReply), got
    return got.job_id


def state(c: Cluster, job_id: int) -> tuple[str, str]:
    r = rec(c, job_id)
    return r["state"], r["reason"]


async def test_max_jobs_holds_the_second_and_a_later_job_still_starts() -> None:
    c = cluster(tree(alice={"MaxJobs": "1"}))
    first, second = submit(c, "alice"), submit(c, "alice")
    other = submit(c, "bob")
    assert state(c, first)[0] == "RUNNING"
    assert state(c, second) == ("PENDING", "AssocMaxJobsLimit")
    assert state(c, other)[0] == "RUNNING"  # skipped, not a Resources stop for main
    done = c.jobs.commands.cancel(m.CancelJobs((first,), "alice", 1000))
    assert done.ok, done
    assert state(c, first)[0] == "COMPLETING"  # its usage is given back now, as slurmctld's
    c.jobs.store.kick()  # a pass (the node's end report would run one)
    c.controller.after_change()
    assert state(c, second)[0] in ("RUNNING", "CONFIGURING"), state(c, second)


async def test_grp_tres_of_the_account_counts_every_user_under_it() -> None:
    c = cluster(tree(physics={"GrpTRES": "cpu=4"}))
    bobs = submit(c, "bob", ntasks=4)
    alices = submit(c, "alice")
    carols = submit(c, "carol")
    assert state(c, bobs)[0] == "RUNNING"
    assert state(c, alices) == ("PENDING", "AssocGrpCpuLimit")
    assert state(c, carols)[0] == "RUNNING"


async def test_qos_limit_comes_before_the_association_one() -> None:
    c = cluster(tree(alice={"MaxJobs": "1", "GrpTRES": "cpu=1"},
                     qos={"MaxJobsPerUser": "1", "GrpTRES": "cpu=8"}))
    first, second = submit(c, "alice"), submit(c, "alice")
    assert state(c, first)[0] == "RUNNING"
    assert state(c, second) == ("PENDING", "QOSMaxJobsPerUserLimit")
    c2 = cluster(tree(qos={"MaxTRESPerUser": "cpu=2"}))
    a, b, d = submit(c2, "alice", ntasks=2), submit(c2, "alice"), submit(c2, "bob", ntasks=2)
    assert state(c2, a)[0] == "RUNNING"
    assert state(c2, b) == ("PENDING", "QOSMaxCpuPerUserLimit")
    assert state(c2, d)[0] == "RUNNING"


async def test_two_jobs_of_one_pass_are_counted_one_after_the_other() -> None:
    c = cluster(tree(physics={"GrpJobs": "2"}))
    ids = [submit(c, "alice", hold=True) for _ in range(3)]
    assert c.jobs.commands.control(m.JobControl("release", tuple(ids), "alice", 1000)).ok
    c.controller.after_change()  # one pass over the three
    states = [state(c, j) for j in ids]
    assert [s[0] for s in states[:2]] == ["RUNNING", "RUNNING"]
    assert states[2] == ("PENDING", "AssocGrpJobsLimit")


async def test_a_changed_tree_is_read_again() -> None:
    c = cluster(tree(alice={"MaxJobs": "1"}))
    first, second = submit(c, "alice"), submit(c, "alice")
    assert state(c, second) == ("PENDING", "AssocMaxJobsLimit")
    c.controller.accounts.restore(serial.to_json(tree(alice={"MaxJobs": "2"})))
    c.jobs.store.kick()
    c.controller.after_change()
    assert state(c, first)[0] == state(c, second)[0] == "RUNNING"


async def test_without_limits_in_enforce_nothing_is_held() -> None:
    c = cluster(tree(alice={"MaxJobs": "1"}), flags="associations,qos")
    first, second = submit(c, "alice"), submit(c, "alice")
    assert state(c, first)[0] == state(c, second)[0] == "RUNNING"


async def test_backfill_starts_no_limit_held_job_and_keeps_its_reason() -> None:
    c = cluster(tree(physics={"GrpJobs": "1"}))
    first, second = submit(c, "alice"), submit(c, "bob")
    assert state(c, second) == ("PENDING", "AssocGrpJobsLimit")
    assert await c.jobs.backfill.cycle() == 0
    assert state(c, second) == ("PENDING", "AssocGrpJobsLimit")
    assert state(c, first)[0] == "RUNNING"


async def test_run_minutes_and_deny_on_limit_through_the_controller() -> None:
    """GrpTRESRunMins counts a running job's time limit (the second waits); MaxTRESMins holds
    a long job; under a DenyOnLimit QOS the same job is refused at submission in sbatch's
    words (assoc/submitlimits.py)."""
    c = cluster(tree(alice={"GrpTRESRunMins": "cpu=30"}, physics={"MaxTRESMins": "cpu=100"}))
    first, second = submit(c, "alice", time_limit=20), submit(c, "alice", time_limit=20)
    assert state(c, first)[0] == "RUNNING"
    assert state(c, second) == ("PENDING", "AssocGrpCPURunMinutesLimit")
    long = submit(c, "bob", time_limit=200)
    assert state(c, long) == ("PENDING", "AssocMaxCpuMinutesPerJobLimit")
    db = ops.modify_qos(tree(qos={"MaxWall": "10"}), ["normal"], {"flags": ("DenyOnLimit",)},
                        {})[0]
    c2 = cluster(db)
    got = c2.jobs.submission.submit(m.SubmitJob("#!/bin/sh\ntrue\n", "alice", 1000, 1000,
                                                "/tmp", time_limit=20))
    assert isinstance(got, m.Error), got
    assert got.message == ("QOSMaxWallDurationPerJobLimit\nJob violates accounting/QOS policy "
                           "(job submit limit, user's size and/or time limits)")
    assert state(c2, submit(c2, "alice", time_limit=5))[0] == "RUNNING"
