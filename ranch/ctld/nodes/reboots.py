"""Reboots through the controller (issue 33): requests, their issue, RebootProgram, timeout."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ranch.ctld import logs
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.nodes import nodeupdates
from ranch.ctld.nodes.node import NodeRecord
from ranch.protocol import messages as m
from ranch.protocol.limits import MAX_REASON_CHARS, too_long
from ranch.statemachine import events
from ranch.statemachine.model import Flag
from ranch.statemachine.reboots import due

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import NodeBook

REBOOT_SINCE = 6  # the protocol version whose rnoded knows RebootNode
KEY = "reboot"  # deadline kind: (node name, "reboot")


class Reboots:
    """The one owner of what a reboot needs outside the node table: when to issue it, the
    message to rnoded, and its ResumeTimeout."""

    def __init__(self, book: NodeBook, *, clock: Callable[[], float], wall: Callable[[], float],
                 deadlines: Deadlines, push: Callable[[str, Any], bool],
                 after_change: Callable[[], None]) -> None:
        """`push`: a message to a node once what led to it is on disk; `after_change`: the
        programs and the scheduling pass a request sets off."""
        self.book = book
        self.clock = clock
        self.wall = wall
        self.deadlines = deadlines
        self.push = push
        self.after_request = after_change

    def request(self, msg: m.RebootNodes) -> m.UpdateResult:
        """`rcontrol reboot`: every named node gets the request (a node rebooting already, or
        powered down, is skipped as in Slurm); an idle one is issued at once."""
        if not self.book.config.reboot.program:  # scontrol refuses it so, before asking
            return m.UpdateResult(ok=False, errors=("RebootProgram isn't defined",))
        if msg.reason and len(msg.reason) > MAX_REASON_CHARS:
            return m.UpdateResult(ok=False, errors=(
                too_long("Reason", len(msg.reason), MAX_REASON_CHARS, "characters"),))
        nxt = (msg.next_state or "").strip().upper() or None
        if nxt is not None and nxt not in events.NEXT_STATES:
            return m.UpdateResult(ok=False, errors=(
                f"invalid nextstate {msg.next_state!r}; valid states: DOWN, RESUME",))
        names, errors = nodeupdates.expand(self.book.nodes, msg.node_names)
        if errors:
            return m.UpdateResult(ok=False, errors=tuple(errors))
        event = events.RebootRequest(now=self.wall(), asap=msg.asap, next_state=nxt,
                                     reason=(msg.reason or "").strip() or None, user=msg.user)
        changed, errs = [], []
        for name in names:
            ok, err = self.book.apply_event(self.book.nodes[name], event)
            if err:
                errs.append(err)
            elif ok:
                changed.append(name)
        self.after_request()
        logs.event("reboot requested", nodes=msg.node_names, asap=msg.asap, next_state=nxt or "-",
                   user=msg.user or "-", changed=len(changed))
        return m.UpdateResult(ok=not errs, changed=tuple(changed), errors=tuple(errs))

    def after_change(self, node: NodeRecord) -> None:
        """A node with a pending reboot changed: issue it once the node is idle (or DOWN)."""
        if Flag.REBOOT_REQUESTED in node.state.flags and due(node.state):
            self.book.apply_event(node, events.RebootIssued(now=self.wall()))

    def run_program(self, node: NodeRecord) -> None:
        """RunRebootProgram: tell rnoded, once the issue is on disk. A node that cannot be
        told (gone, or too old to know the message) is left to its ResumeTimeout."""
        conn = node.conn
        version = getattr(conn, "version", REBOOT_SINCE)
        if conn is None or version < REBOOT_SINCE:
            logs.event("reboot issued but the node cannot be told", logging.WARNING,
                       node=node.name, connected=conn is not None, version=version)
            return
        reason = node.state.reason.text if node.state.reason else ""
        self.push(node.name, m.RebootNode(reason=reason))
        logs.event("reboot issued", node=node.name)

    def schedule_timeout(self, node: NodeRecord, after: float | None = None) -> None:
        limit = self.book.config.power.resume_timeout
        self.deadlines.schedule((node.name, KEY), self.clock() + (
            limit if after is None else after))

    def fired(self, node: NodeRecord) -> None:
        if Flag.REBOOT_ISSUED in node.state.flags:
            self.book.apply_event(node, events.RebootTimeout(now=self.wall()))

    def rearm(self) -> None:
        """After a controller restart: a node still waiting for its new boot gets what is left
        of its ResumeTimeout, counted from when the reboot was issued (its reason's time)."""
        limit = self.book.config.power.resume_timeout
        wall = self.wall()
        for node in self.book.nodes.values():
            st = node.state
            if Flag.REBOOT_ISSUED not in st.flags:
                continue
            issued = st.reason.time if st.reason is not None else wall
            self.schedule_timeout(node, max(0.0, limit - max(0.0, wall - issued)))
