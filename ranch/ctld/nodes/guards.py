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
from typing import TYPE_CHECKING, Any

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.nodes.node import EXPECT_BEAT, EXPECT_TIMEOUT, SILENT, NodeRecord
from ranch.protocol import messages as m
from ranch.statemachine import events
from ranch.statemachine.model import UP_BASES, Base, Flag

if TYPE_CHECKING:
    from ranch.ctld.ports import Guard, Registry

SCAN_REUSE = 1.0  # seconds a count of the nodes in service serves further timeouts
_OUT = frozenset({Flag.DRAIN, Flag.FAIL})
_NOT_IN_SERVICE = frozenset({Flag.PENDING, Flag.REJECTED, Flag.POWERED_DOWN, Flag.POWERING_UP,
                             Flag.POWERING_DOWN, Flag.INVALID_REG, Flag.REBOOT_ISSUED})
GUARDS = ("down", "drain")


def _when(wall: float | None) -> str | None:
    return None if wall is None else f"{wall:.3f}"


class DownGuard:
    """Holds nodes NOT_RESPONDING instead of DOWN when too many go silent at once."""

    name = "down"

    def __init__(self, cluster: Registry) -> None:
        self.c = cluster
        self.tripped_at: float | None = None  # wall clock
        self.detail = ""
        self.held: dict[str, float] = {}  # node -> wall time it was held
        self._downs: deque[tuple[float, str]] = deque()  # DOWN by SlurmdTimeout (trio time)
        self._scan: tuple[float, int, int] | None = None  # (trio time, in service, silent)

    @property
    def tripped(self) -> bool:
        return self.tripped_at is not None

    def window(self) -> int:
        return self.c.config.guards.down_window or self.c.config.timeouts.slurmd_timeout

    def holds(self, node: NodeRecord, now: float) -> bool:
        """May SlurmdTimeout set this node DOWN now (False), or is it held (True; trips the
        guard when this silence makes too many)?"""
        g = self.c.config.guards
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
        t = self.c.config.timeouts
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
            for n in self.c.nodes.values():
                st = n.state
                if (st.base not in UP_BASES or n.last_heard < since
                        or not st.flags.isdisjoint(_NOT_IN_SERVICE)):
                    continue
                in_service += 1
                if n.hb_stage != EXPECT_BEAT or n.last_heard < late:
                    silent += 1
            scan = self._scan = (now, in_service, silent)
        before = sum(1 for when, _ in downs if when < scan[0])  # not in the scan any more
        return scan[1] + before, scan[2] + before

    def _trip(self, in_service: int, silent: int) -> None:
        window = self.window()
        self.tripped_at = self.c.wall()
        self.detail = (f"{silent} of {in_service} nodes in service went silent within "
                       f"{window} s")
        logs.event("DownGuard tripped: holding silent nodes NOT_RESPONDING instead of DOWN, "
                   "no job is requeued; `rcontrol confirm down` sets them DOWN, "
                   "`rcontrol reset guard down` re-arms the guard", logging.CRITICAL,
                   silent=silent, in_service=in_service, window=window)
        self.c.eventlog.add("guard_tripped", "-", guard="DownGuard", detail=self.detail)

    def hold(self, node: NodeRecord) -> None:
        self.held[node.name] = self.c.wall()

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
        self.c.eventlog.add("guard_cleared", "-", guard="DownGuard", detail=why, user=user)

    def confirm(self, names: list[str], user: str) -> tuple[list[str], list[str]]:
        """Held nodes DOWN "Not responding", their jobs requeued, as the timeout would have."""
        if not self.held:
            return [], ["the DownGuard holds no node; nothing to confirm"]
        wall = self.c.wall()
        changed: list[str] = []
        errors: list[str] = []
        for name in names or list(self.held):
            node = self.c.nodes.get(name)
            if name not in self.held or node is None:
                errors.append(f"node {name} is not held by the DownGuard")
                continue
            del self.held[name]
            node.hb_stage = SILENT
            _, err = self.c.apply_event(node, events.ResponseTimeout(now=wall, user=user))
            self.c.liveness.arm(node)
            if err:
                errors.append(err)
            else:
                changed.append(name)
        if changed:
            logs.event("DownGuard: held nodes confirmed DOWN", logging.WARNING,
                       nodes=hostlist.fold(changed), user=user or "-")
            self.c.eventlog.add("guard_confirmed", "-", guard="DownGuard",
                                nodes=hostlist.fold(changed), user=user or None)
        if not self.held and self.tripped:
            self._clear("every held node was confirmed DOWN", user or None)
        return changed, errors

    def reset(self, user: str) -> list[str]:
        """Re-arm: held nodes lose the hold and get one more SlurmdTimeout to be heard."""
        names = list(self.held)
        self.held.clear()
        now, wall = self.c.clock(), self.c.wall()
        for name in names:
            node = self.c.nodes.get(name)
            if node is None:
                continue
            self.c.apply_event(node, events.GuardRelease(now=wall, user=user))
            node.hb_stage = EXPECT_TIMEOUT
            node.last_heard = now
            self.c.liveness.arm(node)
        self.tripped_at = wall  # so that _clear logs and records the reset
        self._clear(f"reset by an admin; {len(names)} held node(s) get one more SlurmdTimeout",
                    user or None)
        return names

    def status(self) -> dict[str, Any]:
        g = self.c.config.guards
        held = [n for n in self.held if n in self.c.nodes]
        return {"guard": "DownGuard", "state": self._state(g.down_percent),
                "since": _when(self.tripped_at), "percent": g.down_percent,
                "window": self.window(), "min_nodes": g.down_min_nodes, "detail": self.detail,
                "nodes": hostlist.fold(held), "count": len(held)}

    def _state(self, percent: int) -> str:
        return "TRIPPED" if self.tripped else ("OFF" if percent <= 0 else "ARMED")


