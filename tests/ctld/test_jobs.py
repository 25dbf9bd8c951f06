"""Jobs in the controller core: placement, node states through events, endings, node loss,
cancel/requeue/hold, power-up on demand, and the state file."""

from __future__ import annotations

import orjson
import trio

from ranch.conf import hostlist
from ranch.ctld.jobs.jobrecord import job_json
from ranch.ctld.state import deferred
from ranch.ctld.state.overlay import overlay
from ranch.protocol import messages as m
from ranch.statemachine import names
from tests.ctld.harness import Harness as Cluster

from .helpers import FakeConn, beat, make_config, register, state, wall

SCRIPT = "#!/bin/sh\ntrue\n"


def job(**kw) -> m.SubmitJob:
    base = {"script": SCRIPT, "user": "alice", "uid": 1000, "gid": 1000, "workdir": "/home/a"}
    base.update(kw)
    return m.SubmitJob(**base)


def up(cluster: Cluster, *names: str) -> dict[str, FakeConn]:
    return {n: register(cluster, n)[1] for n in names}


def launches(conn: FakeConn) -> list[m.JobSpec]:
    return [p.job for p in conn.pushed if isinstance(p, m.LaunchJob)]


def kills(conn: FakeConn) -> list[m.KillJob]:
    return [p for p in conn.pushed if isinstance(p, m.KillJob)]


def end(job_id: int, st: str = "COMPLETED", restarts: int = 0, code: int = 0) -> m.JobEnd:
    return m.JobEnd(job_id, st, exit_code=code, restarts=restarts)


def rec(cluster: Cluster, job_id: int) -> dict:
    return cluster.jobs.record(cluster.jobs.jobs[job_id])


class Beats:
    """Heartbeats with increasing sequence numbers per node."""

    def __init__(self, cluster: Cluster, conns: dict[str, FakeConn]) -> None:
        self.cluster, self.conns, self.seq = cluster, conns, {n: 0 for n in conns}

    def __call__(self, name: str, **kw) -> m.HeartbeatReply:
        self.seq[name] += 1
        return beat(self.cluster, name, self.conns[name], self.seq[name], **kw)


async def test_jobs_fill_a_node_idle_mixed_allocated_and_back() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1", "n2")
    ids = []
    for _ in range(4):
        r = cluster.jobs.submit(job(mem_mib=100, gpus=1 if not ids else 0))
        assert isinstance(r, m.SubmitReply)
        ids.append(r.job_id)
    assert ids == [1, 2, 3, 4]
    # first fit: all four on n1 (equal weights: config order), one CPU each
    assert state(cluster, "n1") == "ALLOCATED" and state(cluster, "n2") == "IDLE"
    spec = launches(conns["n1"])[0]
    assert (spec.job_id, spec.cpus, spec.mem_mib, spec.gpus, spec.nodelist) == (1, 1, 100, (0,),
                                                                                 "n1")
    assert spec.stdout == "slurm-%j.out" and spec.workdir == "/home/a"
    snap = {n["name"]: n for n in cluster.snapshot().nodes}
    assert snap["n1"]["alloc_mem"] == 400 and snap["n1"]["gres_used"] == "gpu:1(IDX:0)"
    assert snap["n1"]["cpus_alloc"] == 4
    assert all(rec(cluster, j)["state"] == "RUNNING" for j in ids)
    beats = Beats(cluster, conns)
    beats("n1", job_ids=(1, 2, 3, 4))
    beats("n1", job_ids=(2, 3, 4), jobs_ended=(end(1),))
    assert state(cluster, "n1") == "MIXED"
    assert rec(cluster, 1)["state"] == "COMPLETED"
    beats("n1", job_ids=(2, 3, 4), jobs_ended=(end(1),))  # at-least-once: the repeat is a no-op
    assert state(cluster, "n1") == "MIXED"
    beats("n1", jobs_ended=(end(2), end(3, "FAILED", code=3), end(4)))
    assert state(cluster, "n1") == "IDLE"
    assert rec(cluster, 3)["state"] == "FAILED" and rec(cluster, 3)["exit_code"] == 3
    snap = {n["name"]: n for n in cluster.snapshot().nodes}
    assert snap["n1"]["alloc_mem"] == 0 and snap["n1"]["gres_used"] == "gpu:0"


