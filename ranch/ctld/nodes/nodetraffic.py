"""What nodes send the controller: registration, heartbeats (the hot path), launch
confirmations, health reports, shutdown notices, and a node's connection going away."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ranch.ctld import logs
from ranch.ctld.nodes import membership
from ranch.ctld.nodes.node import EXPECT_BEAT, NodeRecord, Pusher, pack_metrics
from ranch.ctld.validate import hardware_problem
from ranch.protocol import messages as m
from ranch.protocol.limits import MAX_REASON_CHARS
from ranch.protocol.versions import CURRENT as PROTOCOL_CURRENT
from ranch.statemachine import events
from ranch.statemachine.model import Base, Flag

if TYPE_CHECKING:
    from ranch.ctld.ports import Registry


def register(c: Registry, msg: m.Register, conn: Pusher | None = None,
             version: int = PROTOCOL_CURRENT) -> m.RegisterReply:
    """`version`: the peer's protocol version (3 and later can check health first)."""
    peer = conn.peer if conn else "-"
    refused = membership.admit(c, msg, peer)  # unknown, dynamic or rejected nodes
    if refused is not None:
        return refused
    node = c.nodes[msg.name]
    if msg.health is None and c.settings.health_check_program and version >= 3:
        # Like configless slurmd: a node checks its health before it registers, so it is
        # never offered as IDLE before its first verdict. Its state stays as it was.
        logs.event("health check required before registration", node=msg.name, peer=peer)
        return m.RegisterReply(
            accepted=False,
            health_check_first=True,
            reason="health check required before registration",
            settings=c.settings,
            config_files=c.node_files,
            config_hash=c.config.config_hash,
            node_state=node.complete,
        )
    now, wall = c.clock(), c.wall()
    problem = hardware_problem(node.cfg, msg.hardware)
    rebooted = (
        node.boot_time is not None
        and node.last_registration is not None
        and msg.boot_time > node.boot_time + 1.0  # boot times jitter by a fraction
    )
    node.hardware = c.hardware.pack(msg.hardware)
    node.boot_time = msg.boot_time
    node.last_registration = wall
    node.slurmd_start_time = wall
    node.version = msg.rnoded_version
    node.protocol = version
    node.seq = -1  # a restarted rnoded counts again from the start
    node.last_heard = now
    node.last_heartbeat = wall
    node.hb_stage = EXPECT_BEAT
    if node.conn is not None and node.conn is not conn:
        node.conn.close_soon()  # the node reconnected; the old connection is dead
    if conn is not None:
        if conn.node is not None and conn.node != msg.name:  # one connection, a second name
            disconnected(c, conn)
        conn.registered_as(msg.name)  # so that its close is a lookup, not a scan of every node
    node.conn = conn
    logs.event("node registered", node=msg.name, peer=peer, version=msg.rnoded_version,
               valid=problem is None, rebooted=rebooted)
    c.eventlog.add("registered", msg.name, peer=peer, problem=problem)
    if problem:
        logs.event("registration invalid", logging.WARNING, node=msg.name, problem=problem)
    c.apply_event(
        node, events.Registered(now=wall, valid=problem is None, problem=problem,
                                rebooted=rebooted)
    )
    if msg.health is not None:
        health(c, node, msg.health)
    kill, kill_runs = c.jobs.registered(node, msg)
    c.liveness.arm(node)
    c.mark_changed(node)
    c.flush_programs()
    return m.RegisterReply(
        accepted=True,
        settings=c.settings,
        config_files=c.node_files,
        config_hash=c.config.config_hash,
        node_state=node.complete,
        kill_job_ids=kill,
        kill_runs=kill_runs,
        epoch=c.epoch,
    )

