"""The second a backfill plan shows its job starting: Slurm's start_time, to the second
within the slot the planner found (ranch/sched/backfill.py plans over bf_resolution slots)."""

from __future__ import annotations

from typing import Any, Protocol

from ranch.sched.bfmap import bits
from ranch.sched.model import Pending


class Cycle(Protocol):
    """What of backfill.py's Cycle this reads (named here, not imported: backfill imports
    this module)."""

    clock: Any
    lines: Any
    map: Any

    def _sig(self, job: Pending) -> tuple[Any, Any]: ...
    def _windowed(self, at: float, minutes: int | None) -> int: ...


def second(cycle: Cycle, job: Pending, t: int, chosen: int, minutes: int | None) -> float:
    """The second within slot `t` (after wall(t - 1), by wall(t)) the chosen nodes hold
    the job, where slot t - 1 holds no reservation or window on them; else wall(t) (after a
    job ahead's reservation: its end, on the grid; after a window: the first boundary after
    its end, where Slurm shows one second more: docs/slurm-compat.md)."""
    clock, lines = cycle.clock, cycle.lines
    lo, hi = clock.wall(t - 1), clock.wall(t)
    sig, _ = cycle._sig(job)
    at: float | None = None
    for i in bits(chosen):
        # a spread job's count grows at each release: its last one in the slot bounds it
        s = lines.latest(i, t, clock.after) if job.need.spread \
            else lines.since(i, sig, int(clock.now))
        if s is None and not job.need.spread:
            return clock.wall(t)
        # held now: it waits for the map or a job ahead (start_res), not a release
        if s is not None and s > clock.now and (at is None or s > at):
            at = s
    if at is None or at <= lo or at > hi or chosen & ~cycle.map.free(t - 1, t) \
            or chosen & cycle._windowed(at, minutes):
        return hi
    return at