async def test_priority_order_and_pending_reasons() -> None:
    cluster = Cluster(make_config(extra="PartitionName=short Nodes=n4 MaxTime=10 State=UP\n"
                                  "PartitionName=off Nodes=n4 State=DOWN"), wall=wall)
    up(cluster, "n1", "n2", "n3", "n4")
    big = [cluster.jobs.submit(job(cpus_per_task=4)).job_id for _ in range(4)]
    assert [rec(cluster, j)["nodes"] for j in big] == ["n1", "n2", "n3", "n4"]
    waiting = cluster.jobs.submit(job(cpus_per_task=2)).job_id
    behind = cluster.jobs.submit(job()).job_id
    assert rec(cluster, waiting)["reason"] == "Resources"
    assert rec(cluster, behind)["reason"] == "Priority"
    assert rec(cluster, cluster.jobs.submit(job(partition="off")).job_id)["reason"] == \
        "PartitionDown"
    assert rec(cluster, cluster.jobs.submit(job(partition="short", time_limit=60)).job_id)[
        "reason"] == "PartitionTimeLimit"


async def test_resources_then_priority_then_start_in_submit_order() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    a = cluster.jobs.submit(job(cpus_per_task=4)).job_id  # fills n1 (n2-n4 never registered)
    b = cluster.jobs.submit(job(cpus_per_task=3)).job_id
    c = cluster.jobs.submit(job(cpus_per_task=1)).job_id
    assert rec(cluster, a)["state"] == "RUNNING"
    assert (rec(cluster, b)["reason"], rec(cluster, c)["reason"]) == ("Resources", "Priority")
    Beats(cluster, conns)("n1", jobs_ended=(end(a),))
    assert rec(cluster, b)["state"] == "RUNNING" and rec(cluster, c)["state"] == "RUNNING"
    assert state(cluster, "n1") == "ALLOCATED"


async def test_unsatisfiable_requests_are_refused_at_submit() -> None:
    cluster = Cluster(make_config(), wall=wall)
    cases = {
        "cpus_per_task": job(cpus_per_task=5),  # the limiting resource, not num_nodes
        "mem_mib": job(mem_mib=1 << 20),
        "partition": job(partition="nope"),
        "nodelist": job(nodelist="x[1-2]"),
        "gpus": job(gpus=-1),
        "script": job(script="  "),
    }
    for fld, req in cases.items():
        r = cluster.jobs.submit(req)
        assert isinstance(r, m.Error) and r.field == fld, (fld, r)
    r = cluster.jobs.submit(job(gpus=3))
    assert r.message.startswith("Requested node configuration is not available")
    assert cluster.jobs.jobs == {}
    # more nodes than the partition has: queued, as slurmctld with EnforcePartLimits=NO
    r = cluster.jobs.submit(job(num_nodes=5))
    assert rec(cluster, r.job_id)["reason"] == "PartitionNodeLimit"


async def test_drain_lets_the_job_finish_then_drained() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    j = cluster.jobs.submit(job()).job_id
    cluster.update_nodes(m.UpdateNodes("n1", "DRAIN", "maint", "root"))
    assert cluster.snapshot().nodes[0]["compact"] == "drng"
    assert kills(conns["n1"]) == []  # DRAIN never kills
    k = cluster.jobs.submit(job()).job_id
    assert rec(cluster, k)["state"] == "PENDING"
    Beats(cluster, conns)("n1", jobs_ended=(end(j),))
    assert cluster.snapshot().nodes[0]["compact"] == "drain"
    assert rec(cluster, k)["state"] == "PENDING"
    assert cluster.jobs.submit(job(nodelist="n1")).job_id
    assert rec(cluster, k + 1)["reason"] == "ReqNodeNotAvail, UnavailableNodes:n1"


