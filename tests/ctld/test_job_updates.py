"""rcontrol update JobId=, uhold/requeuehold, array throttles and partition limits in the
controller alone (tests/conformance/test_job_updates.py and test_part_limits.py hold them
against Slurm): what changes, what survives the state file, and a running job's lowered limit
ending it at the new one under trio's fake clock."""

from __future__ import annotations

import orjson
import trio

from ranch.ctld.state import deferred
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import FakeConn, hardware, make_config, wall
from .test_jobs import Beats, end, job, kills, rec, up

TWO_PARTS = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
HeartbeatInterval=10
SlurmdTimeout=60
{extra}
NodeName=n[1-2] CPUs=4 RealMemory=1000 TmpDisk=100
PartitionName=main Nodes=n[1-2] Default=YES
PartitionName=debug Nodes=n1 MaxTime=5
"""


def update(cluster: Cluster, jid: int, *pairs: tuple[str, str], uid: int = 1000
           ) -> m.JobResult:
    return cluster.jobs.control(m.JobControl("update", (jid,), "alice" if uid else "root", uid,
                                             updates=pairs))


async def test_updates_apply_with_slurms_rights_and_survive_the_state_file() -> None:
    cfg = make_config(text=TWO_PARTS.format(extra=""))
    cluster = Cluster(cfg, wall=wall)
    up(cluster, "n1", "n2")
    j = cluster.jobs.submit(job(begin_time=wall() + 3600, time_limit=10)).job_id
    assert update(cluster, j, ("TimeLimit", "+5"), ("Name", "renamed"), ("Comment", "c"),
                  ("Nice", "10")).ok
    got = rec(cluster, j)
    assert (got["time_limit"], got["name"], got["comment"], got["nice"]) == (15, "renamed", "c",
                                                                             10)
    # a user: no negative nice, no higher priority; a lower one is set and said
    assert update(cluster, j, ("Nice", "-1")).errors == (f"Access/permission denied for job {j}",)
    assert update(cluster, j, ("Priority", str(2**32 - 2))).errors == (
        f"Access/permission denied for job {j}",)
    r = update(cluster, j, ("Priority", "7"))
    assert not r.ok and "not persistent" in r.errors[0] and rec(cluster, j)["priority"] == 7
    # over debug's MaxTime: a user may not raise to it, an admin may; nothing of a refused
    # update changes
    assert update(cluster, j, ("Partition", "debug"), ("TimeLimit", "4")).ok
    r = update(cluster, j, ("TimeLimit", "30"), ("Name", "never"))
    assert r.errors == (f"Access/permission denied for job {j}",)
    assert rec(cluster, j)["name"] == "renamed" and rec(cluster, j)["time_limit"] == 4
    assert update(cluster, j, ("TimeLimit", "30"), uid=0).ok
    assert update(cluster, j, ("Partition", "nosuch")).errors == (
        f"Invalid partition name specified for job {j}",)
    assert update(cluster, j, ("Bogus", "1")).errors == (
        f"Update of this parameter is not supported: Bogus=1 for job {j}",)
    doc = orjson.loads(deferred.dumps(cluster.save_doc()))
    again = Cluster(cfg, wall=wall)
    again.restore(doc)
    got = rec(again, j)
    assert (got["partition"], got["time_limit"], got["name"], got["comment"], got["nice"],
            got["priority"]) == ("debug", 30, "renamed", "c", 10, 7)


async def test_array_throttle_holds_tasks_back_until_raised() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    a = cluster.jobs.submit(job(array="1-6%2")).job_id
    tasks = sorted(j.id for j in cluster.jobs.jobs.values() if j.array_job_id == a)
    states = [rec(cluster, t)["state"] for t in tasks]
    assert states == ["RUNNING"] * 2 + ["PENDING"] * 4
    assert {rec(cluster, t)["reason"] for t in tasks[2:]} == {"JobArrayTaskLimit"}
    assert update(cluster, a, ("ArrayTaskThrottle", "3")).ok
    assert [rec(cluster, t)["state"] for t in tasks].count("RUNNING") == 3
    # a task ends: the next one takes its place, no more
    Beats(cluster, conns)("n1", jobs_ended=(end(tasks[0]),))
    assert [rec(cluster, t)["state"] for t in tasks].count("RUNNING") == 3
    doc = orjson.loads(deferred.dumps(cluster.jobs.save_doc()))
    assert {d.get("array_throttle") for d in doc["jobs"]} == {3}


async def test_requeuehold_and_uhold() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    j = cluster.jobs.submit(job()).job_id
    assert cluster.jobs.control(m.JobControl("requeuehold", (j,), "alice", 1000)).ok
    Beats(cluster, conns)("n1", jobs_ended=(end(j, "CANCELLED"),))
    got = rec(cluster, j)
    assert (got["state"], got["reason"], got["restarts"]) == (
        "PENDING", "job requeued in held state", 1)
    assert cluster.jobs.control(m.JobControl("release", (j,), "alice", 1000)).ok
    assert rec(cluster, j)["state"] == "RUNNING"
    # release of a job not held is no error; an admin's uhold is the user's to release
    assert cluster.jobs.control(m.JobControl("release", (j,), "alice", 1000)).ok
    p = cluster.jobs.submit(job(begin_time=wall() + 60)).job_id
    assert cluster.jobs.control(m.JobControl("uhold", (p,), "root", 0)).ok
    assert rec(cluster, p)["reason"] == "JobHeldUser"
    assert cluster.jobs.control(m.JobControl("release", (p,), "alice", 1000)).ok


async def test_a_lowered_limit_ends_the_run_and_a_raise_past_the_nodes_is_refused(
        autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        conns = up(cluster, "n1")
        j = cluster.jobs.submit(job(time_limit=10)).job_id
        assert rec(cluster, j)["state"] == "RUNNING"
        assert update(cluster, j, ("TimeLimit", "+1")).errors == (
            f"Access/permission denied for job {j}",)
        r = update(cluster, j, ("TimeLimit", "20"), uid=0)
        assert not r.ok and "cannot raise a running job's time limit" in r.errors[0]
        assert update(cluster, j, ("TimeLimit", "-8")).ok  # 2 minutes
        beats = Beats(cluster, conns)
        for _ in range(11):  # 110 s, the node beating every 10 s
            await trio.sleep(10)
            beats("n1", job_ids=(j,))
        assert not [k for k in kills(conns["n1"]) if k.reason == "time limit"]
        await trio.sleep(11)
        assert [k.job_id for k in kills(conns["n1"]) if k.reason == "time limit"] == [j]
        # the node ends it TIMEOUT, as at a limit of its own
        beats("n1", jobs_ended=(end(j, "TIMEOUT"),))
        assert (rec(cluster, j)["state"], rec(cluster, j)["reason"]) == ("TIMEOUT", "TimeLimit")
        nursery.cancel_scope.cancel()


async def test_enforce_part_limits_no_queues_all_and_any_refuse() -> None:
    for enforce, want in (("NO", "PartitionNodeLimit"), ("ALL", "Node count specification"),
                          ("ANY", "Node count specification")):
        cluster = Cluster(make_config(text=TWO_PARTS.format(
            extra=f"EnforcePartLimits={enforce}")), wall=wall)
        up(cluster, "n1", "n2")
        r = cluster.jobs.submit(job(partition="debug", num_nodes=2))
        if enforce == "NO":
            assert rec(cluster, r.job_id)["reason"] == want
        else:
            assert isinstance(r, m.Error) and r.message.startswith(want)
        # -p debug,main over debug's MaxTime: ALL refuses, NO and ANY run it in main
        r = cluster.jobs.submit(job(partition="debug,main", time_limit=10))
        if enforce == "ALL":
            assert isinstance(r, m.Error) and "time limit is invalid" in r.message
        else:
            assert rec(cluster, r.job_id)["partition"] == "main"
            assert rec(cluster, r.job_id)["state"] == "RUNNING"


async def test_a_lowered_limit_is_kept_by_a_restarted_controller(autojump_clock) -> None:
    cfg = make_config()
    cluster = Cluster(cfg, wall=wall)
    up(cluster, "n1")
    j = cluster.jobs.submit(job(time_limit=10)).job_id
    assert update(cluster, j, ("TimeLimit", "1")).ok
    doc = orjson.loads(deferred.dumps(cluster.save_doc()))
    again = Cluster(cfg, wall=wall)
    again.restore(doc)
    async with trio.open_nursery() as nursery:
        again.start()
        nursery.start_soon(again.deadlines.run, again.on_deadlines)
        conn = FakeConn()  # rnoded comes back still running the job (its run 0)
        again.register(m.Register("n1", hardware(), 1.0, "0.1.0", job_ids=(j,), runs=((j, 0),)),
                       conn)
        conns = {"n1": conn}
        beats = Beats(again, conns)
        assert rec(again, j)["restarts"] == 0
        for _ in range(5):
            await trio.sleep(10)
            beats("n1", job_ids=(j,))
        assert not [k for k in kills(conns["n1"]) if k.reason == "time limit"]
        await trio.sleep(11)
        assert [k.job_id for k in kills(conns["n1"]) if k.reason == "time limit"] == [j]
        nursery.cancel_scope.cancel()


async def test_a_reconfigure_keeps_a_lowered_limit(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    up(cluster, "n1")
    j = cluster.jobs.submit(job(time_limit=10)).job_id
    assert update(cluster, j, ("TimeLimit", "1")).ok
    due = cluster.deadlines.when((j, "limit"))
    assert cluster.apply_config(make_config(extra="KillWait=5")).ok
    assert cluster.deadlines.when((j, "limit")) == due
