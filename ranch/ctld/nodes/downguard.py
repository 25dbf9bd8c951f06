"""DownGuard: holds nodes NOT_RESPONDING instead of DOWN when too many go silent at once (the
breaker over failure detection's mass decisions; ctld/nodes/guards.py has the why and the
DrainGuard, `rcontrol show guards|confirm|reset` drive both)."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.nodes.node import EXPECT_BEAT, EXPECT_TIMEOUT, SILENT, NodeRecord
from ranch.statemachine import events
from ranch.statemachine.model import UP_BASES, Flag

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import NodeBook

SCAN_REUSE = 1.0  # seconds a count of the nodes in service serves further timeouts
NOT_IN_SERVICE = frozenset({Flag.PENDING, Flag.REJECTED, Flag.POWERED_DOWN, Flag.POWERING_UP,
                            Flag.POWERING_DOWN, Flag.INVALID_REG, Flag.REBOOT_ISSUED})


def when_text(wall: float | None) -> str | None:
    return None if wall is None else f"{wall:.3f}"


class DownGuard:
    """Holds nodes NOT_RESPONDING instead of DOWN when too many go silent at once."""

    name = "down"

    def __init__(self, book: NodeBook, *, clock: Callable[[], float], wall: Callable[[], float],
                 eventlog: EventLog, arm: Callable[[NodeRecord], None]) -> None:
        """`arm`: failure detection re-arms a node an admin confirmed or released."""
        self.book = book
        self.clock = clock
        self.wall = wall
        self.eventlog = eventlog
        self.arm = arm
        self.tripped_at: float | None = None  # wall clock
        self.detail = ""
        self.held: dict[str, float] = {}  # node -> wall time it was held
        self._downs: deque[tuple[float, str]] = deque()  # DOWN by SlurmdTimeout (trio time)
        self._scan: tuple[float, int, int] | None = None  # (trio time, in service, silent)

    @property
    def tripped(self) -> bool:
        return self.tripped_at is not None

    def window(self) -> int:
        return self.book.config.guards.down_window or self.book.config.timeouts.slurmd_timeout

    def holds(self, node: NodeRecord, now: float) -> bool:
        """May SlurmdTimeout set this node DOWN now (False), or is it held (True; trips the
        guard when this silence makes too many)?"""
        g = self.book.config.guards
        st = node.state
        if g.down_percent <= 0 or st.base not in UP_BASES:
            return False  # never-registered (UNKNOWN) nodes were not in service
        if self.tripped:
            return True
        in_service, silent = self._count(now)
        if (in_service < g.down_min_nodes or silent < 2
                or silent * 100 < g.down_percent * in_service):
            return False
        self._trip(in_service, silent)
        return True

    def _count(self, now: float) -> tuple[int, int]:
        """(nodes in service at the window's start, those of them silent now): one pass over
        the nodes, reused for SCAN_REUSE seconds (a mass failure brings many timeouts at once)."""
        t = self.book.config.timeouts
        window = self.window()
        downs = self._downs
        while downs and downs[0][0] < now - window:
            downs.popleft()
        scan = self._scan
        if scan is None or now - scan[0] >= SCAN_REUSE:
            # A node judged now went silent SlurmdTimeout ago; count the nodes whose silence
            # began within the window before that, or that were heard since.
            since = now - max(t.slurmd_timeout, 2 * t.heartbeat_interval) - window
            # Silent: it missed a beat already, or is half an interval late for its next one
            # (with short timeouts a node that stopped a moment after this one may not have
            # missed a beat yet when this one's SlurmdTimeout comes).
            late = now - 1.5 * t.heartbeat_interval
            in_service = silent = 0
            for n in self.book.nodes.values():
                st = n.state
                if (st.base not in UP_BASES or n.last_heard < since
                        or not st.flags.isdisjoint(NOT_IN_SERVICE)):
                    continue
                in_service += 1
                if n.hb_stage != EXPECT_BEAT or n.last_heard < late:
                    silent += 1
            scan = self._scan = (now, in_service, silent)
        before = sum(1 for when, _ in downs if when < scan[0])  # not in the scan any more
        return scan[1] + before, scan[2] + before

    def _trip(self, in_service: int, silent: int) -> None:
        window = self.window()
        self.tripped_at = self.wall()
        self.detail = (f"{silent} of {in_service} nodes in service went silent within "
                       f"{window} s")
        logs.event("DownGuard tripped: holding silent nodes NOT_RESPONDING instead of DOWN, "
                   "no job is requeued; `rcontrol confirm down` sets them DOWN, "
                   "`rcontrol reset guard down` re-arms the guard", logging.CRITICAL,
                   silent=silent, in_service=in_service, window=window)
        self.eventlog.add("guard_tripped", "-", guard="DownGuard", detail=self.detail)

    def hold(self, node: NodeRecord) -> None:
        self.held[node.name] = self.wall()

    def downed(self, node: NodeRecord, now: float) -> None:
        """SlurmdTimeout set this node DOWN: it counts in the window."""
        if node.state.base in UP_BASES:
            self._downs.append((now, node.name))
            self._scan = None

    def released(self, node: NodeRecord) -> None:
        """A held node was heard from (or an admin changed it): no longer held."""
        self.held.pop(node.name, None)
        if not self.held and self.tripped:
            self._clear("every held node was heard from again")

    def _clear(self, why: str, user: str | None = None) -> None:
        self.tripped_at = None
        self.detail = ""
        self._downs.clear()
        self._scan = None
        logs.event("DownGuard cleared", logging.WARNING, why=why, user=user)
        self.eventlog.add("guard_cleared", "-", guard="DownGuard", detail=why, user=user)

    def confirm(self, names: list[str], user: str) -> tuple[list[str], list[str]]:
        """Held nodes DOWN "Not responding", their jobs requeued, as the timeout would have."""
        if not self.held:
            return [], ["the DownGuard holds no node; nothing to confirm"]
        wall = self.wall()
        changed: list[str] = []
        errors: list[str] = []
        for name in names or list(self.held):
            node = self.book.nodes.get(name)
            if name not in self.held or node is None:
                errors.append(f"node {name} is not held by the DownGuard")
                continue
            del self.held[name]
            node.hb_stage = SILENT
            _, err = self.book.apply_event(node, events.ResponseTimeout(now=wall, user=user))
            self.arm(node)
            if err:
                errors.append(err)
            else:
                changed.append(name)
        if changed:
            logs.event("DownGuard: held nodes confirmed DOWN", logging.WARNING,
                       nodes=hostlist.fold(changed), user=user or "-")
            self.eventlog.add("guard_confirmed", "-", guard="DownGuard",
                                nodes=hostlist.fold(changed), user=user or None)
        if not self.held and self.tripped:
            self._clear("every held node was confirmed DOWN", user or None)
        return changed, errors

    def reset(self, user: str) -> list[str]:
        """Re-arm: held nodes lose the hold and get one more SlurmdTimeout to be heard."""
        names = list(self.held)
        self.held.clear()
        now, wall = self.clock(), self.wall()
        for name in names:
            node = self.book.nodes.get(name)
            if node is None:
                continue
            self.book.apply_event(node, events.GuardRelease(now=wall, user=user))
            node.hb_stage = EXPECT_TIMEOUT
            node.last_heard = now
            self.arm(node)
        self.tripped_at = wall  # so that _clear logs and records the reset
        self._clear(f"reset by an admin; {len(names)} held node(s) get one more SlurmdTimeout",
                    user or None)
        return names

    def status(self) -> dict[str, Any]:
        g = self.book.config.guards
        held = [n for n in self.held if n in self.book.nodes]
        return {"guard": "DownGuard", "state": self._state(g.down_percent),
                "since": when_text(self.tripped_at), "percent": g.down_percent,
                "window": self.window(), "min_nodes": g.down_min_nodes, "detail": self.detail,
                "nodes": hostlist.fold(held), "count": len(held)}

    def _state(self, percent: int) -> str:
        return "TRIPPED" if self.tripped else ("OFF" if percent <= 0 else "ARMED")
