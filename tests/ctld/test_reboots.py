"""Reboots in the controller, in-process under trio's MockClock: the request, its issue once the
node is idle, RebootNode to rnoded, the node's return with a new boot time, ResumeTimeout."""

from __future__ import annotations

import orjson
import trio

from ranch.ctld.state import deferred
from ranch.protocol import messages as m
from ranch.statemachine import events
from ranch.statemachine.model import Flag
from tests.ctld.harness import Harness as Cluster

from .helpers import FakeConn, hardware, make_config, register, state, wall

REBOOT = """\
RebootProgram=/sbin/reboot
ResumeTimeout=30
HeartbeatInterval=1000
SlurmdTimeout=5000
"""


def cluster() -> Cluster:
    return Cluster(make_config(extra=REBOOT), wall=wall)


def reboot(c: Cluster, nodes: str, **kw) -> m.UpdateResult:
    return c.reboot_nodes(m.RebootNodes(node_names=nodes, user="alice", **kw))


def reason(c: Cluster, name: str) -> str | None:
    r = c.nodes[name].state.reason
    return r.text if r else None


def compact(c: Cluster, name: str) -> str:
    return next(n["compact"] for n in c.snapshot().nodes if n["name"] == name)


async def test_idle_node_is_issued_at_once_and_returns_to_its_next_state(autojump_clock) -> None:
    c = cluster()
    async with trio.open_nursery() as nursery:
        c.start()
        nursery.start_soon(c.deadlines.run, c.on_deadlines)
        _, conn = register(c, "n1", boot=100.0)
        assert reboot(c, "n1", asap=True, next_state="RESUME", reason="new driver").ok
        assert state(c, "n1") == "DOWN+DRAIN+REBOOT_ISSUED"
        assert compact(c, "n1") == "boot^"
        assert reason(c, "n1") == "new driver : reboot issued"
        assert [type(p) for p in conn.pushed] == [m.RebootNode]
        await trio.sleep(5)
        # rnoded restarted but the node did not boot (same boot time): still waiting
        register(c, "n1", conn, boot=100.0)
        assert state(c, "n1") == "DOWN+DRAIN+REBOOT_ISSUED"
        register(c, "n1", conn, boot=200.0)  # the new boot
        assert state(c, "n1") == "IDLE"
        assert reason(c, "n1") is None
        await trio.sleep(60)  # the ResumeTimeout of a reboot that ended does nothing
        assert state(c, "n1") == "IDLE"
        # `rcontrol events`: who asked, and each step's cause
        steps = [(r["new"], r["cause"], r.get("user")) for r in c.eventlog.query(nodes=["n1"])
                 if r["kind"] == "state"]
        assert steps[-3:] == [("IDLE+DRAIN+REBOOT_REQUESTED", "admin:alice", "alice"),
                              ("DOWN+DRAIN+REBOOT_ISSUED", "reboot", None),
                              ("IDLE", "registration", None)]
        nursery.cancel_scope.cancel()


async def test_busy_node_waits_for_its_job_then_nextstate_down(autojump_clock) -> None:
    c = cluster()
    async with trio.open_nursery() as nursery:
        c.start()
        nursery.start_soon(c.deadlines.run, c.on_deadlines)
        _, conn = register(c, "n2", boot=100.0)
        node = c.nodes["n2"]
        c.apply_event(node, events.AllocationChanged(now=wall(), cpus_alloc=2))
        assert reboot(c, "n2", next_state="DOWN").ok
        assert state(c, "n2") == "MIXED+REBOOT_REQUESTED"
        assert compact(c, "n2") == "mix@"
        assert reason(c, "n2") == "reboot requested"
        assert conn.pushed == []  # not while its job runs
        c.apply_event(node, events.AllocationChanged(now=wall(), cpus_alloc=0))
        assert state(c, "n2") == "DOWN+REBOOT_ISSUED"
        assert reason(c, "n2") == "reboot requested : reboot issued"
        assert [type(p) for p in conn.pushed] == [m.RebootNode]
        register(c, "n2", conn, boot=300.0)
        assert state(c, "n2") == "DOWN"
        assert reason(c, "n2") == "reboot requested : reboot issued : reboot complete"
        nursery.cancel_scope.cancel()


async def test_reboot_that_never_comes_back_times_out_down(autojump_clock) -> None:
    c = cluster()
    async with trio.open_nursery() as nursery:
        c.start()
        nursery.start_soon(c.deadlines.run, c.on_deadlines)
        register(c, "n3", boot=100.0)
        assert reboot(c, "n3").ok
        assert state(c, "n3") == "DOWN+REBOOT_ISSUED"
        await trio.sleep(29)
        assert state(c, "n3") == "DOWN+REBOOT_ISSUED"  # liveness leaves a rebooting node be
        await trio.sleep(2)
        assert state(c, "n3") == "DOWN"
        assert reason(c, "n3") == "reboot requested : reboot issued : reboot timed out"
        assert compact(c, "n3") == "down"
        nursery.cancel_scope.cancel()


async def test_restart_rearms_what_is_left_of_the_timeout(autojump_clock) -> None:
    c = cluster()
    register(c, "n1", boot=100.0)
    assert reboot(c, "n1", next_state="DOWN").ok
    doc = orjson.loads(deferred.dumps(c.save_doc()))  # as the state file holds it
    await trio.sleep(20)
    c2 = cluster()
    c2.restore(doc)
    assert state(c2, "n1") == "DOWN+REBOOT_ISSUED"
    assert Flag.NEXT_DOWN in c2.nodes["n1"].state.flags  # the plan is saved, never shown
    async with trio.open_nursery() as nursery:
        c2.start()
        nursery.start_soon(c2.deadlines.run, c2.on_deadlines)
        await trio.sleep(9)
        assert state(c2, "n1") == "DOWN+REBOOT_ISSUED"
        await trio.sleep(2)
        assert state(c2, "n1") == "DOWN"
        nursery.cancel_scope.cancel()


