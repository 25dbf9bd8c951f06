"""sdiag's scheduler and backfill statistics (issue 44): what the FIFO pass and the backfill loop
count of their cycles since rctld started, in sdiag's units (microseconds of CPU-side work, not
the backfill loop's sleep) and under slurmrestd's `diag` names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs


@attrs.define
class Cycles:
    """One scheduler's cycles: how many, how long (µs), how deep, over how long a queue."""

    count: int = 0
    last_us: int = 0
    max_us: int = 0
    sum_us: int = 0
    last_depth: int = 0
    depth_sum: int = 0
    last_queue: int = 0
    queue_sum: int = 0

    def add(self, us: int, depth: int, queue: int) -> None:
        self.count += 1
        self.last_us, self.max_us, self.sum_us = us, max(self.max_us, us), self.sum_us + us
        self.last_depth, self.depth_sum = depth, self.depth_sum + depth
        self.last_queue, self.queue_sum = queue, self.queue_sum + queue

    def mean(self, total: int) -> int:
        return total // self.count if self.count else 0


class SchedStats:
    """The counters; `main_cycle` is the FIFO pass's to call, `backfill_cycle` the loop's."""

    def __init__(self, wall: Callable[[], float]) -> None:
        self._wall = wall
        self.started = wall()
        self.main = Cycles()
        self.bf = Cycles()
        self.bf_try_last = 0  # jobs a backfill cycle tried to place (past the bf_max_* limits)
        self.bf_try_sum = 0
        self.backfilled = 0  # jobs the backfill loop started
        self.bf_when = 0.0  # when the last backfill cycle began
        self.bf_active = False  # a cycle is under way (its plan runs in a thread)

    def main_cycle(self, us: int, depth: int, queue: int) -> None:
        self.main.add(us, depth, queue)

    def backfill_cycle(self, began: float, us: int, depth: int, tried: int, queue: int,
                       started: int) -> None:
        self.bf.add(us, depth, queue)
        self.bf_try_last, self.bf_try_sum = tried, self.bf_try_sum + tried
        self.backfilled += started
        self.bf_when = began

    def set_active(self, on: bool) -> None:
        self.bf_active = on

    def record(self) -> dict[str, Any]:
        """slurmrestd v0.0.38's diag names (sdiag's fields) with Ranch's figures; what Ranch
        has no counterpart of is 0 (het jobs; the node-space table: Ranch's map is a tree of
        bitmasks, docs/slurm-compat.md)."""
        now = self._wall()
        main, bf = self.main, self.bf
        minutes = (now - self.started) / 60
        return {
            "req_time": int(now), "req_time_start": int(self.started),
            "schedule_cycle_last": main.last_us, "schedule_cycle_max": main.max_us,
            "schedule_cycle_total": main.count, "schedule_cycle_mean": main.mean(main.sum_us),
            "schedule_cycle_mean_depth": main.mean(main.depth_sum),
            "schedule_cycle_per_minute": int(main.count / minutes) if minutes > 1 else 0,
            "schedule_queue_length": main.last_queue,
            "bf_backfilled_jobs": self.backfilled, "bf_last_backfilled_jobs": self.backfilled,
            "bf_backfilled_het_jobs": 0, "bf_cycle_counter": bf.count,
            "bf_when_last_cycle": int(self.bf_when), "bf_cycle_last": bf.last_us,
            "bf_cycle_max": bf.max_us, "bf_cycle_mean": bf.mean(bf.sum_us),
            "bf_last_depth": bf.last_depth, "bf_last_depth_try": self.bf_try_last,
            "bf_depth_mean": bf.mean(bf.depth_sum), "bf_depth_mean_try": bf.mean(self.bf_try_sum),
            "bf_queue_len": bf.last_queue, "bf_queue_len_mean": bf.mean(bf.queue_sum),
            "bf_table_size": 0, "bf_table_size_mean": 0, "bf_active": self.bf_active,
        }
