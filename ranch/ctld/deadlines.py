"""Deadlines keyed by anything hashable: a heap with lazily invalidated entries, one sleeping task.

Rescheduling a key leaves its old heap entry in place; the entry is recognised as stale when it
comes up (its sequence number is no longer the key's live one) and dropped then, so schedule and
cancel are O(log n) and O(1) and nothing ever scans all keys.

A busy task takes its due keys at most once every GATHER. At 10,000 nodes a node's heartbeat
deadline comes up every one or two intervals (it is re-armed lazily, when it fires), some 500
keys a second, and each wake-up found three or four: its scheduler pass and cancel scope were a
tenth of rctld's CPU (docs/benchmarks.md, issue 50). A deadline after a quiet spell fires on
time; in a busy stretch one may fire up to GATHER late, far inside every timeout it serves
(seconds: slurmctld judges the same ones on passes seconds apart).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Hashable

import trio

GATHER = 0.025  # seconds from one wake-up of the task to the next, at the least


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Hashable]] = []
        self._live: dict[Hashable, tuple[float, int]] = {}
        self._seq = itertools.count()
        self._scope: trio.CancelScope | None = None
        self._floor = -math.inf  # the task's next wake-up comes no sooner (GATHER)

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._live

    def when(self, key: Hashable) -> float | None:
        entry = self._live.get(key)
        return entry[0] if entry else None

    def schedule(self, key: Hashable, when: float) -> None:
        """Fire `key` at `when` (trio time), replacing any earlier schedule of it."""
        seq = next(self._seq)
        self._live[key] = (when, seq)
        heapq.heappush(self._heap, (when, seq, key))
        if self._scope is not None and when < self._scope.deadline:
            self._scope.deadline = max(when, self._floor)
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._live):
            self._compact()

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def clear(self) -> None:
        self._heap.clear()
        self._live.clear()

    def next_when(self) -> float:
        """Time of the earliest live entry (inf when none); drops stale entries on the way."""
        heap = self._heap
        while heap:
            when, seq, key = heap[0]
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                return when
            heapq.heappop(heap)
        return math.inf

    def pop_due(self, now: float) -> list[Hashable]:
        """Every key whose time has come, earliest first; they are no longer scheduled."""
        due: list[Hashable] = []
        while self.next_when() <= now:
            _, _, key = heapq.heappop(self._heap)
            del self._live[key]
            due.append(key)
        return due

    def _compact(self) -> None:
        self._heap = [(w, s, k) for k, (w, s) in self._live.items()]
        heapq.heapify(self._heap)

    async def run(self, fire: Callable[[list[Hashable]], None]) -> None:
        """Sleep until the earliest deadline, hand the due keys to `fire`, repeat forever."""
        woke = -math.inf
        while True:
            # busy: let a few more come due. One wait holds both the gather and the next
            # deadline (a quiet controller's every firing cost a second wake-up 25 ms later).
            self._floor = woke + GATHER
            with trio.CancelScope(deadline=max(self.next_when(), self._floor)) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None
            woke = trio.current_time()
            due = self.pop_due(woke)
            if due:
                fire(due)