async def test_cancel_reboot_and_its_refusals(autojump_clock) -> None:
    c = cluster()
    register(c, "n1", boot=100.0)
    register(c, "n2", boot=100.0)
    node = c.nodes["n1"]
    c.apply_event(node, events.AllocationChanged(now=wall(), cpus_alloc=4))
    assert reboot(c, "n1", asap=True).ok
    assert state(c, "n1") == "ALLOCATED+DRAIN+REBOOT_REQUESTED"
    assert compact(c, "n1") == "drng@"
    assert reason(c, "n1") == "Reboot ASAP"
    assert reboot(c, "n1", next_state="DOWN").ok  # already requested: skipped, as in Slurm
    undo = c.update_nodes(m.UpdateNodes("n1", state="CANCEL_REBOOT", user="alice"))
    assert undo.ok and undo.changed == ("n1",)
    assert state(c, "n1") == "ALLOCATED" and reason(c, "n1") is None
    none = c.update_nodes(m.UpdateNodes("n1", state="CANCEL_REBOOT", user="alice"))
    assert not none.ok and "no pending reboot" in none.errors[0]
    assert reboot(c, "n2").ok  # idle: issued at once
    late = c.update_nodes(m.UpdateNodes("n2", state="cancel_reboot", user="alice"))
    assert not late.ok and "already in progress" in late.errors[0]
    bad = reboot(c, "n9")
    assert not bad.ok and bad.errors[0].startswith("unknown node")
    assert not reboot(c, "n1", next_state="IDLE").ok


# --- reboot until healthy (issue 33, beyond Slurm) -----------------------------------------

GATED = REBOOT + "HealthCheckProgram=/bin/true\nHealthCheckInterval=60\nRebootUnhealthyMax=2\n"


def boot(c: Cluster, name: str, conn, at: float, verdict: str, message: str = "") -> None:
    """rnoded back on a new boot, its health check run first (as it does when one is set)."""
    report = m.HealthReport(verdict=verdict, message=message, ran_at=at)
    c.register(m.Register(name, hardware(), at, "0.1.0", health=report), conn)


async def test_a_reboot_ends_in_service_only_once_the_check_on_the_new_boot_passed(
        autojump_clock) -> None:
    c = Cluster(make_config(extra=GATED), wall=wall)
    conn = FakeConn()
    boot(c, "n1", conn, 100.0, "ok")
    assert state(c, "n1") == "IDLE"
    assert reboot(c, "n1", asap=True, reason="new driver").ok
    assert state(c, "n1") == "DOWN+DRAIN+REBOOT_ISSUED"
    # back, but the check failed: held drained with its words and the count
    boot(c, "n1", conn, 200.0, "drain", "HC: nvidia-smi failed")
    assert state(c, "n1") == "IDLE+DRAIN"
    assert reason(c, "n1") == "HC: nvidia-smi failed (unhealthy after reboot 1 of 2)"
    assert c.nodes["n1"].unhealthy_boots == 1
    # a second reboot that ends unhealthy: FAIL, for a human (a later passing check leaves it)
    assert reboot(c, "n1", asap=True).ok
    boot(c, "n1", conn, 300.0, "fail", "HC: nvidia-smi failed")
    assert state(c, "n1") == "IDLE+FAIL"
    assert reason(c, "n1") == "HC: nvidia-smi failed (unhealthy after 2 reboots in a row)"
    c.apply_event(c.nodes["n1"], events.HealthResult(now=wall(), verdict="ok"))
    assert state(c, "n1") == "IDLE+FAIL"
    # the admin resumes it; the next reboot's boot passes its check: in service, count reset
    assert c.update_nodes(m.UpdateNodes("n1", state="RESUME", user="alice")).ok
    assert reboot(c, "n1", next_state="RESUME").ok
    boot(c, "n1", conn, 400.0, "ok")
    assert state(c, "n1") == "IDLE" and reason(c, "n1") is None
    assert c.nodes["n1"].unhealthy_boots == 0


async def test_power_save_resumes_pass_the_same_gate(autojump_clock) -> None:
    power = ("SuspendProgram=/bin/true\nResumeProgram=/bin/true\nSuspendTime=60\n")
    spawned: list = []
    c = Cluster(make_config(extra=GATED + power), wall=wall,
                spawn=lambda *a, **kw: spawned.append(a))
    conn = FakeConn()
    boot(c, "n2", conn, 100.0, "ok")
    c.apply_event(c.nodes["n2"], events.SuspendStarted(now=wall()))
    c.apply_event(c.nodes["n2"], events.SuspendTimeout(now=wall()))
    c.apply_event(c.nodes["n2"], events.ResumeStarted(now=wall()))
    assert state(c, "n2") == "IDLE+NOT_RESPONDING+POWERING_UP"
    boot(c, "n2", conn, 200.0, "drain", "HC: disk gone")
    assert state(c, "n2") == "IDLE+DRAIN"
    assert reason(c, "n2") == "HC: disk gone (unhealthy after reboot 1 of 2)"


async def test_no_reboot_without_a_reboot_program(autojump_clock) -> None:
    c = Cluster(make_config(), wall=wall)
    register(c, "n1", boot=100.0)
    got = reboot(c, "n1")
    assert not got.ok and got.errors == ("RebootProgram isn't defined",)
    assert state(c, "n1") == "IDLE"
