"""sched/backfill's preemption in an assembled controller under trio's MockClock: a job of QOS high
queued behind a job of QOS normal that waits on Resources (the event pass stops there and never
reaches it) gets a low job preempted for it by the backfill cycle, recorded in the event log; it
starts on the victim's node once the victim is gone; a node the job ahead has reserved within
the preemptor's limit is never taken, and without preemption nothing is stopped."""

from __future__ import annotations

import trio

from ranch.assoc import ops, serial
from ranch.assoc.db import AcctDb
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, wall
from .test_jobs import Beats, end, job, rec

CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
HeartbeatInterval=1000
SlurmdTimeout=5000
AccountingStorageType=accounting_storage/slurmdbd
SchedulerParameters=bf_interval=10
{extra}
NodeName=n[1-2] CPUs=4 RealMemory=1000
PartitionName=main Nodes=n[1-2] Default=YES
"""
PREEMPT = "PreemptType=preempt/qos\nPreemptMode=CANCEL\n"


def tree() -> AcctDb:
    db = AcctDb.fresh().add_cluster("test")
    db = ops.add_qos(db, ("low",)).db
    db = ops.add_qos(db, ("high",), priority=100, preempt=("low",)).db
    db = ops.add_accounts(db, ("physics",)).db
    return ops.add_users(db, ("alice",), ("physics",), default_account="physics").db


def scene(extra: str = PREEMPT, high_minutes: int = 30):
    """A low job on each node for two hours; a normal 2-node job waiting on Resources (the
    event pass stops at it); a high 1-node job behind it."""
    c = Cluster(make_config(text=CONF.format(extra=extra)), wall=wall)
    c.controller.accounts.restore(serial.to_json(tree()))
    c.start()
    conns = {n: register(c, n)[1] for n in ("n1", "n2")}
    submit = c.jobs.submission.submit
    ids = {"low1": submit(job(qos="low", exclusive=True, time_limit=120)).job_id,
           "low2": submit(job(qos="low", exclusive=True, time_limit=120)).job_id,
           "normal": submit(job(num_nodes=2, exclusive=True, time_limit=60)).job_id,
           "high": submit(job(qos="high", exclusive=True, time_limit=high_minutes)).job_id}
    assert [rec(c, ids[k])["state"] for k in ("low1", "low2")] == ["RUNNING", "RUNNING"]
    assert (rec(c, ids["normal"])["reason"], rec(c, ids["high"])["reason"]) == (
        "Resources", "Priority")  # the event pass never reached the preemptor
    return c, conns, ids


def preempts(c: Cluster) -> list[dict]:
    return [e for e in c.eventlog.events if e["kind"] == "preempt"]


async def test_the_backfill_cycle_preempts_for_a_job_behind_a_blocked_one(autojump_clock) -> None:
    c, conns, ids = scene()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(c.jobs.backfill.run)
        await trio.sleep(11)  # the first cycle, bf_interval after the start
        low1, low2, high = (rec(c, ids[k]) for k in ("low1", "low2", "high"))
        assert low1["state"] in ("PREEMPTED", "COMPLETING") and low2["state"] == "RUNNING"
        assert (high["state"], high["sched_nodes"]) == ("PENDING", "n1")
        # "now" (the cycle's, a second ago): it starts once the victim is gone
        assert wall() - 2 <= high["start_time"] <= wall()
        [event] = preempts(c)
        assert (event["job"], event["by"], event["qos"]) == (ids["high"], "backfill", "high")
        assert event["victims"] == f"{ids['low1']}:cancel" and event["node"] == "n1"
        assert event["candidates"] == f"{ids['low1']},{ids['low2']}"
        # the victim's node reports it gone; the next cycle starts the preemptor there
        Beats(c, conns)("n1", jobs_ended=(end(ids["low1"], "PREEMPTED"),))
        await trio.sleep(11)
        high = rec(c, ids["high"])
        assert (high["state"], high["nodes"]) == ("RUNNING", "n1")
        assert rec(c, ids["low1"])["state"] == "PREEMPTED"
        assert rec(c, ids["low2"])["state"] == "RUNNING" and len(preempts(c)) == 1
        assert (rec(c, ids["normal"])["state"], rec(c, ids["normal"])["reason"]) == (
            "PENDING", "Resources")
        nursery.cancel_scope.cancel()


async def test_no_node_the_job_ahead_holds_within_the_limit_and_none_without_preemption(
        autojump_clock) -> None:
    # three hours: both nodes are the normal job's from the low jobs' end, within its limit
    for extra, minutes in ((PREEMPT, 180), ("", 30)):
        c, _, ids = scene(extra, minutes)
        await c.jobs.backfill.cycle()
        assert [rec(c, ids[k])["state"] for k in ("low1", "low2")] == ["RUNNING", "RUNNING"]
        assert rec(c, ids["high"])["state"] == "PENDING" and not preempts(c)