async def test_node_down_requeues_and_the_returning_copy_is_killed(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        conns = up(cluster, "n1", "n2")
        beats = Beats(cluster, conns)
        j = cluster.jobs.submit(job(cpus_per_task=4)).job_id
        nf = cluster.jobs.submit(job(cpus_per_task=4, requeue=False)).job_id
        assert rec(cluster, j)["nodes"] == "n1" and rec(cluster, nf)["nodes"] == "n2"
        for _ in range(8):  # n2 keeps beating, n1 falls silent
            await trio.sleep(10)
            beats("n2", job_ids=(nf,))
        assert state(cluster, "n1").startswith("DOWN")
        # requeued (restart 1) and started on n2? n2 is full: pending; its --no-requeue
        # neighbour kept running
        assert rec(cluster, j)["state"] == "PENDING" and rec(cluster, j)["restarts"] == 1
        beats("n2", jobs_ended=(end(nf),))
        assert rec(cluster, j)["state"] == "RUNNING" and rec(cluster, j)["nodes"] == "n2"
        assert launches(conns["n2"])[-1].restarts == 1
        # n1 comes back still running the old copy: it is told to kill it
        reply, conn1 = register(cluster, "n1")
        assert reply.accepted and reply.kill_job_ids == ()
        reply = cluster.register(m.Register("n1", reply and conn1 and _hw(), 1.0, "0.1.0",
                                            job_ids=(j,)), conn1)
        assert reply.kill_job_ids == (j,)
        assert beat(cluster, "n1", conn1, 1, job_ids=(j,)).kill_job_ids == (j,)
        # the stale run's ending (restarts 0) does not touch the new run
        beat(cluster, "n1", conn1, 2, jobs_ended=(end(j, "CANCELLED", restarts=0),))
        assert rec(cluster, j)["state"] == "RUNNING"
        nursery.cancel_scope.cancel()


def _hw() -> m.Hardware:
    from .helpers import hardware

    return hardware()


async def test_node_down_without_requeue_is_node_fail() -> None:
    cluster = Cluster(make_config(), wall=wall)
    up(cluster, "n1")
    j = cluster.jobs.submit(job(requeue=False)).job_id
    cluster.update_nodes(m.UpdateNodes("n1", "DOWN", "dead", "root"))
    assert rec(cluster, j)["state"] == "NODE_FAIL"
    assert state(cluster, "n1") == "DOWN"


async def test_cancel_marks_completing_until_the_node_reports() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1", "n2")
    j = cluster.jobs.submit(job(num_nodes=2)).job_id
    p = cluster.jobs.submit(job(cpus_per_task=4, num_nodes=2)).job_id
    assert rec(cluster, j)["nodes"] == "n[1-2]" and rec(cluster, p)["state"] == "PENDING"
    assert [s.nodelist for s in launches(conns["n2"])] == ["n[1-2]"]
    r = cluster.jobs.cancel(m.CancelJobs((j,), "bob", 1001))
    assert not r.ok and "Access/permission denied" in r.errors[0]
    r = cluster.jobs.cancel(m.CancelJobs((j,), "alice", 1000))
    assert r.ok and r.job_ids == (j,)
    assert rec(cluster, j)["state"] == "COMPLETING"
    assert kills(conns["n1"])[0] == m.KillJob(j, 0, "cancelled", 0)
    assert state(cluster, "n1") == "MIXED+COMPLETING"
    beats = Beats(cluster, conns)
    beats("n1", jobs_ended=(end(j, "CANCELLED"),))
    assert state(cluster, "n1") == "IDLE" and rec(cluster, j)["state"] == "COMPLETING"
    beats("n2", jobs_ended=(end(j, "CANCELLED"),))
    assert rec(cluster, j)["state"] == "CANCELLED"
    assert rec(cluster, p)["state"] == "RUNNING"  # resources freed: the next one starts
    r = cluster.jobs.cancel(m.CancelJobs((j, 99), "alice", 1000))
    assert not r.ok and any("Invalid job id specified: 99" in e for e in r.errors)


async def test_cancel_pending_and_by_user_and_signal() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    run = cluster.jobs.submit(job(cpus_per_task=4)).job_id
    pend = cluster.jobs.submit(job()).job_id
    other = cluster.jobs.submit(job(user="bob", uid=1001)).job_id
    r = cluster.jobs.cancel(m.CancelJobs((run,), "alice", 1000, signal=10))
    assert r.ok and kills(conns["n1"]) == [m.KillJob(run, 10, "signal", 0)]
    assert rec(cluster, run)["state"] == "RUNNING"
    r = cluster.jobs.cancel(m.CancelJobs((), "root", 0, only_user="alice"))
    assert set(r.job_ids) == {run, pend}
    assert rec(cluster, pend)["state"] == "CANCELLED"
    assert rec(cluster, other)["state"] == "PENDING"


async def test_requeue_hold_release() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    j = cluster.jobs.submit(job(cpus_per_task=4)).job_id
    h = cluster.jobs.submit(job(hold=True)).job_id
    assert rec(cluster, h)["reason"] == "JobHeldUser"
    r = cluster.jobs.control(m.JobControl("requeue", (j,), "alice", 1000))
    assert r.ok and rec(cluster, j)["state"] == "COMPLETING"
    Beats(cluster, conns)("n1", jobs_ended=(end(j, "CANCELLED"),))
    # back in the queue as its second run, and started again at once (n1 is free)
    assert rec(cluster, j)["restarts"] == 1 and rec(cluster, j)["state"] == "RUNNING"
    assert launches(conns["n1"])[-1].restarts == 1
    assert rec(cluster, h)["state"] == "PENDING"
    r = cluster.jobs.control(m.JobControl("hold", (j,), "alice", 1000))
    assert not r.ok and "no longer pending" in r.errors[0]
    r = cluster.jobs.control(m.JobControl("release", (h,), "alice", 1000))
    assert r.ok and rec(cluster, h)["reason"] == "Resources"


async def test_job_on_powered_down_node_configures_until_it_registers(autojump_clock) -> None:
    runs: list[tuple] = []

    def spawn(fn, *args, **kw) -> None:
        runs.append((args[0], ",".join(hostlist.expand(args[2]))))

    extra = "SuspendProgram=/bin/true\nResumeProgram=/bin/true\nResumeTimeout=20\n"
    cluster = Cluster(make_config(extra=extra), wall=wall, spawn=spawn)
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        up(cluster, "n1", "n2")
        cluster.update_nodes(m.UpdateNodes("n[1-2]", "POWER_DOWN_FORCE", None, "root"))
        await trio.sleep(31)
        assert state(cluster, "n1") == "IDLE+POWERED_DOWN"
        j = cluster.jobs.submit(job(num_nodes=2)).job_id
        assert rec(cluster, j)["state"] == "CONFIGURING"
        assert runs[-1] == ("resume", "n1,n2")
        assert cluster.jobs_holding(["n2"]) == [(j, ["n1", "n2"])]
        _, c1 = register(cluster, "n1")
        assert rec(cluster, j)["state"] == "CONFIGURING"
        _, c2 = register(cluster, "n2")
        assert rec(cluster, j)["state"] == "RUNNING"
        assert launches(c1)[0].job_id == j and launches(c2)[0].job_id == j
        # a second job whose node never boots is requeued at ResumeTimeout
        cluster.update_nodes(m.UpdateNodes("n3", "POWER_DOWN_FORCE", None, "root"))
        await trio.sleep(31)
        k = cluster.jobs.submit(job(nodelist="n3")).job_id
        assert rec(cluster, k)["state"] == "CONFIGURING"
        await trio.sleep(21)
        assert rec(cluster, k)["state"] == "PENDING" and rec(cluster, k)["restarts"] == 1
        nursery.cancel_scope.cancel()


async def test_weight_orders_placement() -> None:
    text = make_config().config_text if hasattr(make_config(), "config_text") else None
    assert text is None
    conf = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
NodeName=a1 CPUs=2 RealMemory=1000 Weight=10
NodeName=a2 CPUs=2 RealMemory=1000 Weight=1
PartitionName=main Nodes=a[1-2] Default=YES
"""
    cluster = Cluster(make_config(text=conf), wall=wall)
    up_small(cluster, "a1", "a2")
    assert rec(cluster, cluster.jobs.submit(job()).job_id)["nodes"] == "a2"


def up_small(cluster: Cluster, *names: str) -> None:
    for n in names:
        register(cluster, n, cpus=2, gpus=0)


async def test_array_and_state_file_round_trip() -> None:
    cfg = make_config()
    cluster = Cluster(cfg, wall=wall)
    up(cluster, "n1")
    r = cluster.jobs.submit(job(array="1-3", cpus_per_task=2))
    assert r.job_ids == (1, 2, 3)
    recs = [rec(cluster, j) for j in r.job_ids]
    assert [(x["array_job_id"], x["array_task_id"]) for x in recs] == [(1, 1), (1, 2), (1, 3)]
    assert [x["state"] for x in recs] == ["RUNNING", "RUNNING", "PENDING"]
    assert cluster.jobs.jobs[1].stdout == "slurm-%A_%a.out"
    doc = orjson.loads(deferred.dumps(cluster.save_doc()))
    again = Cluster(cfg, wall=wall)
    extra = {**orjson.loads(orjson.dumps(job_json(cluster.jobs.jobs[3]))), "id": 4}
    again.restore(overlay(doc, [{"seq": 1, "job": extra}]))
    assert [again.jobs.jobs[j].state for j in (1, 2, 3, 4)] == [
        "RUNNING", "RUNNING", "PENDING", "PENDING"]
    assert again.nodes["n1"].state.cpus_alloc == 4 and again.nodes["n1"].alloc_mem == 0
    assert again.jobs.next_id == 5
    # the restored RUNNING jobs are the node's own when it comes back with them
    reply, _ = register(again, "n1")
    assert reply.kill_job_ids == ()
    # ... and were lost when it comes back without them: requeued
    assert again.jobs.jobs[1].state == "RUNNING" or again.jobs.jobs[1].restarts == 1


async def test_cancel_whole_array_by_its_id() -> None:
    cluster = Cluster(make_config(), wall=wall)
    r = cluster.jobs.submit(job(array="0-2"))
    res = cluster.jobs.cancel(m.CancelJobs((r.job_id,), "alice", 1000))
    assert set(res.job_ids) == set(r.job_ids)
    assert {rec(cluster, j)["state"] for j in r.job_ids} == {"CANCELLED"}


async def test_unknown_job_in_heartbeat_is_killed() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    j = cluster.jobs.submit(job()).job_id
    reply = Beats(cluster, conns)("n1", job_ids=(j, 77))
    assert reply.kill_job_ids == (77,)


async def test_no_work_for_a_node_awaiting_approval() -> None:

    cluster = Cluster(make_config(extra="NodeApproval=manual"), wall=wall)
    cluster.membership.on_start(())
    up(cluster, "n1")
    assert "PENDING" in state(cluster, "n1")
    j = cluster.jobs.submit(job()).job_id
    assert rec(cluster, j)["state"] == "PENDING"
    r = cluster.membership.handle(m.NodeMembership("approve", "n1", None, "root"))
    assert r.ok, r.errors
    assert rec(cluster, j)["state"] == "RUNNING" and state(cluster, "n1") == "MIXED"


async def test_a_node_still_running_a_completing_job_is_told_again(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)  # grace: 3 x HeartbeatInterval + MessageTimeout
    conns = up(cluster, "n1")
    beats = Beats(cluster, conns)
    j = cluster.jobs.submit(job()).job_id
    assert cluster.jobs.cancel(m.CancelJobs((j,), "alice", 1000)).ok
    assert kills(conns["n1"]) == [m.KillJob(j, 0, "cancelled", 0)]  # and the node missed it
    beats("n1", job_ids=(j,), runs=((j, 0),))
    await trio.sleep(30)
    beats("n1", job_ids=(j,), runs=((j, 0),))
    assert len(kills(conns["n1"])) == 1  # inside the grace: the node may still be killing it
    await trio.sleep(15)
    beats("n1", job_ids=(j,), runs=((j, 0),))
    assert kills(conns["n1"])[1:] == [m.KillJob(j, 0, "completing", 0)]
    beats("n1", jobs_ended=(end(j, "CANCELLED"),))
    assert rec(cluster, j)["state"] == "CANCELLED" and state(cluster, "n1") == "IDLE"
    await trio.sleep(60)
    beats("n1")
    assert len(kills(conns["n1"])) == 2 and not cluster.jobs.reconciliation._still_running


async def test_a_job_the_node_stops_listing_is_requeued_after_a_grace(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)  # HeartbeatInterval=10, MessageTimeout=10
    conns = up(cluster, "n1", "n2")
    beats = Beats(cluster, conns)
    j = cluster.jobs.submit(job(cpus_per_task=4)).job_id
    assert rec(cluster, j)["nodes"] == "n1"
    beats("n1")  # not listed yet: the launch may still be on its way
    assert rec(cluster, j)["state"] == "RUNNING"
    await trio.sleep(30)
    beats("n1", job_ids=(j,))
    await trio.sleep(30)
    beats("n1")  # 60 s after the launch, past 3 x 10 + 10 s, and no ending
    # one beat's silence is no proof (an older rnoded leaves an ending run out for a moment)
    assert rec(cluster, j)["state"] == "RUNNING" and rec(cluster, j)["restarts"] == 0
    await trio.sleep(5)
    beats("n1")  # within one heartbeat interval of the first silence: still no proof
    assert rec(cluster, j)["restarts"] == 0
    await trio.sleep(6)
    beats("n1")  # silent across more than a heartbeat interval
    # requeued and started again (first fit: n1 once more), as its second run
    assert rec(cluster, j)["state"] == "RUNNING" and rec(cluster, j)["restarts"] == 1
    assert launches(conns["n1"])[-1].restarts == 1
    assert state(cluster, "n1") == "ALLOCATED"


async def test_bad_arrays_are_refused_without_building_them() -> None:
    from ranch.ctld.jobs.store import parse_array

    assert parse_array("1-9:4,2", 1001) == [1, 2, 5, 9]
    assert parse_array("0-3%2", 1001) == [0, 1, 2, 3]
    cluster = Cluster(make_config(), wall=wall)
    for spec in ("1-99999999999", "5-1", "x", "1,,2", "0-1001"):
        r = cluster.jobs.submit(job(array=spec))
        assert isinstance(r, m.Error) and r.field == "array", (spec, r)
    assert cluster.jobs.jobs == {}
    r = cluster.jobs.submit(job(array="1000"))  # MaxArraySize=1001: ids up to 1000
    assert isinstance(r, m.SubmitReply), r


async def test_max_array_size_and_max_job_count_refuse_at_submit() -> None:
    """Slurm's MaxArraySize (task ids below it) and MaxJobCount (jobs held, finished ones
    too until MinJobAge) refuse a submission, with nothing built."""
    cluster = Cluster(make_config(extra="MaxArraySize=8\nMaxJobCount=5"), wall=wall)
    assert (cluster.config.jobs.max_array_size, cluster.config.jobs.max_job_count) == (8, 5)
    r = cluster.jobs.submit(job(array="0-8"))
    assert isinstance(r, m.Error) and r.field == "array"
    assert "Invalid job array specification" in r.message and "MaxArraySize=8" in r.message
    assert cluster.jobs.submit(job(array="4-7")).job_ids == (1, 2, 3, 4)
    r = cluster.jobs.submit(job(array="0-1"))  # 4 held + 2 > 5
    assert isinstance(r, m.Error) and "MaxJobCount=5 reached (4 jobs held, 2 more asked)" in \
        r.message
    assert sorted(cluster.jobs.jobs) == [1, 2, 3, 4] and cluster.jobs.next_id == 5
    assert cluster.jobs.submit(job()).job_id == 5  # the fifth fits
    cluster.jobs.cancel(m.CancelJobs(job_ids=(1,), user="alice", uid=1000))
    r = cluster.jobs.submit(job())  # a finished job still counts until MinJobAge purges it
    assert isinstance(r, m.Error) and "MaxJobCount" in r.message
    no_arrays = Cluster(make_config(extra="MaxArraySize=0"), wall=wall)
    r = no_arrays.jobs.submit(job(array="0"))
    assert isinstance(r, m.Error) and r.field == "array"


async def test_state_fail_kills_then_requeues_failg_until_the_processes_are_gone() -> None:
    """Issue 12: State=FAIL kills the node's jobs; each is requeued (or NODE_FAIL with
    --no-requeue) once the node reports its processes gone; meanwhile the node is `failg`."""
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    keep = cluster.jobs.submit(job()).job_id
    norq = cluster.jobs.submit(job(requeue=False)).job_id
    assert rec(cluster, keep)["state"] == rec(cluster, norq)["state"] == "RUNNING"
    r = cluster.update_nodes(m.UpdateNodes("n1", "FAIL", "bad dimm", "root"))
    assert r.ok, r
    assert {k.job_id for k in kills(conns["n1"])} == {keep, norq}
    assert rec(cluster, keep)["state"] == "COMPLETING"
    assert names.compact(cluster.nodes["n1"].state) == "failg"
    Beats(cluster, conns)("n1", jobs_ended=(end(keep, "CANCELLED"), end(norq, "CANCELLED")))
    assert names.compact(cluster.nodes["n1"].state) == "fail"
    assert rec(cluster, keep)["state"] == "PENDING" and rec(cluster, keep)["restarts"] == 1
    assert rec(cluster, norq)["state"] == "NODE_FAIL"
    assert state(cluster, "n1") == "IDLE+FAIL"


SPREAD_CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
NodeName=b1 CPUs=2 RealMemory=1000 Weight=5
NodeName=b2 CPUs=4 RealMemory=1000 Weight=1
NodeName=b3 CPUs=2 RealMemory=1000 Weight=9
PartitionName=main Nodes=b[1-3] Default=YES
"""