class DrainGuard:
    """Pauses automatic (health-check) drains once too many happened within the window."""

    name = "drain"

    def __init__(self, cluster: Registry) -> None:
        self.c = cluster
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
        c = self.c
        g = c.config.guards
        wall = c.wall()
        st = node.state
        new_drain = (verdict != "ok" and g.drain_percent > 0 and st.flags.isdisjoint(_OUT)
                     and st.base is not Base.DOWN and st.base is not Base.FUTURE
                     and st.flags.isdisjoint(_NOT_IN_SERVICE - {Flag.PENDING}))
        if not new_drain:
            if verdict == "ok":
                self.paused.pop(node.name, None)
            return c.apply_event(node, events.HealthResult(now=wall, verdict=verdict,
                                                           message=message))
        now = c.clock()
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
            for n in self.c.nodes.values():
                st = n.state
                if st.base in UP_BASES and st.flags.isdisjoint(_NOT_IN_SERVICE) and (
                        st.flags.isdisjoint(_OUT) or n.name in drained):
                    count += 1
            scan = self._scan = (now, count)
        return scan[1]

    def _trip(self, drained: int, total: int) -> None:
        g = self.c.config.guards
        self.tripped_at = self.c.wall()
        self.detail = (f"health checks drained {drained} of {total} nodes in service within "
                       f"{g.drain_window} s (limit {g.drain_percent}%)")
        logs.event("DrainGuard tripped: further health-check drains are paused until an admin "
                   "acts; `rcontrol confirm drain` applies them, `rcontrol reset guard drain` "
                   "closes the guard", logging.CRITICAL, drained=drained, nodes=total,
                   window=g.drain_window, percent=g.drain_percent)
        self.c.eventlog.add("guard_tripped", "-", guard="DrainGuard", detail=self.detail)

    def confirm(self, names: list[str], user: str) -> tuple[list[str], list[str]]:
        """Apply paused drains now (they do not count toward the guard)."""
        if not self.paused:
            return [], ["the DrainGuard paused no drain; nothing to confirm"]
        wall = self.c.wall()
        changed: list[str] = []
        errors: list[str] = []
        for name in names or list(self.paused):
            node = self.c.nodes.get(name)
            if name not in self.paused or node is None:
                errors.append(f"node {name} has no drain paused by the DrainGuard")
                continue
            verdict, message, _ = self.paused.pop(name)
            _, err = self.c.apply_event(node, events.HealthResult(now=wall, verdict=verdict,
                                                                  message=message))
            if err:
                errors.append(err)
            else:
                changed.append(name)
        if changed:
            logs.event("DrainGuard: paused drains confirmed", logging.WARNING,
                       nodes=hostlist.fold(changed), user=user or "-")
            self.c.eventlog.add("guard_confirmed", "-", guard="DrainGuard",
                                nodes=hostlist.fold(changed), user=user or None)
        return changed, errors

    def reset(self, user: str) -> list[str]:
        """Close the guard: automatic drains resume; paused nodes are judged at their next
        check (their paused reason goes)."""
        names = list(self.paused)
        self.paused.clear()
        wall = self.c.wall()
        for name in names:
            node = self.c.nodes.get(name)
            if node is not None:
                self.c.apply_event(node, events.GuardRelease(now=wall, user=user))
        was = self.tripped
        self.tripped_at = None
        self.detail = ""
        self._drains.clear()
        why = f"reset by an admin; {len(names)} paused drain(s) dropped until their next check"
        logs.event("DrainGuard cleared" if was else "DrainGuard reset", logging.WARNING,
                   why=why, user=user or "-")
        self.c.eventlog.add("guard_cleared", "-", guard="DrainGuard", detail=why,
                            user=user or None)
        return names

    def status(self) -> dict[str, Any]:
        g = self.c.config.guards
        paused = [n for n in self.paused if n in self.c.nodes]
        now = self.c.clock()
        recent = sum(1 for when, _ in self._drains if when >= now - g.drain_window)
        state = "TRIPPED" if self.tripped else ("OFF" if g.drain_percent <= 0 else "ARMED")
        return {"guard": "DrainGuard", "state": state, "since": _when(self.tripped_at),
                "percent": g.drain_percent, "window": g.drain_window,
                "min_nodes": g.drain_min_nodes, "detail": self.detail,
                "nodes": hostlist.fold(paused), "count": len(paused), "drains_in_window": recent}