def heartbeat(c: Registry, msg: m.Heartbeat, conn: Pusher | None = None) -> Any:
    """The hot path: O(1) per beat, no snapshot rebuild, no file write."""
    node = c.nodes.get(msg.name)
    if node is None or node.conn is not conn:
        return m.Error(
            code="unknown_node",
            message=f"node {msg.name} has not registered on this connection; register first",
            field="name",
        )
    if msg.seq <= node.seq:  # an old beat from a burst: says nothing new
        return m.HeartbeatReply(node_state=node.complete, config_hash=c.config.config_hash)
    node.seq = msg.seq
    node.last_heartbeat = c.wall()
    node.metrics = pack_metrics(msg.metrics)
    node.view_fresh = False
    c.changes.soft_changed()
    node.last_heard = c.clock()
    if node.hb_stage != EXPECT_BEAT:
        node.hb_stage = EXPECT_BEAT
        c.liveness.arm(node)
    elif (node.name, "hb") not in c.deadlines:
        c.liveness.arm(node)
    st = node.state
    if Flag.NO_RESPOND in st.flags or st.base in (Base.DOWN, Base.UNKNOWN):
        c.apply_event(node, events.HeartbeatReceived(now=node.last_heartbeat))
    if msg.health is not None and msg.health != node.health:
        health(c, node, msg.health)
    kill, kill_runs = c.jobs.heartbeat(node, msg)
    if c.power.pending or c.jobs.store.kicked:
        c.flush_programs()
    return m.HeartbeatReply(node_state=node.complete, config_hash=c.config.config_hash,
                            kill_job_ids=kill, kill_runs=kill_runs)

def job_started(c: Registry, msg: m.JobStarted, conn: Pusher | None = None) -> Any:
    node = c.nodes.get(conn.node) if conn is not None and conn.node else None
    if node is None or node.conn is not conn:
        return m.Error(code="unknown_node", message="JobStarted from a connection on which "
                       "no node registered")
    reply = c.jobs.started(node, msg)
    c.flush_programs()
    return reply

def health(c: Registry, node: NodeRecord, report: m.HealthReport) -> None:
    node.health = report
    node.record = None
    node.view_fresh = False
    c.changes.shown_changed()
    verdict = report.verdict if report.verdict in ("ok", "drain", "fail") else "drain"
    # rnoded's runner already writes "HC: <line>"; prefix only what lacks it.
    text = report.message.strip()
    message = text if text.startswith("HC:") else f"HC: {text or 'health check failed'}"
    if len(message) > MAX_REASON_CHARS:  # a node's word, kept as a reason everywhere
        message = message[: MAX_REASON_CHARS - 1] + "…"
    if Flag.BOOT_CHECK in node.state.flags:
        # The verdict on a new boot (issue 33): the node was held for it. Not the DrainGuard's
        # to pause: the node is out of service already.
        node.unhealthy_boots = 0 if verdict == "ok" else node.unhealthy_boots + 1
        c.apply_event(node, events.BootCheck(now=c.wall(), verdict=verdict, message=message,
                                             count=node.unhealthy_boots))
        c.mark_changed(node)
        return
    _, err = c.drain_guard.health(node, verdict, message)  # the DrainGuard may pause it
    if err:
        logs.event("health result not applied", logging.DEBUG, node=node.name, error=err)

def shutdown_notice(c: Registry, msg: m.ShutdownNotice, conn: Pusher | None = None) -> Any:
    node = c.nodes.get(msg.name)
    if node is None or node.conn is not conn:
        return m.Error(code="unknown_node",
                       message=f"node {msg.name} has not registered on this connection")
    node.conn = None
    if not msg.leaving:
        # An older rnoded's SIGTERM (a restart, an upgrade): the daemon stops, not the node; its
        # jobs run on and the node counts as not responding only if it stays away too long.
        logs.event("rnoded stopping; node stays in service", node=msg.name)
        c.eventlog.add("left", node.name, peer=conn.peer if conn is not None else None)
        return m.Ack()
    logs.event("node leaving", node=msg.name, reason=msg.reason)
    c.apply_event(node, events.ShutdownNotice(now=c.wall()))
    c.flush_programs()
    return m.Ack()


def disconnected(c: Registry, conn: Pusher) -> None:
    node = c.nodes.get(conn.node) if conn.node is not None else None
    if node is not None and node.conn is conn:  # not if the node has reconnected since
        node.conn = None
        c.eventlog.add("left", node.name, peer=conn.peer)