async def test_tasks_without_nodes_spread_over_nodes_by_weight() -> None:
    """sbatch -n without -N: as many nodes as the tasks need, each node's own CPUs counted,
    first fit by Weight; refused only when the whole partition could never hold them."""
    cluster = Cluster(make_config(text=SPREAD_CONF), wall=wall)
    conns = {n: register(cluster, n, cpus=c, gpus=0)[1]
             for n, c in (("b1", 2), ("b2", 4), ("b3", 2))}
    j = cluster.jobs.submit(job(ntasks=5, max_nodes=0)).job_id
    r = rec(cluster, j)
    assert r["state"] == "RUNNING" and r["nodes"] == "b[1-2]" and r["node_count"] == 2
    assert r["cpus"] == 5
    assert {n: s.cpus for n, s in cluster.jobs.jobs[j].shares.items()} == {"b2": 4, "b1": 1}
    [spec] = launches(conns["b2"])
    assert spec.nodelist == "b[1-2]" and spec.num_nodes == 2 and spec.ntasks == 5
    # b1 has 1 CPU left, b3 2: three 1-CPU tasks take both; a fourth waits for Resources
    k = cluster.jobs.submit(job(ntasks=3, max_nodes=0)).job_id
    assert rec(cluster, k)["nodes"] == "b[1,3]"
    w = cluster.jobs.submit(job(ntasks=1, max_nodes=0)).job_id
    assert rec(cluster, w)["reason"] == "Resources"
    # pending, it counts the fewest nodes that could hold it: 7 tasks need 4 + 2 + 2 CPUs
    big = cluster.jobs.submit(job(ntasks=7, max_nodes=0)).job_id
    assert rec(cluster, big)["node_count"] == 3 and rec(cluster, big)["cpus"] == 7
    # -c 2: a task takes 2 CPUs; 8 CPUs hold 4 such tasks: 5 wait for more than the
    # partition has (PartitionConfig, as slurmctld with EnforcePartLimits=NO)
    r2 = cluster.jobs.submit(job(ntasks=5, cpus_per_task=2, max_nodes=0))
    assert rec(cluster, r2.job_id)["reason"] == "PartitionConfig"
    # -N 1-2: at most two nodes (4 + 2 CPUs), so 7 tasks are refused, 6 accepted
    r3 = cluster.jobs.submit(job(ntasks=7, num_nodes=1, max_nodes=2))
    assert isinstance(r3, m.Error) and r3.field == "max_nodes"
    assert not isinstance(cluster.jobs.submit(job(ntasks=6, num_nodes=1, max_nodes=2)), m.Error)
    # -N 2-3 with 2 tasks: one task on each of two nodes
    cluster2 = Cluster(make_config(text=SPREAD_CONF), wall=wall)
    for n, c in (("b1", 2), ("b2", 4), ("b3", 2)):
        register(cluster2, n, cpus=c, gpus=0)
    t = cluster2.jobs.submit(job(ntasks=2, num_nodes=2, max_nodes=3)).job_id
    assert {n: s.cpus for n, s in cluster2.jobs.jobs[t].shares.items()} == {"b2": 1, "b1": 1}
    # a spread job survives the state file
    doc = orjson.loads(deferred.dumps(cluster.jobs.save_doc()))
    assert any(d["need"]["spread"] and d["need"]["tasks"] == 5 for d in doc["jobs"])


