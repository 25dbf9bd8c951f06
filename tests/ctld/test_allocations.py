"""Allocations in the controller core (issue 20: ralloc, rrun outside a job): a job without a
script that holds every node until its owner releases it, ending as slurmctld ends an salloc
job (COMPLETED 0:0, FAILED N:0 or 0:SIG), and what it refuses."""

from __future__ import annotations

import attrs
import orjson
import trio

from ranch.ctld.jobs.inactive import HOLDER_GONE
from ranch.ctld.rights import KEY_HOLDER
from ranch.ctld.state import deferred
from ranch.ctld.state.overlay import overlay
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, wall
from .test_jobs import Beats, end, job, kills, launches, rec, up


def alloc(**kw) -> m.SubmitJob:
    return job(script="", allocation=True, name="interactive", **kw)


def complete(cluster: Cluster, job_id: int, code: int = 0, sig: int = 0, *, user: str = "alice",
             uid: int = 1000) -> m.JobResult:
    return cluster.jobs.control(m.JobControl("complete", (job_id,), user, uid, exit_code=code,
                                             signal=sig))


async def test_an_allocation_holds_every_node_and_ends_with_its_commands_exit_code() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1", "n2")
    j = cluster.jobs.submit(alloc(num_nodes=2, ntasks=3)).job_id
    r = rec(cluster, j)
    # 3 tasks on 2 nodes hold 2 CPUs and 1, as Slurm lays them (tests/conformance)
    assert (r["state"], r["nodes"], r["batch_flag"], r["node_cpus"]) == (
        "RUNNING", "n[1-2]", 0, [2, 1])
    # no script reaches any node: each holds the allocation's resources, nothing more
    specs = [launches(conns[n])[0] for n in ("n1", "n2")]
    assert [(s.job_id, s.script, s.nodelist) for s in specs] == [(j, "", "n[1-2]")] * 2
    # someone else may not release it; its owner may
    assert "Access/permission denied" in complete(cluster, j, 3, user="bob", uid=1001).errors[0]
    assert rec(cluster, j)["state"] == "RUNNING"
    assert complete(cluster, j, 3).ok
    assert rec(cluster, j)["state"] == "COMPLETING"
    assert [k.reason for n in ("n1", "n2") for k in kills(conns[n])] == ["released"] * 2
    beats = Beats(cluster, conns)
    beats("n1", jobs_ended=(end(j, "CANCELLED"),))
    beats("n2", jobs_ended=(end(j, "CANCELLED"),))
    r = rec(cluster, j)
    assert (r["state"], r["exit_code"], r["signal"], r["reason"]) == (
        "FAILED", 3, 0, "NonZeroExitCode")
    assert cluster.nodes["n1"].state.cpus_alloc == 0
    # a second release of an ended job is Slurm's ESLURM_ALREADY_DONE
    again = complete(cluster, j, 0)
    assert not again.ok and "already completing or completed" in again.errors[0]


async def test_a_released_allocation_is_completed_0_0_whatever_its_placeholder_reports() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    j = cluster.jobs.submit(alloc()).job_id
    assert complete(cluster, j, 0, uid=0, user="root").ok  # root (an admin) may release it
    assert complete(cluster, j, 5).ok  # a repeat while it completes changes nothing
    # an rnoded from before issue 20 reports its killed placeholder as 0:15
    Beats(cluster, conns)("n1", jobs_ended=(m.JobEnd(j, "CANCELLED", signal=15),))
    r = rec(cluster, j)
    assert (r["state"], r["exit_code"], r["signal"], r["reason"]) == ("COMPLETED", 0, 0, "None")


async def test_a_command_killed_by_a_signal_fails_the_allocation_0_sig() -> None:
    cluster = Cluster(make_config(), wall=wall)
    conns = up(cluster, "n1")
    j = cluster.jobs.submit(alloc()).job_id
    assert complete(cluster, j, 0, 9).ok
    Beats(cluster, conns)("n1", jobs_ended=(end(j, "CANCELLED"),))
    r = rec(cluster, j)
    assert (r["state"], r["exit_code"], r["signal"], r["reason"]) == (
        "FAILED", 0, 9, "JobLaunchFailure")


async def test_released_while_pending_is_cancelled_and_keeps_its_reason() -> None:
    cluster = Cluster(make_config(), wall=wall)
    up(cluster, "n1")
    busy = cluster.jobs.submit(job(cpus_per_task=4)).job_id
    j = cluster.jobs.submit(alloc()).job_id
    assert rec(cluster, j)["reason"] == "Resources"
    assert complete(cluster, j, 0).ok
    r = rec(cluster, j)
    assert (r["state"], r["reason"], r["exit_code"]) == ("CANCELLED", "Resources", 0)
    assert rec(cluster, busy)["state"] == "RUNNING"


