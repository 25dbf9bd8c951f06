"""The membership and state event log: bounded in count and age, persisted as an append-only
file in the state directory, read by `rcontrol events` and streamed to `--follow` clients.

The core only appends (O(1), no I/O, never an await): the file is written by the daemon's
flusher task and each follower drains its own bounded queue from its own connection's task.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import trio

from ranch.ctld.state import journalfile
from ranch.ctld.state.eventfile import FILE_NAME, RECORD, write
from ranch.statemachine import names

FOLLOW_QUEUE = 1024  # events one follower may lag behind before it starts missing some
# The file is rewritten from memory once it holds this many times the kept events (so appends
# stay appends, and the file never grows past twice its bound).
REWRITE_FACTOR = 2
# State changes every job start and end makes (IDLE/MIXED/ALLOCATED, COMPLETING): followers see
# them, but they are neither kept nor saved, or job churn would evict the drain and membership
# history the bounded log is for.
FOLLOW_ONLY_CAUSES = frozenset({"allocation", "completing"})


class Follower:
    """One `rcontrol events --follow`: a bounded queue the core fills, and a count of the
    events dropped because the client read too slowly."""

    __slots__ = ("limit", "missed", "nodes", "queue", "wake")

    def __init__(self, nodes: frozenset[str] | None = None, limit: int = FOLLOW_QUEUE) -> None:
        self.nodes = nodes
        self.limit = limit
        self.queue: deque[dict[str, Any]] = deque()
        self.missed = 0
        self.wake = trio.Event()

    def offer(self, rec: dict[str, Any]) -> None:
        """Called by the core: never blocks; the oldest queued event makes room."""
        if self.nodes is not None and rec.get("node") not in self.nodes:
            return
        if len(self.queue) >= self.limit:
            self.queue.popleft()
            self.missed += 1
        self.queue.append(rec)
        self.wake.set()

    async def next_batch(self) -> tuple[list[dict[str, Any]], int]:
        """Wait for events; (events, how many were missed before them)."""
        while not self.queue and not self.missed:
            await self.wake.wait()
            self.wake = trio.Event()
        batch, missed = list(self.queue), self.missed
        self.queue.clear()
        self.missed = 0
        return batch, missed


class EventLog:
    def __init__(
        self,
        max_events: int = 10000,
        max_age: float = 30 * 86400,
        *,
        wall: Callable[[], float] = time.time,
        on_unsaved: Callable[[], None] = lambda: None,
    ) -> None:
        self.max_events = max_events
        self.max_age = max_age
        self.wall = wall
        self.on_unsaved = on_unsaved
        self.events: deque[dict[str, Any]] = deque()
        self.seq = 0
        self.followers: set[Follower] = set()
        self.unsaved: list[dict[str, Any]] = []
        self.file_lines = 0  # lines in the file now (the flusher keeps count)
        self.rewrite = False  # events were dropped unsaved: the file is to be rewritten

    def configure(self, max_events: int, max_age: float) -> None:
        self.max_events, self.max_age = max_events, max_age
        self._trim(self.wall())

    # -- the core's side ---------------------------------------------------------------------

    def add(self, kind: str, node: str, *, keep: bool = True, **fields: Any) -> dict[str, Any]:
        """Append one event (only offered to followers when not `keep`); fields with None
        values are left out."""
        now = self.wall()
        self.seq += 1
        rec = {"seq": self.seq, "time": now, "kind": kind, "node": node}
        rec.update((k, v) for k, v in fields.items() if v is not None)
        if not keep:
            for follower in self.followers:
                follower.offer(rec)
            return rec
        self.events.append(rec)
        self._trim(now)
        unsaved = self.unsaved
        unsaved.append(rec)
        if len(unsaved) == 1:
            self.on_unsaved()
        elif len(unsaved) > self.max_events:  # no flusher (or a failing disk): stay bounded
            del unsaved[: len(unsaved) - self.max_events]
            self.rewrite = True
        for follower in self.followers:
            follower.offer(rec)
        return rec

    def state_change(self, node: Any, old: Any, new: Any, event: Any, cause: str) -> None:
        """The hook of Cluster._apply: one record per state change, with cause, reason, user
        (job-driven ones go to followers only: FOLLOW_ONLY_CAUSES).
        `reason` is the admin's text when the event carries one (a RESUME's Reason= is the
        undrain note), else the node's new reason when it changed."""
        reason = getattr(event, "reason", None)
        if reason is None and new.reason is not None and new.reason != old.reason:
            reason = new.reason.text
        rec = self.add("state", node.name, keep=cause not in FOLLOW_ONLY_CAUSES,
                       old=names.complete(old), new=node.complete, cause=cause,
                       reason=reason, user=getattr(event, "user", None) or None)
        node.last_change = rec["time"]

    def _trim(self, now: float) -> None:
        ev = self.events
        while len(ev) > self.max_events:
            ev.popleft()
        oldest = now - self.max_age
        while ev and ev[0]["time"] < oldest:
            ev.popleft()

    def query(self, since: float = 0.0, nodes: Iterable[str] | None = None,
              limit: int = 0) -> list[dict[str, Any]]:
        self._trim(self.wall())
        wanted = None if nodes is None else set(nodes)
        out = [
            r for r in self.events
            if r["time"] >= since and (wanted is None or r["node"] in wanted)
        ]
        return out[-limit:] if limit > 0 else out

    def subscribe(self, nodes: Iterable[str] | None = None) -> Follower:
        follower = Follower(None if nodes is None else frozenset(nodes))
        self.followers.add(follower)
        return follower

    def follow(self, follower: Follower) -> None:
        """Offer every event to a follower made elsewhere (the web page's shared one)."""
        self.followers.add(follower)

    def unsubscribe(self, follower: Follower) -> None:
        self.followers.discard(follower)

    # -- persistence -------------------------------------------------------------------------

    def load(self, state_dir: str, ignore_damaged: bool = False) -> None:
        """Take back the saved events; events logged before this call (at start-up) follow
        them. Each line is sealed as a journal record is (ctld/state/journalfile.py): a torn last
        line is cut off and logged, anything else damaged raises integrity.DamagedState
        naming the file and offset, unless `ignore_damaged` (rctld -i) moves it aside."""
        path = os.path.join(state_dir, FILE_NAME)
        records, aside = journalfile.read_or_set_aside(path, ignore_damaged=ignore_damaged,
                                                        what=RECORD)
        loaded = [r for r in records if "time" in r and "seq" in r]
        self.file_lines = 0 if aside is not None else len(records)
        self.rewrite = self.rewrite or aside is not None  # what was taken goes to a new file
        early = list(self.events)
        last = max((int(r["seq"]) for r in loaded), default=0)
        for i, rec in enumerate(early, 1):
            rec["seq"] = last + i
        self.seq = last + len(early)
        self.events = deque(loaded + early)
        self._trim(self.wall())
        if self.rewrite:
            self.on_unsaved()

    def take_unsaved(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """(events to append, or every kept event when the file is to be rewritten)."""
        batch, self.unsaved = self.unsaved, []
        if self.rewrite or self.file_lines + len(batch) > REWRITE_FACTOR * self.max_events:
            self.rewrite = False
            return batch, list(self.events)
        return batch, None

    def written(self, count: int, everything: bool) -> None:
        """What take_unsaved handed out is on disk: `count` lines appended, or the file
        rewritten with `count` lines."""
        self.file_lines = count if everything else self.file_lines + count

    def not_written(self, batch: list[dict[str, Any]]) -> None:
        """The write of `batch` failed: it is first in line for the next one."""
        self.unsaved[:0] = batch
        self.on_unsaved()


def flush(log: EventLog, state_dir: str) -> None:
    """Write what is unsaved, synchronously (shutdown, tests)."""
    batch, everything = log.take_unsaved()
    if not batch and everything is None:
        return
    log.written(write(state_dir, batch, everything), everything is not None)
