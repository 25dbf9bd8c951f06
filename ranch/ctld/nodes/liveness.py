"""Failure detection: every node's heartbeat deadlines, judged only on silence that is the node's.

A node is expected to talk unless it is FUTURE, powered down or booting, registered invalid or
already DOWN and not responding (Slurm pings none of these). Silence of 2 x HeartbeatInterval
feeds HeartbeatMissed (`*`), silence of SlurmdTimeout feeds ResponseTimeout (DOWN, jobs
requeued) - unless
- the controller stalled meanwhile (ctld/nodes/stalls.py): the stall is credited to every
  node, so a node's silence excludes the time the controller itself was not listening;
- the DownGuard is tripped (ctld/nodes/guards.py): too many nodes went silent at once for the
  silence to be theirs, so the node is held `*` (GuardHold) until an admin confirms or it is heard.

Deadlines are lazy: heard-from nodes are not rescheduled on every heartbeat; a deadline that
comes due recomputes the node's due time from `last_heard` and sleeps on if it moved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any

from ranch.ctld import logs
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.nodes.downguard import DownGuard
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.nodes.node import EXPECT_BEAT, EXPECT_TIMEOUT, SILENT, NodeRecord
from ranch.ctld.nodes.stalls import TICK_KEY, StallWatch
from ranch.protocol.errors import BUSY_RETRY
from ranch.statemachine import events
from ranch.statemachine.model import Base, Flag, NodeState

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import NodeBook

HELD = 3  # hb stage: the DownGuard holds the node; nothing more until it is heard from
# Flags under which a node is not expected to talk (Slurm does not ping these).
UNTIMED_FLAGS = frozenset({Flag.POWERED_DOWN, Flag.POWERING_UP, Flag.POWERING_DOWN,
                           Flag.INVALID_REG, Flag.REBOOT_ISSUED})
POWER_KEYS = ("suspend", "resume")


def timed(state: NodeState) -> bool:
    """Is a node in this state expected to talk?"""
    if state.base == Base.FUTURE or state.flags & UNTIMED_FLAGS:
        return False
    return not (state.base == Base.DOWN and Flag.NO_RESPOND in state.flags)


class Liveness:
    """The heartbeat monitor of one node registry, its stall watch and its DownGuard."""

    def __init__(self, book: NodeBook, *, clock: Callable[[], float], wall: Callable[[], float],
                 deadlines: Deadlines, eventlog: EventLog, guard: DownGuard,
                 real_clocks: bool) -> None:
        """`guard`: the DownGuard over this monitor's timeouts; `real_clocks`: the wall clock
        and BOOTTIME are compared with the monotonic clock (only in a real controller: under a
        test's MockClock and fake wall they would disagree at every tick)."""
        self.book = book
        self.clock = clock
        self.wall = wall
        self.deadlines = deadlines
        self.eventlog = eventlog
        self.stalls = StallWatch(deadlines, clock=clock, wall=wall, on_stall=self.credit,
                                 check_clocks=real_clocks)
        self.guard = guard
        self.restored_at: float | None = None  # wall time of the saved state, when restored
        self.configure()

    def restored(self, saved_at: float | None) -> None:
        """The saved state was written at `saved_at` (wall time): start() says how long the
        controller was away."""
        self.restored_at = saved_at

    def configure(self) -> None:
        t = self.book.config.timeouts
        self.stalls.configure(t.heartbeat_interval, t.message_timeout)

    # -- deadlines ---------------------------------------------------------------------------

    def due(self, node: NodeRecord) -> float | None:
        """When the node's next heartbeat stage is judged (trio time); None: not watched."""
        if not timed(node.state):
            return None
        t = self.book.config.timeouts
        if node.hb_stage == EXPECT_BEAT:
            return node.last_heard + 2 * t.heartbeat_interval
        if node.hb_stage == EXPECT_TIMEOUT and t.slurmd_timeout > 0:
            return node.last_heard + max(t.slurmd_timeout, 2 * t.heartbeat_interval)
        return None

    def arm(self, node: NodeRecord) -> None:
        if node.name in self.guard.held and (
                node.hb_stage != HELD or Flag.NO_RESPOND not in node.state.flags
                or not timed(node.state)):
            self.guard.released(node)  # heard from, downed by an admin...
        due = self.due(node)
        key = (node.name, "hb")
        if due is None:
            self.deadlines.cancel(key)
        else:
            self.deadlines.schedule(key, due)

    def start(self, grace: float = 0.0) -> None:
        """Arm every node that is expected to talk, and the stall watch.

        A node that never registers after the controller starts goes the way of a silent node:
        NO_RESPOND after two intervals, DOWN "Not responding" at SlurmdTimeout (as slurmctld
        downs nodes that never answer its pings). After a restart every node's silence counts
        from now: the controller's downtime is not theirs. After a takeover (`grace` > 0)
        from `grace` seconds on: the nodes are still finding the new controller (Nomad resets
        every node's heartbeat timer after a leader change for the same reason)."""
        now = self.clock()
        for node in self.book.nodes.values():
            node.last_heard = now + grace
            node.hb_stage = EXPECT_TIMEOUT if Flag.NO_RESPOND in node.state.flags else EXPECT_BEAT
            self.arm(node)
        self.stalls.arm()
        if self.restored_at:
            down = max(0.0, self.wall() - self.restored_at)
            logs.event("controller restarted; every node's silence counts from now",
                       down_seconds=round(down, 1), nodes=len(self.book.nodes),
                       grace=round(grace, 1))
            # a takeover (grace: the seat changed hands) is told apart in `rcontrol events` and
            # on the page's timeline; seconds: how long the state had no controller acting on it
            kind = "controller_takeover" if grace > 0 else "controller_restart"
            self.eventlog.add(kind, "-", seconds=round(down, 1))

    def rearm_all(self) -> None:
        """After the deadlines were cleared (reconfigure: new timeouts apply to every node)."""
        self.configure()
        for node in self.book.nodes.values():
            self.arm(node)
        self.stalls.arm()

    # -- the deadline task's callback --------------------------------------------------------

    def woke(self, keys: Iterable[Hashable], now: float) -> list[Any]:
        """The keys to act on now. A stall of the controller noticed here is credited to every
        node first; power timeouts that came due in it are put off by it."""
        stalled = self.stalls.notice(now)
        out = []
        for key in keys:
            if key == TICK_KEY:
                continue
            if stalled and key[1] in POWER_KEYS:  # type: ignore[index]
                self.deadlines.schedule(key, now + stalled)
                continue
            out.append(key)
        return out

    def fired(self, node: NodeRecord, now: float, wall: float) -> None:
        """A node's heartbeat deadline came: judge its silence."""
        due = self.due(node)
        if due is None:
            return
        if due > now:  # heard from (or credited a stall) since this entry was made: sleep on
            self.deadlines.schedule((node.name, "hb"), due)
            return
        if node.hb_stage == EXPECT_BEAT:
            node.hb_stage = EXPECT_TIMEOUT
            self.book.apply_event(node, events.HeartbeatMissed(now=wall))
        elif self.guard.holds(node, now):
            node.hb_stage = HELD
            self.guard.hold(node)
            self.book.apply_event(node, events.GuardHold(now=wall))
        else:
            node.hb_stage = SILENT
            self.guard.downed(node, now)
            self.book.apply_event(node, events.ResponseTimeout(now=wall))
        self.arm(node)

    def refused_for_capacity(self, name: str) -> bool:
        """Node `name` asked to register and rctld had no place for its connection
        (ctld/rpc/capacity.py): it is alive, and its silence until it gets a place is the
        controller's doing. It counts as heard BUSY_RETRY ahead, since it tries again within
        that, so neither NO_RESPOND nor DOWN comes of the controller's own limit. False for a
        name not configured."""
        node = self.book.nodes.get(name)
        if node is None:
            return False
        ahead = self.clock() + BUSY_RETRY
        node.last_heard = max(node.last_heard, ahead)
        return True

    # -- the controller's own stalls ---------------------------------------------------------

    def credit(self, seconds: float, cause: str) -> None:
        """A stall of `seconds` ended now: silence during it is not the nodes'. Each node's
        last contact moves forward by it, to now at most (one pass over the nodes, only when
        the controller stalled); power timeouts still pending move too."""
        if seconds > 0:
            now = self.clock()
            moved = 0
            deadlines = self.deadlines
            for node in self.book.nodes.values():
                if node.last_heard < now:
                    node.last_heard = min(now, node.last_heard + seconds)
                    moved += 1
                for kind in POWER_KEYS:
                    when = deadlines.when((node.name, kind))
                    if when is not None:
                        deadlines.schedule((node.name, kind), when + seconds)
            logs.event("controller stalled; nodes are not judged on the silence it caused",
                       logging.WARNING, seconds=round(seconds, 3), cause=cause,
                       nodes_credited=moved)
        self.eventlog.add("controller_stall", "-", seconds=round(seconds, 3) or None,
                            cause=cause)
