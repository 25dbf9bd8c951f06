"""The breakers over the controller's mass decisions, and `rcontrol show guards|confirm|reset`.

DownGuard: when at least DownGuardPercent % of the nodes in service went silent within
DownGuardWindow (default: half of them within SlurmdTimeout; only with DownGuardMinNodes or more
nodes in service and at least two silent), the silence is more likely the controller's or the
network's than theirs (kubernetes#28832: a controller-side fault that marked every node down
and evicted everything). Such nodes stay NOT_RESPONDING (`*`) with the reason
"Not responding, held by DownGuard": not DOWN, their jobs not requeued. While it is tripped every
node that reaches SlurmdTimeout is held. It clears itself once every held node was heard from
again; `rcontrol confirm down [NodeName=...]` sets held nodes DOWN as the timeout would have (jobs
requeued); `rcontrol reset guard down` re-arms it and gives held nodes one more SlurmdTimeout.

DrainGuard (NVIDIA NVSentinel's circuit breaker): health checks may drain at most
DrainGuardPercent % of the nodes in service within DrainGuardWindow (only with
DrainGuardMinNodes or more in service: FUTURE, never-registered and powered-down nodes are not).
The drain that would go beyond trips it, and from then on every new health-check drain or fail
is paused: the verdict shows as the node's reason with "[drain paused by DrainGuard]", the node
stays in service. It stays tripped until an admin acts: `rcontrol confirm drain [NodeName=...]`
applies paused drains, `rcontrol reset guard drain` closes it (paused nodes are judged again at
their next check).

Every trip, clear, confirm and reset is logged, put in the event log and shown by /metrics.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.nodes import nodeupdates
from ranch.ctld.nodes.downguard import NOT_IN_SERVICE, SCAN_REUSE, when_text
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.nodes.node import NodeRecord
from ranch.ctld.nodes.stalls import StallWatch
from ranch.protocol import messages as m
from ranch.statemachine import events
from ranch.statemachine.model import UP_BASES, Base, Flag

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import Guard, NodeBook

_OUT = frozenset({Flag.DRAIN, Flag.FAIL})
GUARDS = ("down", "drain")


class DrainGuard:
    """Pauses automatic (health-check) drains once too many happened within the window."""

    name = "drain"

    def __init__(self, book: NodeBook, *, clock: Callable[[], float], wall: Callable[[], float],
                 eventlog: EventLog) -> None:
        self.book = book
        self.clock = clock
        self.wall = wall
        self.eventlog = eventlog
        self.tripped_at: float | None = None
        self.detail = ""
        self.paused: dict[str, tuple[str, str, float]] = {}  # node -> (verdict, message, wall)
        self._drains: deque[tuple[float, str]] = deque()  # health drains applied (trio time)
        self._scan: tuple[float, int] | None = None  # (trio time, nodes in service)

    @property
    def tripped(self) -> bool:
        return self.tripped_at is not None

    def health(self, node: NodeRecord, verdict: str, message: str) -> tuple[bool, str | None]:
        """Feed a health verdict: applied, or (a new drain past the limit) paused."""
        c = self.book
        g = c.config.guards
        wall = self.wall()
        st = node.state
        new_drain = (verdict != "ok" and g.drain_percent > 0 and st.flags.isdisjoint(_OUT)
                     and st.base is not Base.DOWN and st.base is not Base.FUTURE
                     and st.flags.isdisjoint(NOT_IN_SERVICE - {Flag.PENDING}))
        if not new_drain:
            if verdict == "ok":
                self.paused.pop(node.name, None)
            return c.apply_event(node, events.HealthResult(now=wall, verdict=verdict,
                                                           message=message))
        now = self.clock()
        drains = self._drains
        while drains and drains[0][0] < now - g.drain_window:
            drains.popleft()
        total = self._in_service(now)
        allowed = max(1, g.drain_percent * total // 100)
        if not self.tripped and total >= g.drain_min_nodes and len(drains) + 1 > allowed:
            self._trip(len(drains), total)
        if self.tripped:
            if node.name not in self.paused:
                logs.event("health-check drain paused by the DrainGuard", logging.WARNING,
                           node=node.name, verdict=verdict, message=message)
            self.paused[node.name] = (verdict, message, wall)
            return c.apply_event(node, events.DrainPaused(now=wall, verdict=verdict,
                                                          message=message))
        changed, err = c.apply_event(node, events.HealthResult(now=wall, verdict=verdict,
                                                               message=message))
        if changed and not node.state.flags.isdisjoint(_OUT):
            drains.append((now, node.name))
            self._scan = None
        return changed, err

    def _in_service(self, now: float) -> int:
        """The guard's base: nodes in service (up, registered, powered on, admitted), with those
        the checks drained within the window; FUTURE, never-registered, powered-down, DOWN and
        otherwise drained nodes are not (issue 33: 2 failing checks of 3 nodes in service, next
        to 3 FUTURE nodes, must both drain). One pass, reused for SCAN_REUSE seconds."""
        scan = self._scan
        if scan is None or now - scan[0] >= SCAN_REUSE:
            drained = {name for _, name in self._drains}
            count = 0
            for n in self.book.nodes.values():
                st = n.state
                if st.base in UP_BASES and st.flags.isdisjoint(NOT_IN_SERVICE) and (
                        st.flags.isdisjoint(_OUT) or n.name in drained):
                    count += 1
            scan = self._scan = (now, count)
        return scan[1]

    def _trip(self, drained: int, total: int) -> None:
        g = self.book.config.guards
        self.tripped_at = self.wall()
        self.detail = (f"health checks drained {drained} of {total} nodes in service within "
                       f"{g.drain_window} s (limit {g.drain_percent}%)")
        logs.event("DrainGuard tripped: further health-check drains are paused until an admin "
                   "acts; `rcontrol confirm drain` applies them, `rcontrol reset guard drain` "
                   "closes the guard", logging.CRITICAL, drained=drained, nodes=total,
                   window=g.drain_window, percent=g.drain_percent)
        self.eventlog.add("guard_tripped", "-", guard="DrainGuard", detail=self.detail)

    def confirm(self, names: list[str], user: str) -> tuple[list[str], list[str]]:
        """Apply paused drains now (they do not count toward the guard)."""
        if not self.paused:
            return [], ["the DrainGuard paused no drain; nothing to confirm"]
        wall = self.wall()
        changed: list[str] = []
        errors: list[str] = []
        for name in names or list(self.paused):
            node = self.book.nodes.get(name)
            if name not in self.paused or node is None:
                errors.append(f"node {name} has no drain paused by the DrainGuard")
                continue
            verdict, message, _ = self.paused.pop(name)
            _, err = self.book.apply_event(node, events.HealthResult(now=wall, verdict=verdict,
                                                                  message=message))
            if err:
                errors.append(err)
            else:
                changed.append(name)
        if changed:
            logs.event("DrainGuard: paused drains confirmed", logging.WARNING,
                       nodes=hostlist.fold(changed), user=user or "-")
            self.eventlog.add("guard_confirmed", "-", guard="DrainGuard",
                                nodes=hostlist.fold(changed), user=user or None)
        return changed, errors

    def reset(self, user: str) -> list[str]:
        """Close the guard: automatic drains resume; paused nodes are judged at their next
        check (their paused reason goes)."""
        names = list(self.paused)
        self.paused.clear()
        wall = self.wall()
        for name in names:
            node = self.book.nodes.get(name)
            if node is not None:
                self.book.apply_event(node, events.GuardRelease(now=wall, user=user))
        was = self.tripped
        self.tripped_at = None
        self.detail = ""
        self._drains.clear()
        why = f"reset by an admin; {len(names)} paused drain(s) dropped until their next check"
        logs.event("DrainGuard cleared" if was else "DrainGuard reset", logging.WARNING,
                   why=why, user=user or "-")
        self.eventlog.add("guard_cleared", "-", guard="DrainGuard", detail=why,
                            user=user or None)
        return names

    def status(self) -> dict[str, Any]:
        g = self.book.config.guards
        paused = [n for n in self.paused if n in self.book.nodes]
        now = self.clock()
        recent = sum(1 for when, _ in self._drains if when >= now - g.drain_window)
        state = "TRIPPED" if self.tripped else ("OFF" if g.drain_percent <= 0 else "ARMED")
        return {"guard": "DrainGuard", "state": state, "since": when_text(self.tripped_at),
                "percent": g.drain_percent, "window": g.drain_window,
                "min_nodes": g.drain_min_nodes, "detail": self.detail,
                "nodes": hostlist.fold(paused), "count": len(paused), "drains_in_window": recent}


@attrs.frozen
class GuardDesk:
    """`rcontrol show guards`, `confirm down|drain [NodeName=...]`, `reset guard [down|drain]`:
    the two breakers, the controller's own stalls, the nodes named, and the programs and
    scheduling pass a confirm may set off (`after_change`)."""

    down: Guard
    drain: Guard
    stalls: StallWatch
    nodes: Mapping[str, NodeRecord]
    after_change: Callable[[], None]

    def status(self) -> m.GuardStatus:
        return m.GuardStatus(ok=True, guards=(self.down.status(), self.drain.status()),
                             controller=self.stalls.status())

    def handle(self, msg: m.GuardRequest) -> m.GuardStatus:
        action = msg.action.lower()
        if action == "show":
            return self.status()
        which = msg.guard.lower()
        guards: dict[str, Guard] = {"down": self.down, "drain": self.drain}
        if action == "confirm":
            guard = guards.get(which)
            if guard is None:
                return _refused(f"guard: {msg.guard!r} is not one of down, drain "
                                "(rcontrol confirm down|drain [NodeName=HOSTLIST])")
            names: list[str] = []
            if msg.node_names.strip():
                names, errors = nodeupdates.expand(self.nodes, msg.node_names)
                if errors:
                    return _refused(*errors)
            changed, errors = guard.confirm(names, msg.user)
            self.after_change()
            return _with(self.status(), changed, errors)
        if action == "reset":
            if which and which not in guards:
                return _refused(f"guard: {msg.guard!r} is not one of down, drain "
                                "(rcontrol reset guard [down|drain])")
            released: list[str] = []
            for key in ([which] if which else list(GUARDS)):
                released += guards[key].reset(msg.user)
            self.after_change()
            return _with(self.status(), released, [])
        return _refused(f"action: {msg.action!r} is not one of show, confirm, reset")


def _refused(*errors: str) -> m.GuardStatus:
    return m.GuardStatus(ok=False, errors=tuple(errors))


def _with(st: m.GuardStatus, changed: list[str], errors: list[str]) -> m.GuardStatus:
    return m.GuardStatus(ok=not errors, guards=st.guards, controller=st.controller,
                         changed=tuple(changed), errors=tuple(errors))
