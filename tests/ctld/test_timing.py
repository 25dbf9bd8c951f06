"""Failure detection and ReturnToService, driven in-process under trio's MockClock."""

from __future__ import annotations

import pytest
import trio

from tests.ctld.harness import Harness as Cluster

from .helpers import beat, make_config, register, state, wall


async def run_monitor(cluster: Cluster, nursery: trio.Nursery) -> None:
    cluster.start()
    nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)


async def test_no_respond_after_two_intervals_then_down(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        await run_monitor(cluster, nursery)
        register(cluster, "n1")
        assert state(cluster, "n1") == "IDLE"
        await trio.sleep(19.9)
        assert state(cluster, "n1") == "IDLE"
        await trio.sleep(0.2)  # 2 x HeartbeatInterval of silence
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING"
        await trio.sleep(39.8)
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING"
        await trio.sleep(0.2)  # SlurmdTimeout of silence
        assert state(cluster, "n1") == "DOWN+NOT_RESPONDING"
        assert cluster.nodes["n1"].state.reason.text == "Not responding"
        nursery.cancel_scope.cancel()


async def test_heartbeats_keep_a_node_up_and_clear_not_responding(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        await run_monitor(cluster, nursery)
        _, conn = register(cluster, "n1")
        for seq in range(1, 30):
            await trio.sleep(10)
            beat(cluster, "n1", conn, seq)
            assert state(cluster, "n1") == "IDLE"
        await trio.sleep(25)
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING"
        beat(cluster, "n1", conn, 100)
        assert state(cluster, "n1") == "IDLE"
        # A fresh allowance: missed again only after another 2 intervals.
        await trio.sleep(19)
        assert state(cluster, "n1") == "IDLE"
        await trio.sleep(2)
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING"
        nursery.cancel_scope.cancel()


async def test_old_sequence_numbers_are_ignored(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        await run_monitor(cluster, nursery)
        _, conn = register(cluster, "n1")
        beat(cluster, "n1", conn, 5)
        await trio.sleep(21)
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING"
        # A burst of queued, older beats says nothing about now: the node stays `*`.
        for seq in (1, 2, 3, 4, 5):
            reply = beat(cluster, "n1", conn, seq)
            assert reply.node_state == "IDLE+NOT_RESPONDING"
        assert state(cluster, "n1") == "IDLE+NOT_RESPONDING"
        beat(cluster, "n1", conn, 6)
        assert state(cluster, "n1") == "IDLE"
        nursery.cancel_scope.cancel()


async def test_heartbeat_without_registration_is_refused(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    _, conn = register(cluster, "n1")
    from .helpers import FakeConn

    reply = beat(cluster, "n1", FakeConn(), 1)
    assert reply.code == "unknown_node"
    assert beat(cluster, "n1", conn, 1).node_state == "IDLE"


async def test_never_registered_nodes_stay_unknown_not_responding(autojump_clock) -> None:
    """As in Slurm (ping_nodes downs only a node that answered once): `unk*`, never DOWN."""
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        await run_monitor(cluster, nursery)
        assert state(cluster, "n2") == "UNKNOWN"
        await trio.sleep(21)
        assert state(cluster, "n2") == "UNKNOWN+NOT_RESPONDING"
        await trio.sleep(400)
        assert state(cluster, "n2") == "UNKNOWN+NOT_RESPONDING"
        register(cluster, "n2")
        assert state(cluster, "n2") == "IDLE"
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("rts", "after_timeout", "after_admin_down"),
    [(0, "DOWN", "DOWN"), (1, "IDLE", "DOWN"), (2, "IDLE", "IDLE")],
)
async def test_return_to_service(autojump_clock, rts, after_timeout, after_admin_down) -> None:
    from ranch.protocol import messages as m

    cluster = Cluster(make_config(rts=rts), wall=wall)
    async with trio.open_nursery() as nursery:
        await run_monitor(cluster, nursery)
        register(cluster, "n1")
        await trio.sleep(61)
        assert state(cluster, "n1") == "DOWN+NOT_RESPONDING"
        register(cluster, "n1")  # rnoded is back (same boot)
        assert state(cluster, "n1") == after_timeout
        # An admin's DOWN only returns with ReturnToService=2.
        register(cluster, "n2")
        result = cluster.update_nodes(m.UpdateNodes("n2", "DOWN", "maintenance", "alice"))
        assert result.ok, result.errors
        register(cluster, "n2")
        assert state(cluster, "n2") == after_admin_down
        nursery.cancel_scope.cancel()


async def test_reboot_is_noticed(autojump_clock) -> None:
    cluster = Cluster(make_config(rts=1), wall=wall)
    register(cluster, "n1", boot=1000.0)
    register(cluster, "n1", boot=5000.0)
    assert state(cluster, "n1") == "DOWN"
    assert cluster.nodes["n1"].state.reason.text == "Node unexpectedly rebooted"


async def test_leaving_notice_marks_down(autojump_clock) -> None:
    from ranch.protocol import messages as m

    cluster = Cluster(make_config(rts=1), wall=wall)
    _, conn = register(cluster, "n1")
    notice = m.ShutdownNotice("n1", "retired", leaving=True)
    assert isinstance(cluster.shutdown_notice(notice, conn), m.Ack)
    assert state(cluster, "n1").startswith("DOWN")
    assert cluster.nodes["n1"].state.reason.text == "rnoded shut down"
    register(cluster, "n1")
    assert state(cluster, "n1") == "IDLE"


async def test_older_rnoded_stop_notice_keeps_the_node(autojump_clock) -> None:
    """A version-5 rnoded says ShutdownNotice on every SIGTERM: a restart, not a node leaving."""
    from ranch.protocol import messages as m

    cluster = Cluster(make_config(rts=0), wall=wall)
    _, conn = register(cluster, "n1")
    assert isinstance(cluster.shutdown_notice(m.ShutdownNotice("n1"), conn), m.Ack)
    assert state(cluster, "n1") == "IDLE"
    assert cluster.nodes["n1"].conn is None
    register(cluster, "n1")
    assert state(cluster, "n1") == "IDLE"


async def test_down_node_heard_again_is_asked_to_register(autojump_clock) -> None:
    cluster = Cluster(make_config(rts=1), wall=wall)
    async with trio.open_nursery() as nursery:
        await run_monitor(cluster, nursery)
        _, conn = register(cluster, "n1")
        await trio.sleep(61)  # hung past SlurmdTimeout, connection still open
        assert state(cluster, "n1") == "DOWN+NOT_RESPONDING"
        beat(cluster, "n1", conn, 1)
        assert conn.closed  # rnoded reconnects and registers; ReturnToService decides
        register(cluster, "n1")
        assert state(cluster, "n1") == "IDLE"
        nursery.cancel_scope.cancel()
