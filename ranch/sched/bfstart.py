"""The second a backfill plan shows its job starting: Slurm's start_time, to the second
within the slot the planner found (ranch/sched/backfill.py plans over bf_resolution slots)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ranch.sched.bfmap import bits
from ranch.sched.model import Pending

if TYPE_CHECKING:
    from ranch.sched.backfill import Cycle


def second(cycle: Cycle, job: Pending, t: int, chosen: int, minutes: int | None) -> float:
    """The second within slot `t` (after wall(t - 1), by wall(t)) the chosen nodes hold
    the job and a window on them ends (job_test_resv moves start_res to its end), where
    slot t - 1 holds no job's reservation on them; else wall(t)."""
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
    edges = [e for _, e, m in cycle.windows if m & chosen and lo < e <= hi]
    if at is None or at <= lo:
        at = None
    at = max((x for x in (at, *edges) if x is not None), default=None)
    if at is None or at > hi or chosen & ~cycle.resv.free(t - 1, t) \
            or chosen & cycle._windowed(at, minutes):
        return hi
    return at