async def test_begin_time_waits_for_its_hour_of_fake_time_and_survives_a_restart(
        autojump_clock) -> None:
    """--begin: PENDING (BeginTime) until then, woken by a deadline, not by other events;
    a restarted controller (the state file) keeps waiting and wakes on time too."""
    cfg = make_config()
    cluster = Cluster(cfg, wall=wall)
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        conns = up(cluster, "n1")
        beats = Beats(cluster, conns)
        begin = wall() + 3600
        j = cluster.jobs.submit(job(begin_time=begin)).job_id
        later = cluster.jobs.submit(job(begin_time=begin + 3600)).job_id
        now_job = cluster.jobs.submit(job()).job_id  # not held back by the waiting ones
        assert rec(cluster, now_job)["state"] == "RUNNING"
        assert rec(cluster, j)["reason"] == "BeginTime"
        assert rec(cluster, j)["eligible_time"] == begin
        while wall() < begin - 10:
            await trio.sleep(10)
            beats("n1", job_ids=(now_job,))
        assert rec(cluster, j)["state"] == "PENDING" and rec(cluster, j)["reason"] == "BeginTime"
        await trio.sleep(10.5)
        beats("n1", job_ids=(now_job,))
        assert rec(cluster, j)["state"] == "RUNNING"
        assert rec(cluster, j)["start_time"] >= begin
        assert rec(cluster, later)["reason"] == "BeginTime"
        doc = orjson.loads(deferred.dumps(cluster.save_doc()))
        nursery.cancel_scope.cancel()
    again = Cluster(cfg, wall=wall)
    again.restore(doc)
    async with trio.open_nursery() as nursery:
        again.start()
        nursery.start_soon(again.deadlines.run, again.on_deadlines)
        conns = up(again, "n1")
        beats = Beats(again, conns)
        assert rec(again, later)["reason"] == "BeginTime"
        while wall() < begin + 3590:
            await trio.sleep(10)
            beats("n1", job_ids=(now_job, j))
        assert rec(again, later)["state"] == "PENDING"
        await trio.sleep(20)
        beats("n1", job_ids=(now_job, j))
        assert rec(again, later)["state"] == "RUNNING"
        nursery.cancel_scope.cancel()