async def test_what_an_allocation_refuses_and_what_is_refused_it() -> None:
    cluster = Cluster(make_config(), wall=wall)
    up(cluster, "n1", "n2")
    bad = cluster.jobs.submit(job(allocation=True))
    assert isinstance(bad, m.Error) and bad.field == "script"
    bad = cluster.jobs.submit(alloc(array="1-2"))
    assert isinstance(bad, m.Error) and bad.field == "array"
    bad = cluster.jobs.submit(job(script=""))  # a batch job still needs its script
    assert isinstance(bad, m.Error) and "empty" in bad.message
    for wrong in (alloc(held_by="salloc"), job(held_by="ralloc")):
        bad = cluster.jobs.submit(wrong)
        assert isinstance(bad, m.Error) and bad.field == "held_by", bad
    batch = cluster.jobs.submit(job()).job_id
    r = complete(cluster, batch, 0)
    assert not r.ok and "only an allocation" in r.errors[0]
    assert rec(cluster, batch)["state"] == "RUNNING"
    a = cluster.jobs.submit(alloc()).job_id
    r = cluster.jobs.control(m.JobControl("requeue", (a,), "alice", 1000))
    assert not r.ok and "Only batch jobs are accepted or processed" in r.errors[0]
    r = cluster.jobs.control(m.JobControl("complete", (a,), "alice", 1000, exit_code=256))
    assert not r.ok and "exit_code 0-255" in r.errors[0]


async def test_a_lost_node_ends_an_allocation_node_fail_it_is_never_requeued() -> None:
    cluster = Cluster(make_config(), wall=wall)
    up(cluster, "n1")
    j = cluster.jobs.submit(alloc()).job_id  # requeue=True, as Slurm shows salloc's jobs
    cluster.update_nodes(m.UpdateNodes("n1", "DOWN", "dead", "root"))
    r = rec(cluster, j)
    assert (r["state"], r["restarts"], r["requeue"]) == ("NODE_FAIL", 0, True)


async def test_an_allocation_is_still_one_after_a_restart() -> None:
    cfg = make_config()
    cluster = Cluster(cfg, wall=wall)
    up(cluster, "n1")
    j = cluster.jobs.submit(alloc()).job_id
    doc = orjson.loads(deferred.dumps(cluster.save_doc()))
    again = Cluster(cfg, wall=wall)
    again.restore(overlay(doc, []))
    assert rec(again, j)["batch_flag"] == 0
    assert complete(again, j, 4).ok and rec(again, j)["state"] == "COMPLETING"


def alive(cluster: Cluster, job_id: int, *, user: str = "alice", uid: int = 1000
          ) -> m.JobResult:
    return cluster.jobs.control(m.JobControl("alive", (job_id,), user, uid))


async def test_inactive_limit_ends_an_allocation_whose_command_went_silent(autojump_clock
                                                                          ) -> None:
    """InactiveLimit=60: "alive" words keep an allocation past it; once they stop it ends
    TIMEOUT, Reason InactiveLimit, 0:0 (as slurmctld's inactivity limit ends salloc's), within
    the limit of the last word; a batch job and --no-shell's allocation (held by nobody) are
    not concerned."""
    cluster = Cluster(make_config(extra="InactiveLimit=60"), wall=wall)
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        conns = up(cluster, "n1", "n2")
        beats = Beats(cluster, conns)
        j = cluster.jobs.submit(alloc(held_by="ralloc")).job_id
        assert alive(cluster, j).ok  # as ralloc does once it sees the job run
        batch = cluster.jobs.submit(job(cpus_per_task=4)).job_id
        no_shell = cluster.jobs.submit(alloc()).job_id  # held_by "": --no-shell's
        assert [rec(cluster, x)["nodes"] for x in (j, batch, no_shell)] == ["n1", "n2", "n1"]
        assert "Access/permission denied" in alive(cluster, j, user="bob", uid=1001).errors[0]
        for _ in range(6):  # 150 s of words 25 s apart, and of heartbeats
            await trio.sleep(25)
            assert alive(cluster, j).ok
            beats("n1", job_ids=(j, no_shell))
            beats("n2", job_ids=(batch,))
        assert rec(cluster, j)["state"] == "RUNNING"
        await trio.sleep(59)  # silent, not yet for 60 s
        beats("n1", job_ids=(j, no_shell))
        beats("n2", job_ids=(batch,))
        assert rec(cluster, j)["state"] == "RUNNING"
        await trio.sleep(2)
        assert rec(cluster, j)["state"] == "COMPLETING"
        assert [k.reason for k in kills(conns["n1"])] == ["inactive"]
        beats("n1", job_ids=(no_shell,), jobs_ended=(end(j, "CANCELLED"),))
        r = rec(cluster, j)
        assert (r["state"], r["reason"], r["exit_code"], r["signal"]) == (
            "TIMEOUT", "InactiveLimit", 0, 0)
        for never_spoke in (batch, no_shell):
            r = rec(cluster, never_spoke)
            assert (r["state"], r["restarts"]) == ("RUNNING", 0)
        assert not alive(cluster, no_shell).ok  # nobody holds it: nobody may keep it
        again = alive(cluster, j)
        assert not again.ok and "already completing or completed" in again.errors[0]
        nursery.cancel_scope.cancel()


