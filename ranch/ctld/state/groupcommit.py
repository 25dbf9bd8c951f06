"""Group commit, the one rule both stores keep (ctld/state/store.py, ctld/state/etcdstore.py):
tickets, one write for every record appended by the time it runs, and a failed write refused to
every waiter whose records it held."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from ranch.ctld import logs

FAILURES_KEPT = 16  # waiters of older failed batches have long been answered


class GroupCommit:
    """`write()` makes durable everything the store queued so far (OSError if it could not);
    `failure` names the log event of a failed write.

    Who writes: with `on_loop` (a `write` that never yields: FileStore's append and fsync on
    the event loop), the first waiter of a scheduling round, in its own task, after one
    checkpoint; otherwise (etcd's write waits on the network) the committer task, `run`, so
    that no waiter's cancellation can cut a write short."""

    def __init__(self, write: Callable[[], Awaitable[None]], failure: str, *,
                 on_loop: bool = False) -> None:
        self._write = write
        self._failure = failure
        self._on_loop = on_loop
        self._appended = 0  # tickets handed out
        self._settled = 0  # tickets whose write has ended (durable, or in a failed range)
        self._failed: list[tuple[int, int, OSError]] = []  # (after, upto] tickets not written
        self._lock = trio.Lock()
        self._committing = False  # run() runs: waiters hand their write to it
        self._wake = trio.Event()
        self._flushed = trio.Event()

    def ticket(self) -> int:
        """A ticket for what the store has just queued."""
        self._appended += 1
        return self._appended

    @property
    def last_ticket(self) -> int:
        return self._appended

    def settled(self, ticket: int) -> bool:
        return self._settled >= ticket

    async def wait(self, ticket: int) -> None:
        """Return once the records of `ticket` (and all before) are durable; OSError if not."""
        if self._settled >= ticket and not self._failed:
            return
        if self._on_loop and self._settled < ticket:  # settled: only its failure is left to read
            await self._lead(ticket)
        while self._settled < ticket and self._committing:
            flushed = self._flushed
            self._wake.set()
            await flushed.wait()
        if self._settled < ticket:  # else the committer's write took them: no checkpoint
            async with self._lock:
                if self._settled < ticket:
                    await self._flush()
        # the write that took our records may have been another waiter's: its failure is ours
        for low, high, exc in self._failed:
            if low < ticket <= high:
                raise exc

    async def _lead(self, ticket: int) -> None:
        """Write the batch that holds `ticket` from the waiter's own task. The checkpoint lets
        every other task of this scheduling round append its records first, as waking the
        committer did; but the write is made in the next scheduler pass, and the waiter goes on
        to its reply in that same pass (the committer took three: its wake-up, its lock, the
        waiters' wake-up; docs/benchmarks.md, issue 50). The write never yields, so nothing can
        interleave with it or cancel it."""
        await trio.lowlevel.cancel_shielded_checkpoint()
        if self._settled < ticket:
            try:
                await self._flush()
            except OSError:  # logged; every waiter of the batch reads it from self._failed
                pass

    async def run(self) -> None:
        """The committer (in the daemon's nursery): each write takes every record appended by
        the time it runs (the requests of a whole scheduling round share it). With `on_loop`
        the waiters write themselves: it has nothing to do."""
        if self._on_loop:
            return
        self._committing = True
        try:
            while True:
                await self._wake.wait()  # by the time this runs, every waiter of the same
                self._wake = trio.Event()  # scheduling round has appended its records
                async with self._lock:
                    if self._settled < self._appended:
                        try:
                            await self._flush()
                        except OSError:  # logged; the waiters read it from self._failed
                            pass
                flushed, self._flushed = self._flushed, trio.Event()
                flushed.set()
        finally:
            self._committing = False
            self._flushed.set()

    async def _flush(self) -> None:
        low, high = self._settled, self._appended
        try:
            await self._write()
        except OSError as exc:
            logs.event(self._failure, logging.ERROR, error=str(exc))
            # every waiter with a record in this batch is refused, not only the one that wrote
            self._failed.append((low, high, exc))
            del self._failed[:-FAILURES_KEPT]
            raise
        finally:
            self._settled = high