async def test_begin_time_moved_by_control_and_bad_values_refused() -> None:
    cluster = Cluster(make_config(), wall=wall)
    up(cluster, "n1")
    r = cluster.jobs.submit(job(begin_time=float("nan")))
    assert isinstance(r, m.Error) and r.field == "begin_time"
    j = cluster.jobs.submit(job(begin_time=wall() + 86400)).job_id
    assert rec(cluster, j)["reason"] == "BeginTime"
    bad = cluster.jobs.control(m.JobControl("begin", (j,), "alice", 1000))
    assert not bad.ok and "begin_time" in bad.errors[0]
    moved = cluster.jobs.control(m.JobControl("begin", (j,), "alice", 1000, begin_time=wall()))
    assert moved.ok and rec(cluster, j)["state"] == "RUNNING"
    again = cluster.jobs.control(m.JobControl("begin", (j,), "alice", 1000, begin_time=wall()))
    assert not again.ok and "no longer pending" in again.errors[0]



async def test_cancel_by_user_rebuilds_the_pending_list_once() -> None:
    """rcancel -u: the user's pending jobs leave the queue in one rebuild; the others keep
    their order and partition counts."""
    cluster = Cluster(make_config(), wall=wall)  # no node up: everything pends
    ids = [cluster.jobs.submit(job(user="bob" if i % 2 else "alice")).job_id for i in range(6)]
    r = cluster.jobs.cancel(m.CancelJobs(only_user="alice", user="alice", uid=1000))
    assert r.ok and r.job_ids == tuple(ids[0::2])
    assert [j.id for j in cluster.jobs.pending] == ids[1::2]
    assert dict(cluster.jobs.pending_parts) == {"main": 3}
    assert {rec(cluster, i)["state"] for i in ids[0::2]} == {"CANCELLED"}