async def test_a_holder_that_never_speaks_or_rrun_that_falls_silent_ends_it(autojump_clock
                                                                           ) -> None:
    """SubmitJob.held_by, without InactiveLimit: a holder that does not speak within the
    grace (MessageTimeout, 5 s at least) of its job's start was gone before (killed while it
    pended): FAILED 1:0, as slurmctld ends one it cannot tell of the start; rrun's allocation
    with no step running is CANCELLED once rrun is silent that long (a killed srun's job is);
    a silent ralloc's stays until HOLDER_GONE (InactiveLimit's stand-in) is over."""
    cluster = Cluster(make_config(), wall=wall)
    grace = cluster.jobs.inactive.grace
    assert grace == 10  # MessageTimeout=10 (the default), over ORPHAN_GRACE
    async with trio.open_nursery() as nursery:
        cluster.start()
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        conns = up(cluster, "n1", "n2")
        beats = Beats(cluster, conns)
        start = trio.current_time()
        rrun = cluster.jobs.submit(alloc(held_by="rrun")).job_id
        ralloc = cluster.jobs.submit(alloc(held_by="ralloc")).job_id
        gone = cluster.jobs.submit(alloc(held_by="ralloc", cpus_per_task=4)).job_id
        assert [rec(cluster, j)["nodes"] for j in (rrun, ralloc, gone)] == ["n1", "n1", "n2"]
        assert alive(cluster, ralloc).ok
        for _ in range(3):
            assert alive(cluster, rrun).ok
            await trio.sleep(grace - 1)
            beats("n1", job_ids=(rrun, ralloc))
        assert [k.reason for k in kills(conns["n2"])] == ["released"]
        beats("n2", jobs_ended=(end(gone, "CANCELLED"),))
        r = rec(cluster, gone)
        assert (r["state"], r["reason"], r["exit_code"], r["signal"]) == (
            "FAILED", "NonZeroExitCode", 1, 0)
        assert rec(cluster, rrun)["state"] == "RUNNING"
        await trio.sleep(grace + 1)  # rrun silent now
        assert [k.reason for k in kills(conns["n1"])] == ["cancelled"]
        beats("n1", job_ids=(ralloc,), jobs_ended=(end(rrun, "CANCELLED"),))
        r = rec(cluster, rrun)
        assert (r["state"], r["reason"], r["exit_code"], r["signal"]) == (
            "CANCELLED", "None", 0, 0)
        await trio.sleep(3 * grace)
        beats("n1", job_ids=(ralloc,))
        assert rec(cluster, ralloc)["state"] == "RUNNING"  # spoke once; InactiveLimit=0
        # ...but not for ever: silent for HOLDER_GONE (InactiveLimit's stand-in), it ends
        await trio.sleep(start + HOLDER_GONE - 1 - trio.current_time())  # its word: at start
        assert rec(cluster, ralloc)["state"] == "RUNNING"
        await trio.sleep(2)
        assert rec(cluster, ralloc)["state"] == "COMPLETING"
        assert [k.reason for k in kills(conns["n1"])][-1] == "inactive"
        beats("n1", jobs_ended=(end(ralloc, "CANCELLED"),))
        r = rec(cluster, ralloc)
        assert (r["state"], r["reason"], r["exit_code"]) == ("TIMEOUT", "InactiveLimit", 0)
        nursery.cancel_scope.cancel()


async def test_an_immediate_allocation_that_cannot_start_at_once_fails() -> None:
    """salloc -I: the scheduling pass after the submission starts it, or it ends FAILED,
    BadConstraints, 0:1 (slurmctld's words for it); never queued."""
    cluster = Cluster(make_config(), wall=wall)
    up(cluster, "n1")
    now = cluster.jobs.submit(alloc(immediate=True, cpus_per_task=3)).job_id
    cluster.jobs.run()
    assert rec(cluster, now)["state"] == "RUNNING"
    busy = cluster.jobs.submit(alloc(immediate=True, cpus_per_task=2)).job_id
    queued = cluster.jobs.submit(alloc(cpus_per_task=2)).job_id
    cluster.jobs.run()
    r = rec(cluster, busy)
    assert (r["state"], r["reason"], r["exit_code"], r["signal"]) == (
        "FAILED", "BadConstraints", 0, 1)
    assert rec(cluster, queued)["state"] == "PENDING"
    bad = cluster.jobs.submit(job(immediate=True))  # salloc's alone
    assert isinstance(bad, m.Error) and bad.field == "immediate", bad


