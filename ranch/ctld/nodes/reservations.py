"""Maintenance reservations (issue 33): `rcontrol create|update|delete|show reservation`, as far
as they touch nodes. A reservation holds nodes for a window; no job starts whose time limit
crosses a window on its nodes (a job without a limit never starts on a node with a window ahead);
while a window is open its nodes show RESERVED, and MAINT with flags=maint. Saved through the
journal like nodes and jobs."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.nodes import nodeupdates
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.state.changelog import ChangeLog, Taken
from ranch.protocol import messages as m
from ranch.sched.model import Window
from ranch.statemachine import events
from ranch.statemachine.model import Base, Flag

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import NodeBook

FLAGS = ("MAINT", "FLEX", "OVERLAP", "IGNORE_JOBS")  # the node-side flags, in Slurm's order
SPEC_NODES = "SPEC_NODES"  # shown when Nodes= named them, as Slurm does
UNLIMITED_S = 365 * 86400.0  # Duration=UNLIMITED: a year, as slurmctld's INFINITE reservation
DEADLINE = ("~reservations", "resv")  # the deadline of the next window's start or end
BLOCKED = "ReqNodeNotAvail, May be reserved for other job"  # slurmctld's pending reason
INVALID = "Requested reservation is invalid"
BUSY = "Requested nodes are busy"


@attrs.frozen
class Reservation:
    name: str
    start: float  # wall clock
    end: float
    nodes: tuple[str, ...]
    flags: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    spec_nodes: bool = True  # Nodes= given (not NodeCnt=)
    created_by: str = ""

    def holds(self, node: str, start: float, end: float) -> bool:
        return self.start < end and self.end > start and node in self.nodes

    def active(self, now: float) -> bool:
        return self.start <= now <= self.end

    def record(self, now: float) -> dict[str, Any]:
        """The wire and state-file form (the state file drops `state`)."""
        flags = [*self.flags, SPEC_NODES] if self.spec_nodes else list(self.flags)
        return {"name": self.name, "start_time": self.start, "end_time": self.end,
                "duration": self.end - self.start, "nodes": hostlist.fold(list(self.nodes)),
                "node_count": len(self.nodes), "flags": flags, "users": list(self.users),
                "state": "ACTIVE" if self.active(now) else "INACTIVE",
                "created_by": self.created_by}


def from_record(d: dict[str, Any]) -> Reservation:
    flags = [f for f in d.get("flags", ()) if f != SPEC_NODES]
    return Reservation(str(d["name"]), float(d["start_time"]), float(d["end_time"]),
                       tuple(hostlist.expand(d.get("nodes") or "")) if d.get("nodes") else (),
                       tuple(flags), tuple(d.get("users", ())), SPEC_NODES in d.get("flags", ()),
                       str(d.get("created_by", "")))


class Reservations:
    """The one owner of the reservations: requests, the windows' node flags, the scheduler's
    question (which nodes may a job with this limit not use), their journal records."""

    def __init__(self, book: NodeBook, *, clock: Callable[[], float], wall: Callable[[], float],
                 deadlines: Deadlines, changes: ChangeLog, eventlog: EventLog,
                 kick: Callable[[], None],
                 running_until: Callable[[], dict[str, float]]) -> None:
        """`kick`: a scheduling pass is due (a window came, went or changed); `running_until`:
        node -> when the last job on it may run until (the job side's answer)."""
        self.book = book
        self.clock = clock
        self.wall = wall
        self.deadlines = deadlines
        self.changes = changes
        self.eventlog = eventlog
        self.kick = kick
        self.running_until = running_until
        self.items: dict[str, Reservation] = {}
        self.counter = 0  # names reservations as Slurm does: USER_N
        self.gen = 0  # bumped by every change (the scheduler's cache key)
        # blocked()'s answers for one scheduling pass: (gen, now) -> {limit: nodes}
        self._memo: tuple[tuple[int, float], dict[float | None, frozenset[str]]] = ((-1, 0), {})

    # -- requests ------------------------------------------------------------------------------

    def handle(self, msg: m.ReservationRequest) -> m.ReservationReply:
        action = msg.action.lower()
        if action == "show":
            now = self.wall()
            found = [r.record(now) | {"core_count": sum(
                self.book.nodes[n].cfg.cpus for n in r.nodes if n in self.book.nodes)}
                for r in self._sorted() if not msg.name or r.name == msg.name]
            if msg.name and not found:
                return m.ReservationReply(ok=False, errors=(
                    f"Reservation {msg.name} not found",))
            return m.ReservationReply(ok=True, reservations=tuple(found))
        if action == "delete":
            return self._delete(msg)
        if action in ("create", "update"):
            return self._create_or_update(msg, action == "create")
        return m.ReservationReply(ok=False, errors=(
            f"unknown reservation action {msg.action!r}; valid: create, update, delete, show",))

    def _sorted(self) -> list[Reservation]:
        return sorted(self.items.values(), key=lambda r: (r.start, r.name))

    def _delete(self, msg: m.ReservationRequest) -> m.ReservationReply:
        if msg.name not in self.items:
            return m.ReservationReply(ok=False, errors=(INVALID,))
        del self.items[msg.name]
        self._changed(msg.name, None, msg.user, "deleted")
        return m.ReservationReply(ok=True, name=msg.name)

    def _create_or_update(self, msg: m.ReservationRequest, create: bool) -> m.ReservationReply:
        old = self.items.get(msg.name) if msg.name else None
        if not create and old is None:
            return _refused(INVALID)
        if create and old is not None:
            return _refused(f"Reservation request has invalid name: {msg.name} exists")
        spec = _spec(msg, old, create)
        if isinstance(spec, str):
            return _refused(spec)
        flags, users, start, end = spec
        names, spec_nodes, errors = self._nodes(msg, old, start, end, flags)
        if errors:
            return _refused(*errors)
        busy = self._busy(names, start, end, flags, msg.name, self._jobs_end(flags))
        if busy:
            return _refused(BUSY, f"busy: {hostlist.fold(busy)}")
        if create:
            self.counter += 1
            name = msg.name or f"{users[0]}_{self.counter}"
            if name in self.items:
                return _refused(f"Reservation request has invalid name: {name} exists")
        else:
            name = msg.name
        resv = Reservation(name, start, end, tuple(names), flags, users, spec_nodes,
                           old.created_by if old else msg.user)
        self.items[name] = resv
        self._changed(name, resv.record(self.wall()), msg.user,
                      "created" if create else "updated")
        return m.ReservationReply(ok=True, name=name)

    def _nodes(self, msg: m.ReservationRequest, old: Reservation | None, start: float,
               end: float, flags: tuple[str, ...]) -> tuple[list[str], bool, tuple[str, ...]]:
        """(the nodes a request's window holds, whether Nodes= named them, why it is refused)."""
        if msg.nodes is not None:
            names, errors = nodeupdates.expand(self.book.nodes, msg.nodes)
            if errors:
                return [], True, ("Invalid node name specified", *errors)
            return names, True, ()
        if msg.node_count is not None:
            picked = self._pick(msg.node_count, start, end, flags, msg.name)
            return (picked or [], False, () if picked is not None else (BUSY,))
        if old is not None:
            return list(old.nodes), old.spec_nodes, ()
        return [], True, ("Nodes= or NodeCnt= must be given",)

    def journal_records(self, taken: Taken) -> list[dict[str, Any]]:
        """The journal records of the reservations changed in `taken` (None: deleted)."""
        return [{"resv": name, "entry": rec} for name, rec in taken.reservations.items()]

    def _others(self, name: str, start: float, end: float) -> list[Reservation]:
        return [r for r in self.items.values()
                if r.name != name and r.start < end and r.end > start]

    def _jobs_end(self, flags: tuple[str, ...]) -> dict[str, float]:
        return {} if "IGNORE_JOBS" in flags else self.running_until()

    def _busy(self, names: list[str], start: float, end: float, flags: tuple[str, ...],
              name: str, jobs_end: dict[str, float]) -> list[str]:
        """Nodes the window cannot have: in an overlapping reservation (unless either has
        OVERLAP), or running a job that would still run at its start (unless IGNORE_JOBS)."""
        out: list[str] = []
        others = self._others(name, start, end) if "OVERLAP" not in flags else []
        taken = {n for r in others if "OVERLAP" not in r.flags for n in r.nodes}
        for n in names:
            if n in taken or jobs_end.get(n, -math.inf) > start:
                out.append(n)
        return out

    def _pick(self, count: int, start: float, end: float, flags: tuple[str, ...],
              name: str) -> list[str] | None:
        if count < 1:
            return None
        busy = set(self._busy(list(self.book.nodes), start, end, flags, name,
                              self._jobs_end(flags)))
        free = [n for n in self.book.nodes
                if n not in busy and self.book.nodes[n].state.base is not Base.FUTURE]
        return free[:count] if len(free) >= count else None

    # -- the windows -----------------------------------------------------------------------------

    def _changed(self, name: str, record: dict[str, Any] | None, user: str, what: str) -> None:
        self.gen += 1
        self.changes.reservation_changed(name, record)
        self.eventlog.add("reservation", "-", name=name, action=what, user=user or None)
        logs.event(f"reservation {what}", name=name, user=user or "-")
        self.refresh()
        self.kick()  # a job may start, or must not

    def blocked(self, limit_s: float | None, now: float) -> frozenset[str]:
        """Nodes a job of this time limit (None: none) may not start on now."""
        if not self.items:
            return frozenset()
        key, memo = self._memo
        if key != (self.gen, now):
            memo = {}
            self._memo = ((self.gen, now), memo)
        got = memo.get(limit_s)
        if got is None:
            end = math.inf if limit_s is None else now + limit_s
            got = memo[limit_s] = frozenset(n for r in self.items.values()
                                            if r.start < end and r.end > now for n in r.nodes)
        return got

    def windows(self) -> tuple[Window, ...]:
        """Every window not yet over, for the backfill planner's map (it plans no start whose
        run would cross one on its nodes, as Slurm's backfill keeps reservations out)."""
        now = self.wall()
        return tuple(Window(r.start, r.end, frozenset(r.nodes)) for r in self._sorted()
                     if r.end > now)

    def refresh(self) -> None:
        """Every node's RESERVED/MAINT as the windows open now; the next start or end armed;
        reservations whose window is over go (as Slurm's do)."""
        now = self.wall()
        for r in [r for r in self.items.values() if r.end < now]:
            del self.items[r.name]
            self.gen += 1
            self.changes.reservation_changed(r.name, None)
            self.eventlog.add("reservation", "-", name=r.name, action="ended")
            self.kick()
        want: dict[str, tuple[bool, bool]] = {}
        for r in self.items.values():
            if r.active(now):
                maint = "MAINT" in r.flags
                for n in r.nodes:
                    had = want.get(n, (False, False))
                    want[n] = (True, had[1] or maint)
        for node in self.book.nodes.values():
            flags = node.state.flags
            have = (Flag.RESERVED in flags, Flag.MAINT in flags)
            need = want.get(node.name, (False, False))
            if have != need:
                _, err = self.book.apply_event(node, events.ReservationChanged(
                    now=now, reserved=need[0], maint=need[1]))
                if err:
                    logs.event("reservation flags not applied", logging.WARNING,
                               node=node.name, error=err)
        bounds = [t for r in self.items.values() for t in (r.start, r.end) if t > now]
        if bounds:
            due = self.clock() + (min(bounds) - now) + 0.001
            self.deadlines.schedule(DEADLINE, due)

    # -- state file ------------------------------------------------------------------------------

    def save_doc(self) -> dict[str, Any]:
        now = self.wall()
        return {"counter": self.counter,
                "items": [r.record(now) for r in self._sorted()]}

    def restore(self, doc: dict[str, Any] | None) -> None:
        if not doc:
            return
        self.counter = int(doc.get("counter", 0))
        for rec in doc.get("items", ()):
            try:
                r = from_record(rec)
            except (KeyError, TypeError, ValueError) as exc:
                logs.event("saved reservation unreadable; dropped", logging.WARNING,
                           error=repr(exc))
                continue
            self.items[r.name] = r
        self.gen += 1

    def metrics(self) -> dict[str, int]:
        now = self.wall()
        active = sum(1 for r in self.items.values() if r.active(now))
        return {"active": active, "inactive": len(self.items) - active}


def _refused(*errors: str) -> m.ReservationReply:
    return m.ReservationReply(ok=False, errors=errors)


def _spec(msg: m.ReservationRequest, old: Reservation | None,
          create: bool) -> tuple[tuple[str, ...], tuple[str, ...], float, float] | str:
    """(flags, users, start, end) of a create or update (an update keeps what it does not
    give), or why it is refused."""
    flags = old.flags if old else ()
    if msg.flags is not None:
        bad = [f for f in msg.flags if f.upper() not in FLAGS]
        if bad:
            return f"Error parsing flags {','.join(bad)}; Ranch takes {', '.join(FLAGS)}"
        flags = tuple(f for f in FLAGS if f in {x.upper() for x in msg.flags})
    users = tuple(msg.users) if msg.users is not None else (old.users if old else ())
    if create and not users:
        return "Either Users or Accounts must be specified"
    start = msg.start if msg.start is not None else (old.start if old else None)
    if start is None:
        return "StartTime must be given"
    if msg.duration is not None and msg.duration < 0 and msg.duration != -1:
        # as scontrol 22.05 (create_res.c): only -1 (INFINITE) may be negative
        return f"Invalid duration {msg.duration}"
    if msg.end is not None:
        end = msg.end
    elif msg.duration is not None:
        end = start + (UNLIMITED_S if msg.duration < 0 else msg.duration * 60.0)
    elif old is not None:
        end = start + (old.end - old.start)
    else:
        return "An end time or duration must be given"
    if end <= start:
        return "Invalid time specification (EndTime is not after StartTime)"
    return flags, users, start, end