async def test_the_name_root_grants_nothing_uid_0_does() -> None:
    cluster = Cluster(make_config(), wall=wall)
    j = cluster.jobs.submit(job()).job_id  # alice's, pending (no node up)
    r = cluster.jobs.cancel(m.CancelJobs(job_ids=(j,), user="root", uid=1001))
    assert not r.ok and "Access/permission denied" in r.errors[0]
    r = cluster.jobs.control(m.JobControl(job_ids=(j,), action="hold", user="root", uid=1001))
    assert not r.ok and "Access/permission denied" in r.errors[0]
    assert rec(cluster, j)["state"] == "PENDING" and not rec(cluster, j)["held"]
    r = cluster.jobs.cancel(m.CancelJobs(job_ids=(j,), user="admin", uid=0))
    assert r.ok and rec(cluster, j)["state"] == "CANCELLED"


async def test_kill_wait_from_the_config_reaches_the_launch() -> None:
    cluster = Cluster(make_config(extra="KillWait=7\nMinJobAge=0"), wall=wall)
    conns = up(cluster, "n1")
    j = cluster.jobs.submit(job()).job_id
    [spec] = launches(conns["n1"])
    assert spec.job_id == j and spec.kill_wait == 7.0
    assert cluster.jobs.min_job_age == 0.0


