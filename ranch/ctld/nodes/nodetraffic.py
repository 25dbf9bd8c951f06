"""What nodes send the controller: registration, heartbeats (the hot path), launch
confirmations, health reports, shutdown notices, and a node's connection going away."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ranch.ctld import logs
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.nodes.hardware import HardwareShelf
from ranch.ctld.nodes.node import EXPECT_BEAT, NodeRecord, Pusher, pack_metrics
from ranch.ctld.nodes.validate import hardware_problem
from ranch.ctld.state.changelog import ChangeLog
from ranch.protocol import messages as m
from ranch.protocol.limits import MAX_REASON_CHARS
from ranch.protocol.versions import CURRENT as PROTOCOL_CURRENT
from ranch.statemachine import events
from ranch.statemachine.model import Base, Flag

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import Greeting, JobsForNodes

# membership's word on a registration: a refusal, or None to go on (ctld/nodes/membership.py)
Admit = Callable[[m.Register, str], "m.RegisterReply | None"]
# the DrainGuard's door for a health verdict (ctld/nodes/guards.py DrainGuard.health)
Health = Callable[[NodeRecord, str, str], tuple[bool, "str | None"]]


class NodeTraffic:
    """The node-facing requests: each updates the node's record, feeds the table, tells the job
    side what the node said, and runs what that set off (`after_change`)."""

    def __init__(self, book: Greeting, *, clock: Callable[[], float], wall: Callable[[], float],
                 epoch: int, changes: ChangeLog, eventlog: EventLog, hardware: HardwareShelf,
                 deadlines: Deadlines, arm: Callable[[NodeRecord], None], admit: Admit,
                 health: Health, jobs: JobsForNodes, after_change: Callable[[], None]) -> None:
        """`epoch`: the seat this controller holds (ctld/pair/controller.py; 0: none);
        `arm`: failure detection re-arms a node heard from."""
        self.book = book
        self.clock = clock
        self.wall = wall
        self.epoch = epoch
        self.changes = changes
        self.eventlog = eventlog
        self.hardware = hardware
        self.deadlines = deadlines
        self.arm = arm
        self.admit = admit
        self.drain_guard_health = health
        self.jobs = jobs
        self.after_change = after_change

    def register(self, msg: m.Register, conn: Pusher | None = None,
                 version: int = PROTOCOL_CURRENT) -> m.RegisterReply:
        """`version`: the peer's protocol version (3 and later can check health first)."""
        peer = conn.peer if conn else "-"
        refused = self.admit(msg, peer)  # unknown, dynamic or rejected nodes
        if refused is not None:
            return refused
        c = self.book
        node = c.nodes[msg.name]
        if msg.health is None and c.settings.health_check_program and version >= 3:
            # Like configless slurmd: a node checks its health before it registers, so it is
            # never offered as IDLE before its first verdict. Its state stays as it was.
            logs.event("health check required before registration", node=msg.name, peer=peer)
            return m.RegisterReply(
                accepted=False, health_check_first=True,
                reason="health check required before registration", settings=c.settings,
                config_files=c.node_files, config_hash=c.config.config_hash,
                node_state=node.complete)
        self._registered(node, msg, conn, version)
        if msg.health is not None:
            self.health(node, msg.health)
        kill, kill_runs = self.jobs.registered(node, msg)
        self.arm(node)
        c.mark_changed(node)
        self.after_change()
        return m.RegisterReply(
            accepted=True, settings=c.settings, config_files=c.node_files,
            config_hash=c.config.config_hash, node_state=node.complete, kill_job_ids=kill,
            kill_runs=kill_runs, epoch=self.epoch)

    def _registered(self, node: NodeRecord, msg: m.Register, conn: Pusher | None,
                    version: int) -> None:
        """The registration's facts onto the record, the connection taken up, the table fed."""
        peer = conn.peer if conn else "-"
        now, wall = self.clock(), self.wall()
        problem = hardware_problem(node.cfg, msg.hardware)
        rebooted = (
            node.boot_time is not None
            and node.last_registration is not None
            and msg.boot_time > node.boot_time + 1.0  # boot times jitter by a fraction
        )
        node.hardware = self.hardware.pack(msg.hardware)
        node.boot_time = msg.boot_time
        node.last_registration = wall
        node.slurmd_start_time = wall
        node.version = sys.intern(msg.rnoded_version)  # the same few over the cluster
        node.protocol = version
        node.seq = -1  # a restarted rnoded counts again from the start
        node.last_heard = now
        node.last_heartbeat = wall
        node.hb_stage = EXPECT_BEAT
        if node.conn is not None and node.conn is not conn:
            node.conn.close_soon()  # the node reconnected; the old connection is dead
        if conn is not None:
            if conn.node is not None and conn.node != msg.name:  # one connection, a second name
                self.disconnected(conn)
            conn.registered_as(msg.name)  # so that its close is a lookup, not a scan of every node
        node.conn = conn
        logs.event("node registered", node=msg.name, peer=peer, version=msg.rnoded_version,
                   valid=problem is None, rebooted=rebooted)
        self.eventlog.add("registered", msg.name, peer=peer, problem=problem)
        if problem:
            logs.event("registration invalid", logging.WARNING, node=msg.name, problem=problem)
        self.book.apply_event(
            node, events.Registered(now=wall, valid=problem is None, problem=problem,
                                    rebooted=rebooted)
        )

    def heartbeat(self, msg: m.Heartbeat, conn: Pusher | None = None) -> Any:
        """The hot path: O(1) per beat, no snapshot rebuild, no file write."""
        c = self.book
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
        node.last_heartbeat = self.wall()
        node.metrics = pack_metrics(msg.metrics)
        node.view_fresh = False
        self.changes.soft_changed()
        node.last_heard = self.clock()
        if node.hb_stage != EXPECT_BEAT:
            node.hb_stage = EXPECT_BEAT
            self.arm(node)
        elif (node.name, "hb") not in self.deadlines:
            self.arm(node)
        st = node.state
        if Flag.NO_RESPOND in st.flags or st.base in (Base.DOWN, Base.UNKNOWN):
            c.apply_event(node, events.HeartbeatReceived(now=node.last_heartbeat))
        if msg.health is not None and msg.health != node.health:
            self.health(node, msg.health)
        kill, kill_runs = self.jobs.heartbeat(node, msg)
        self.after_change()  # cheap when nothing is due: the hot path's common case
        return m.HeartbeatReply(node_state=node.complete, config_hash=c.config.config_hash,
                                kill_job_ids=kill, kill_runs=kill_runs)

    def job_started(self, msg: m.JobStarted, conn: Pusher | None = None) -> Any:
        node = self.book.nodes.get(conn.node) if conn is not None and conn.node else None
        if node is None or node.conn is not conn:
            return m.Error(code="unknown_node", message="JobStarted from a connection on which "
                           "no node registered")
        reply = self.jobs.started(node, msg)
        self.after_change()
        return reply

    def health(self, node: NodeRecord, report: m.HealthReport) -> None:
        node.health = report
        node.record = None
        node.view_fresh = False
        self.changes.shown_changed()
        verdict = report.verdict if report.verdict in ("ok", "drain", "fail") else "drain"
        # rnoded's runner already writes "HC: <line>"; prefix only what lacks it.
        text = report.message.strip()
        message = text if text.startswith("HC:") else f"HC: {text or 'health check failed'}"
        if len(message) > MAX_REASON_CHARS:  # a node's word, kept as a reason everywhere
            message = message[: MAX_REASON_CHARS - 1] + "…"
        if Flag.BOOT_CHECK in node.state.flags:
            # The verdict on a new boot (issue 33): the node was held for it. Not the
            # DrainGuard's to pause: the node is out of service already.
            node.unhealthy_boots = 0 if verdict == "ok" else node.unhealthy_boots + 1
            self.book.apply_event(node, events.BootCheck(
                now=self.wall(), verdict=verdict, message=message, count=node.unhealthy_boots))
            self.book.mark_changed(node)
            return
        _, err = self.drain_guard_health(node, verdict, message)  # the DrainGuard may pause it
        if err:
            logs.event("health result not applied", logging.DEBUG, node=node.name, error=err)

    def shutdown_notice(self, msg: m.ShutdownNotice, conn: Pusher | None = None) -> Any:
        node = self.book.nodes.get(msg.name)
        if node is None or node.conn is not conn:
            return m.Error(code="unknown_node",
                           message=f"node {msg.name} has not registered on this connection")
        node.conn = None
        if not msg.leaving:
            # An older rnoded's SIGTERM (a restart, an upgrade): the daemon stops, not the node;
            # its jobs run on and the node counts as not responding only if it stays away too
            # long.
            logs.event("rnoded stopping; node stays in service", node=msg.name)
            self.eventlog.add("left", node.name, peer=conn.peer if conn is not None else None)
            return m.Ack()
        logs.event("node leaving", node=msg.name, reason=msg.reason)
        self.book.apply_event(node, events.ShutdownNotice(now=self.wall()))
        self.after_change()
        return m.Ack()

    def disconnected(self, conn: Pusher) -> None:
        node = self.book.nodes.get(conn.node) if conn.node is not None else None
        if node is not None and node.conn is conn:  # not if the node has reconnected since
            node.conn = None
            self.eventlog.add("left", node.name, peer=conn.peer)