async def test_an_allocation_started_by_its_own_submission_never_accrued() -> None:
    """scontrol's AccrueTime: Unknown for an salloc/srun allocation the submission's own pass
    placed (slurmctld tries those at once; tests/conformance/test_alloc.py compares it), the
    submit time for one that waited and for a batch job; kept across a restart."""
    cfg = make_config()
    cluster = Cluster(cfg, wall=wall)
    up(cluster, "n1", "n2", "n3", "n4")
    at_once = cluster.jobs.submit(alloc(num_nodes=4, cpus_per_task=4)).job_id  # every CPU
    waits = cluster.jobs.submit(alloc(num_nodes=1)).job_id
    batch = cluster.jobs.submit(job()).job_id
    assert rec(cluster, at_once)["state"] == "RUNNING"
    assert rec(cluster, at_once)["accrue_time"] is None
    for j in (waits, batch):
        assert rec(cluster, j)["state"] == "PENDING"
        assert rec(cluster, j)["accrue_time"] == rec(cluster, j)["submit_time"]
    complete(cluster, at_once)
    doc = orjson.loads(deferred.dumps(cluster.save_doc()))
    again = Cluster(cfg, wall=wall)
    again.restore(overlay(doc, []))
    assert rec(again, at_once)["accrue_time"] is None
    assert rec(again, waits)["accrue_time"] == rec(again, waits)["submit_time"]


async def test_the_reply_of_an_allocation_decided_at_once_holds_its_record() -> None:
    """ralloc's first look at its job needs no request (issue 35): the reply of an allocation
    that the submission's own pass placed holds the job's record, as GetJobs gives it; one
    left pending, and a batch job, get none (the command asks, as before)."""
    cluster = Cluster(make_config(), wall=wall)
    up(cluster, "n1", "n2")
    reply = cluster.jobs.submit(alloc(num_nodes=2, ntasks=8))  # every CPU
    assert reply.job == rec(cluster, reply.job_id)
    assert (reply.job["state"], reply.job["nodes"]) == ("RUNNING", "n[1-2]")
    waiting = cluster.jobs.submit(alloc())  # every CPU is taken: it waits
    assert rec(cluster, waiting.job_id)["state"] == "PENDING" and waiting.job == {}
    assert cluster.jobs.submit(job()).job == {}
    # what the wire carries, and what a version-5 peer is sent
    from ranch.protocol.codec import decode, encode

    assert decode("SubmitReply", encode(reply)) == reply
    assert b'"job"' not in encode(reply, version=5)


async def test_a_step_waits_for_an_older_node_to_start_its_job() -> None:
    """An rnoded older than protocol 6 refuses a LaunchStep of a job it has not started yet (a
    0.1.0 node under an upgraded controller, tests/deploy): the step is granted only once the
    node named the run, until then rrun is told the job is pending and retries, as srun does."""
    from ranch.ctld.jobs.steps import NOT_RUNNING
    from ranch.protocol.versions import HOLDS_STEPS

    from .helpers import FakeConn, hardware

    cluster = Cluster(make_config(), wall=wall)
    old, new = FakeConn(), FakeConn()
    cluster.register(m.Register("n1", hardware(), 1.0, "0.1.0"), old, version=HOLDS_STEPS - 1)
    cluster.register(m.Register("n2", hardware(), 1.0, "0.2.0"), new, version=HOLDS_STEPS)
    ask = m.StepRequest(0, ("true",), "/tmp", "127.0.0.1", 1, nodes=1)
    for conn, name in ((old, "n1"), (new, "n2")):
        jid = cluster.jobs.submit(alloc(nodelist=name, num_nodes=1)).job_id
        assert launches(conn)[-1].job_id == jid  # launched there, not started yet
        step = cluster.jobs.steps.request(attrs.evolve(ask, job_id=jid), KEY_HOLDER)
        if conn is old:
            assert isinstance(step, m.Error) and step.code == "step_pending", step
            assert NOT_RUNNING in step.message
            cluster.job_started(m.JobStarted(jid, 0, wall()), old)
            step = cluster.jobs.steps.request(attrs.evolve(ask, job_id=jid), KEY_HOLDER)
        assert isinstance(step, m.StepGranted), step  # a protocol-6 node holds the step itself