def status(cluster: Registry) -> m.GuardStatus:
    return m.GuardStatus(
        ok=True,
        guards=(cluster.liveness.guard.status(), cluster.drain_guard.status()),
        controller=cluster.liveness.stalls.status(),
    )


def handle(cluster: Registry, msg: m.GuardRequest) -> m.GuardStatus:
    """`rcontrol show guards`, `confirm down|drain [NodeName=...]`, `reset guard [down|drain]`."""
    action = msg.action.lower()
    if action == "show":
        return status(cluster)
    which = msg.guard.lower()
    guards: dict[str, Guard] = {
        "down": cluster.liveness.guard, "drain": cluster.drain_guard}
    if action == "confirm":
        guard = guards.get(which)
        if guard is None:
            return _refused(f"guard: {msg.guard!r} is not one of down, drain "
                            "(rcontrol confirm down|drain [NodeName=HOSTLIST])")
        names: list[str] = []
        if msg.node_names.strip():
            names, errors = cluster.expand(msg.node_names)
            if errors:
                return _refused(*errors)
        changed, errors = guard.confirm(names, msg.user)
        cluster.flush_programs()
        return _with(status(cluster), changed, errors)
    if action == "reset":
        if which and which not in guards:
            return _refused(f"guard: {msg.guard!r} is not one of down, drain "
                            "(rcontrol reset guard [down|drain])")
        released: list[str] = []
        for key in ([which] if which else list(GUARDS)):
            released += guards[key].reset(msg.user)
        cluster.flush_programs()
        return _with(status(cluster), released, [])
    return _refused(f"action: {msg.action!r} is not one of show, confirm, reset")


def _refused(*errors: str) -> m.GuardStatus:
    return m.GuardStatus(ok=False, errors=tuple(errors))


def _with(st: m.GuardStatus, changed: list[str], errors: list[str]) -> m.GuardStatus:
    return m.GuardStatus(ok=not errors, guards=st.guards, controller=st.controller,
                         changed=tuple(changed), errors=tuple(errors))
