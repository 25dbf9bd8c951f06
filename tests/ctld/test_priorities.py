"""priority/multifactor in an assembled controller (issue 44): a new job's priority at submission,
the queue by PriorityTier then priority, an admin's Priority= kept through recomputes, nice and
release recomputed, rsprio's rows, rcontrol top, and priority/basic left as it was."""

from __future__ import annotations

import trio

from ranch.assoc import ops, serial
from ranch.assoc.db import AcctDb
from ranch.ctld.jobs.jobrecord import TOP_PRIORITY
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import job, make_config, wall

CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
HeartbeatInterval=1000
SlurmdTimeout=5000
AccountingStorageType=accounting_storage/slurmdbd
PriorityType=priority/multifactor
PriorityCalcPeriod=1
PriorityWeightJobSize=1000
PriorityWeightPartition=2000
PriorityWeightQOS=5000
PriorityWeightFairshare=10000
PriorityWeightAge=0
{extra}
NodeName=n[1-4] CPUs=4 RealMemory=1000
PartitionName=main Nodes=n[1-4] Default=YES PriorityJobFactor=1
PartitionName=high Nodes=n[1-2] PriorityJobFactor=4 PriorityTier=2
"""


def tree() -> AcctDb:
    db = AcctDb.fresh().add_cluster("test")
    db = ops.add_qos(db, ("urgent",), priority=100).db
    db = ops.add_accounts(db, ("physics",)).db
    return ops.add_users(db, ("alice",), ("physics",), default_account="physics").db


def cluster(extra: str = "") -> Cluster:
    c = Cluster(make_config(text=CONF.format(extra=extra)), wall=wall)
    c.controller.accounts.restore(serial.to_json(tree()))
    c.jobs.priorities.use_config()
    c.start()
    return c


def prio(c: Cluster, jid: int) -> int:
    return c.jobs.store.jobs[jid].priority


def control(c: Cluster, action: str, *ids: int, uid: int = 0, **kw: object) -> m.JobResult:
    return c.jobs.commands.control(m.JobControl(action, ids, "root" if uid == 0 else "alice",
                                                uid, **kw))  # type: ignore[arg-type]


async def test_multifactor_sets_orders_keeps_and_recomputes(autojump_clock) -> None:
    c = cluster()
    submit = c.jobs.submission.submit
    # no node is up: every job pends; job size: nodes/4 and CPUs/16 halved, x1000; fair share:
    # alice is the tree's only user besides root, both without usage: 1.0 x 10000
    small = submit(job(num_nodes=1)).job_id
    big = submit(job(num_nodes=2, ntasks=8, ntasks_given=True)).job_id
    urgent = submit(job(qos="urgent")).job_id
    high = submit(job(partition="high")).job_id
    niced = submit(job(nice=100)).job_id
    assert prio(c, small) == 10000 + int((1 / 4 + 1 / 16) / 2 * 1000) + 500
    assert prio(c, big) == 10000 + int((2 / 4 + 8 / 16) / 2 * 1000) + 500
    assert prio(c, urgent) == prio(c, small) + 5000
    assert prio(c, high) == prio(c, small) + 1500  # PriorityJobFactor 4 of 4: 2000, not 500
    assert prio(c, niced) == prio(c, small) - 100
    # the queue: the higher tier first whatever its priority, then by priority
    order = [j.id for j in c.jobs.store.pending]
    assert order == [high, urgent, big, small, niced]
    # an admin's Priority= stays through a recompute; a user's lower one does not
    assert control(c, "update", small, updates=(("Priority", "99999"),)).ok
    c.jobs.priorities.recompute()
    assert prio(c, small) == 99999 and [j.id for j in c.jobs.store.pending][1] == small
    control(c, "update", niced, uid=1000, updates=(("Priority", "5"),))
    assert prio(c, niced) == 5
    c.jobs.priorities.recompute()
    assert prio(c, niced) == prio(c, urgent) - 5000 - 100
    # nice recomputes at once; hold shows 0 (rsprio leaves it out), release recomputes
    assert control(c, "update", big, updates=(("Nice", "-50"),)).ok
    assert prio(c, big) == 10000 + 500 + 500 + 50
    assert control(c, "hold", big).ok
    rows = c.jobs.priorities.reply(m.PriorityRequest()).rows
    assert big not in {r.job_id for r in rows}
    assert control(c, "release", big).ok and prio(c, big) == 11050
    # rsprio's rows: weighted factors as slurmctld keeps them, the admin's own total
    reply = c.jobs.priorities.reply(m.PriorityRequest(jobs=(small, urgent)))
    assert reply.multifactor and reply.weights.qos == 5000
    by_id = {r.job_id: r for r in reply.rows}
    assert by_id[small].direct == 99999
    assert by_id[urgent].qos == 5000.0 and by_id[urgent].fairshare == 10000.0
    assert by_id[urgent].jobsize == (1 / 4 + 1 / 16) / 2 * 1000


async def test_top_is_an_operators_command_unless_enable_user_top(autojump_clock) -> None:
    for extra, user_may in (("", False), ("SchedulerParameters=enable_user_top", True)):
        c = cluster(extra)
        a, b, d = (c.jobs.submission.submit(job(nice=n)).job_id for n in (0, 10, 20))
        assert [j.id for j in c.jobs.store.pending] == [a, b, d]
        got = control(c, "top", d, uid=1000)
        assert got.ok is user_may
        if not user_may:
            assert got.errors == ("Access/permission denied",)
            assert control(c, "top", d).ok
        assert c.jobs.store.pending[0].id == d
        # its nice went down by what it gained: the next recompute keeps it first
        c.jobs.priorities.recompute()
        assert c.jobs.store.pending[0].id == d


async def test_basic_priority_is_left_as_it_was(autojump_clock) -> None:
    c = Cluster(make_config(), wall=wall)
    c.start()
    first = c.jobs.submission.submit(job()).job_id
    second = c.jobs.submission.submit(job(nice=5)).job_id
    assert prio(c, first) == TOP_PRIORITY - first
    assert prio(c, second) == TOP_PRIORITY - second - 5
    assert not c.jobs.priorities.reply(m.PriorityRequest()).multifactor
    async with trio.open_nursery() as nursery:
        nursery.start_soon(c.jobs.priorities.run)
        await trio.sleep(600)
        nursery.cancel_scope.cancel()
    assert prio(c, first) == TOP_PRIORITY - first


async def test_age_accrues_every_calc_period(autojump_clock) -> None:
    c = cluster("PriorityWeightAge=6000\nPriorityMaxAge=1:00:00")  # the last such line wins
    jid = c.jobs.submission.submit(job()).job_id
    held = c.jobs.submission.submit(job(hold=True)).job_id
    first = prio(c, jid)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(c.jobs.priorities.run)
        await trio.sleep(60 * 10 + 1)  # ten calc periods of a minute
        nursery.cancel_scope.cancel()
    # ten minutes of an hour's PriorityMaxAge: a sixth of 6000 (truncation may take one)
    assert prio(c, jid) - first in (1000, 999)
    assert c.jobs.priorities.factors[jid].norm[0] == 600 / 3600
    assert c.jobs.priorities.factors[held].age == 0.0  # held: no age
