"""The replay guard across restarts: the bound below which rctld refuses every frame.

The guard's nonces live in memory, so after a restart it refuses every frame signed before the
new run started (`floor`). That covers a frame the last run accepted unless its peer's clock was
ahead and the frame is dated after the restart; such frames are covered by a mark kept in the
state directory: before rctld acts on a frame dated later than both its own clock and the mark,
it writes a mark STEP seconds past that frame (so at most a write every STEP seconds, and only
while some peer's clock runs ahead), and the next run starts its floor at that mark. The price:
after a restart, frames are refused until the mark passes, which is only longer than the
restart itself when a peer's clock ran ahead by more than that (rctld logs it at start).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

import trio

from ranch.ctld import logs
from ranch.protocol import durable

MARK_FILE = "replay_mark"
STEP = 0.5


class ReplayMark:
    def __init__(self, state_dir: str | None, window: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = os.path.join(state_dir, MARK_FILE) if state_dir else None
        self.clock = clock
        now = clock()
        # A mark further ahead than any frame the last run could accept (its clock was wrong
        # then) would lock every peer out: it counts at most one window past now.
        self.written = min(self._load(), now + window + STEP)
        self.floor = max(now, self.written)
        self._lock: trio.Lock | None = None
        if self.floor > now:
            logs.event("refusing frames signed before the replay mark: a peer's clock ran ahead "
                       "of this host's before the restart", logging.WARNING,
                       for_s=f"{self.floor - now:.1f}", path=self.path)

    def _load(self) -> float:
        if self.path is None:
            return 0.0
        try:
            with open(self.path, encoding="ascii") as f:
                mark = float(f.read().strip() or 0)
        except FileNotFoundError:
            return 0.0
        except (OSError, ValueError) as exc:
            logs.event("replay mark unreadable; using this start as the bound", logging.WARNING,
                       path=self.path, error=str(exc))
            return 0.0
        return mark if mark == mark else 0.0  # NaN

    def needs(self, timestamp: float) -> bool:
        """Whether a frame dated `timestamp` must be covered before it is acted on."""
        return self.path is not None and timestamp > self.written and timestamp > self.clock()

    async def cover(self, timestamp: float) -> None:
        """Write a mark past `timestamp` (one writer at a time; a frame covered meanwhile by
        another writer costs nothing)."""
        if self._lock is None:
            self._lock = trio.Lock()
        async with self._lock:
            if timestamp <= self.written:
                return
            mark = timestamp + STEP
            try:
                await trio.to_thread.run_sync(self._write, mark)
            except OSError as exc:
                # The frame is still served (a state dir that fails is worse news, and the
                # floor still covers every frame signed before the next start); the next try
                # comes a STEP later, so this line cannot flood the log.
                logs.event("replay mark write failed", logging.ERROR, path=self.path,
                           error=str(exc))
            self.written = mark

    def _write(self, mark: float) -> None:
        assert self.path is not None
        durable.write_atomic(self.path, f"{mark:.6f}\n".encode())
