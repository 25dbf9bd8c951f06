"""The controller's own stalls: event-loop gaps, a suspended host, a wall clock that jumped.

A tick on the deadline heap (the controller's Deadlines, ctld/deadlines.py) comes due every
`period` seconds of trio's clock.
trio's clock is CLOCK_MONOTONIC, which keeps running while the process is stopped (SIGSTOP, a
VM paused by its host, a blocking disk or NFS call, a long collector pause), so a tick that comes
due late by more than `threshold` measures a stall of the controller itself. Whoever looks first
notices it: the deadline task before it judges any node, or the frame decoder before it judges
a frame's age, so no node is judged on silence that the controller caused.

A stall of S seconds
- is credited to every node (Liveness.credit): silence during it is not the node's;
- lets frames that waited in the sockets meanwhile be up to S seconds older than
  MessageTimeout, for MessageTimeout after the stall (`late_allowance`, which the frame decoder
  asks; see protocol/framing.py for why that opens no replay).

With the real clocks, each tick also compares the wall clock and CLOCK_BOOTTIME with the
monotonic clock: BOOTTIME running ahead means the host was suspended (the monotonic clock, and
so trio, did not see that time pass, but peers' frames are that much older); the wall clock
moving against BOOTTIME means it was stepped. A suspend or a forward step widens the frame
allowance the same way; every one of them is logged and recorded in the event log.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from ranch.ctld import logs
from ranch.ctld.deadlines import Deadlines

TICK_KEY = ("", "stall-watch")  # Cluster.deadlines key of the watchdog's tick
MIN_PERIOD = 0.05
MAX_PERIOD = 1.0
MIN_THRESHOLD = 0.5  # lateness below this is load, not a stall
MIN_BACKLOG_COVER = 10.0  # seconds of backlog covered whatever MessageTimeout (a storm's length)


def backlog_cover(message_timeout: float) -> float:
    """Seconds a frame may wait unread in rctld's own backlog and still be accepted (beyond
    MessageTimeout): the replay guard keeps nonces this much longer than the window."""
    return max(float(message_timeout), MIN_BACKLOG_COVER)


def boottime() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


class StallWatch:
    """Ticks on `deadlines`, measures how late they come, and reports stalls."""

    def __init__(
        self,
        deadlines: Deadlines,
        *,
        clock: Callable[[], float],
        on_stall: Callable[[float, str], None],
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        boot: Callable[[], float] = boottime,
        check_clocks: bool = True,
    ) -> None:
        self.deadlines = deadlines
        self.clock = clock
        self.on_stall = on_stall  # (seconds, cause) of a stall the nodes must not pay for
        self.wall = wall
        self.monotonic = monotonic
        self.boot = boot
        self.check_clocks = check_clocks
        self.period = MAX_PERIOD
        self.threshold = MIN_THRESHOLD
        self.message_timeout = 10.0
        self._tick_at: float | None = None  # trio time the next tick is due
        # The first tick is armed before the daemon's loop serves anything (Cluster.start): how
        # late it comes measures the start-up, not a stall.
        self._starting = False
        self._offsets: tuple[float, float] | None = None  # (wall - mono, boot - mono)
        self._allowance = 0.0  # seconds frames may be late beyond MessageTimeout ...
        self._allowance_until = -math.inf  # ... until this trio time
        # figures for /metrics and `rcontrol show guards`
        self.stalls = 0
        self.stalled_seconds = 0.0
        self.last_stall = 0.0
        self.last_stall_at: float | None = None  # wall clock
        self.clock_jumps = 0
        self.backlogs = 0  # times frames that waited in a backlog widened the allowance

    def configure(self, heartbeat_interval: float, message_timeout: float) -> None:
        self.period = min(MAX_PERIOD, max(MIN_PERIOD, heartbeat_interval / 4.0))
        self.threshold = max(MIN_THRESHOLD, self.period)
        self.message_timeout = float(message_timeout)

    def arm(self) -> None:
        """(Re)start ticking: at controller start and after the deadlines were cleared."""
        self._tick_at = self.clock() + self.period
        self._starting = True
        self.deadlines.schedule(TICK_KEY, self._tick_at)
        if self.check_clocks and self._offsets is None:
            self._offsets = self._sample()

    # -- noticing ----------------------------------------------------------------------------

    def notice(self, now: float | None = None) -> float:
        """Seconds of a stall that ended just now (0.0 if none); the tick is re-armed when due.

        Called by the deadline task before it judges anything, and by `late_allowance`."""
        tick_at = self._tick_at
        if tick_at is None:
            return 0.0
        now = self.clock() if now is None else now
        late = now - tick_at
        if late < 0:
            return 0.0
        stalled = 0.0
        if self._starting:
            self._starting = False
        elif late > self.threshold:
            # The loop was away from before the tick was due (up to a period before) until now.
            stalled = late + self.period
            self._stalled(stalled, "event loop gap", now)
        self._tick_at = now + self.period
        self.deadlines.schedule(TICK_KEY, self._tick_at)
        if self.check_clocks:
            self._check_clocks(now)
        return stalled

    def late_allowance(self) -> float:
        """Seconds a frame may be older than MessageTimeout now: the length of a stall of ours
        that ended less than MessageTimeout ago, else 0. The frame decoder asks this for every
        frame, so the first frame read after a stall also notices it."""
        now = self.clock()
        tick_at = self._tick_at
        if tick_at is not None and now - tick_at > self.threshold and not self._starting:
            self.notice(now)
        return self._allowance if now < self._allowance_until else 0.0

    def queued(self, seconds: float) -> float:
        """Frames waited `seconds` unread in this controller's sockets (a backlog: a storm of
        registrations read slower than they come): frames that much older than MessageTimeout
        are accepted for MessageTimeout from now, as after a stall, but no node is credited
        (their silence is not in question). The caller keeps `seconds` within what the replay
        guard keeps nonces past the window (backlog_cover; ctld/rpc/server.py). Returns the
        allowance now."""
        now = self.clock()
        if seconds > self.late_allowance():
            if not self._allowance_until > now:
                logs.event("frames waited in this controller's backlog; those older than "
                           "MessageTimeout by that wait are accepted", logging.WARNING,
                           seconds=round(seconds, 3))
            self.backlogs += 1
            self._allowance = seconds
            self._allowance_until = now + max(self.message_timeout, 1.0)
        return self.late_allowance()

    # -- what a stall does -------------------------------------------------------------------

    def _widen(self, seconds: float, now: float) -> None:
        if now < self._allowance_until:
            self._allowance += seconds
        else:
            self._allowance = seconds
        self._allowance_until = now + max(self.message_timeout, 1.0)

    def _stalled(self, seconds: float, cause: str, now: float) -> None:
        self.stalls += 1
        self.stalled_seconds += seconds
        self.last_stall = seconds
        self.last_stall_at = self.wall()
        self._widen(seconds, now)
        self.on_stall(seconds, cause)

    def _sample(self) -> tuple[float, float]:
        mono = self.monotonic()
        return self.wall() - mono, self.boot() - mono

    def _check_clocks(self, now: float) -> None:
        before = self._offsets
        after = self._offsets = self._sample()
        if before is None:
            return
        suspended = after[1] - before[1]  # BOOTTIME ran, the monotonic clock did not
        stepped = (after[0] - before[0]) - suspended  # the wall clock moved by itself
        if suspended > self.threshold:
            self.stalls += 1
            self.stalled_seconds += suspended
            self.last_stall = suspended
            self.last_stall_at = self.wall()
            self._widen(suspended, now)
            logs.event("controller host was suspended; frames delayed by it are accepted",
                       logging.WARNING, seconds=round(suspended, 3))
            self.on_stall(0.0, f"host suspended {suspended:.1f} s")
        if abs(stepped) > self.threshold:
            self.clock_jumps += 1
            if stepped > 0:
                self._widen(stepped, now)  # peers' frames look that much older
            logs.event("controller wall clock jumped", logging.WARNING,
                       seconds=round(stepped, 3),
                       note="frame timestamps are checked against it; keep clocks in sync")
            self.on_stall(0.0, f"wall clock jumped {stepped:+.1f} s")

    def status(self) -> dict[str, float | int | None]:
        return {"stalls": self.stalls, "stalled_seconds": round(self.stalled_seconds, 3),
                "last_stall_seconds": round(self.last_stall, 3),
                "last_stall_at": self.last_stall_at, "clock_jumps": self.clock_jumps}