WEIGHTED = """ClusterName=w
SlurmdTimeout=30
NodeName=w1 CPUs=4 RealMemory=1000 Weight={w1}
NodeName=w2 CPUs=4 RealMemory=1000 Weight={w2}
{more}
PartitionName=main Nodes=ALL Default=YES State=UP
"""


async def test_placement_order_and_submit_checks_follow_a_reconfigure() -> None:
    """What the scheduler keeps between submissions (each partition's nodes in Weight order,
    the submit checks of a request shape) is thrown away when the config changes: a lighter
    node is used first at once, and a job no node could hold before is taken once one can."""
    cluster = Cluster(make_config(text=WEIGHTED.format(w1=1, w2=5, more="")), wall=wall)
    up(cluster, "w1", "w2")
    first = cluster.jobs.submit(job(cpus_per_task=1))
    assert rec(cluster, first.job_id)["nodes"] == "w1"  # the lighter node
    big = cluster.jobs.submit(job(cpus_per_task=8))
    assert isinstance(big, m.Error) and big.field == "cpus_per_task"
    cluster.apply_config(make_config(text=WEIGHTED.format(
        w1=9, w2=5, more="NodeName=w3 CPUs=8 RealMemory=1000 Weight=9")))
    second = cluster.jobs.submit(job(cpus_per_task=1))
    assert rec(cluster, second.job_id)["nodes"] == "w2"  # w2 is now the lighter one
    again = cluster.jobs.submit(job(cpus_per_task=8))
    assert isinstance(again, m.SubmitReply)  # w3 could hold it (it waits for w3 to register)


async def test_a_launch_the_node_never_had_is_sent_again_one_it_named_is_requeued() -> None:
    """A registration lists every run the node holds. One that leaves out a run this rctld
    launched there and never heard of (its LaunchJob went to a connection the node dropped, or
    refused) gets the same run again, no requeue; once the node named the run, leaving it out
    means it was lost there: requeued."""
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    j = cluster.jobs.submit(job(cpus_per_task=4)).job_id
    assert [(s.job_id, s.restarts) for s in launches(conns["n1"])] == [(j, 0)]
    _, again = register(cluster, "n1")  # a new connection; the node never had the run
    assert [(s.job_id, s.restarts) for s in launches(again)] == [(j, 0)]
    assert rec(cluster, j)["restarts"] == 0 and rec(cluster, j)["state"] == "RUNNING"
    beat(cluster, "n1", again, 1, job_ids=(j,), runs=((j, 0),))  # now it has it
    _, third = register(cluster, "n1")  # ...and comes back without it: lost there
    assert rec(cluster, j)["restarts"] == 1
    assert [(s.job_id, s.restarts) for s in launches(third)] == [(j, 1)]
