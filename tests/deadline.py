"""Deadlines that stretch with the machine: how much slower than a quiet box this one runs now.

A test that waits for a condition gives it a deadline sized for a quiet 2-core machine; on the
same machine with a load of 4 beside the suite, a daemon's start or a failover takes twice that
and nothing is wrong. `slowdown()` is that factor, read when asked (the load changes during a
run): RANCH_TEST_SLOWDOWN if set, else the one-minute load average per core above one, never
below 1 and never above MAX. Waits compare elapsed time against `seconds * slowdown()` on each
poll, so a wait that began quiet and turned busy gets the longer deadline.
"""

from __future__ import annotations

import os
import time

MAX = 4.0  # past this the machine is too busy for any deadline to mean much
_CACHE_FOR = 1.0  # seconds one reading of the load is used for
_cached: tuple[float, float] = (-1e9, 1.0)  # (when read, factor)


def slowdown() -> float:
    """How many times longer than on a quiet machine a wait may take now (1.0 .. MAX)."""
    global _cached
    forced = os.environ.get("RANCH_TEST_SLOWDOWN")
    if forced:
        return max(1.0, float(forced))
    now = time.monotonic()
    if now - _cached[0] < _CACHE_FOR:
        return _cached[1]
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform
        load = 0.0
    factor = min(MAX, max(1.0, load / (os.cpu_count() or 1)))
    _cached = (now, factor)
    return factor


def scaled(seconds: float) -> float:
    """`seconds` of a quiet machine, in this machine's seconds now."""
    return seconds * slowdown()


class Deadline:
    """A deadline of `seconds` quiet-machine seconds from now, stretched as the load rises."""

    def __init__(self, seconds: float) -> None:
        self.began = time.monotonic()
        self.seconds = seconds

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def passed(self) -> bool:
        return self.elapsed() >= scaled(self.seconds)

    def left(self) -> float:
        return max(0.0, scaled(self.seconds) - self.elapsed())


def until(what, ok, seconds: float, every: float = 0.3):
    """Poll `what()` until `ok` holds of its value or `seconds` (quiet-machine seconds,
    stretched as the load rises) pass; the last value either way, for the caller to compare."""
    deadline = Deadline(seconds)
    while True:
        got = what()
        if ok(got) or deadline.passed():
            return got
        time.sleep(every)
