"""The submission journal: every accepted job is on disk before its SubmitReply leaves.

An append-only file of job records (one JSON line each) beside the state file. Submissions that
arrive while a write is under way share the next write and its one fsync (group commit), so the
cost per job falls as the rate rises. After each state save the lines it holds are dropped; at
start the lines the state file does not hold are replayed (ctld/jobs.py restore).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

import orjson
import trio

from ctld import logs, statefile

JOURNAL_FILE = "job_journal.jsonl"


class Journal:
    def __init__(self, state_dir: str, *, in_thread: bool = True) -> None:
        self.path = os.path.join(state_dir, JOURNAL_FILE)
        self.in_thread = in_thread
        self._buf: list[bytes] = []
        self._appended = 0  # commits handed to commit()
        self._settled = 0  # commits whose write has ended (on disk, or in a failed range)
        self._failed: list[tuple[int, int, OSError]] = []  # (after, upto] commits not written
        self._max_id = 0  # highest job id in the file
        self._min_id = 0  # lowest job id in the file (0: none)
        self._pending_max = 0
        self._pending_min = 0  # lowest job id waiting in _buf (0: none)
        self._lock = trio.Lock()
        self.writes = 0  # fsyncs done (for the benchmark)

    def read(self) -> list[dict]:
        """The journalled job records, oldest first; a torn last line is skipped."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            logs.event("job journal unreadable", logging.ERROR, path=self.path,
                       error=exc.strerror or str(exc))
            return []
        out = []
        for line in raw.splitlines():
            if not line.strip():
                continue
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                logs.event("torn job journal line skipped", logging.WARNING, path=self.path)
                continue
            if isinstance(entry, dict):
                out.append(entry)
                job_id = int(entry.get("id", 0))
                self._max_id = max(self._max_id, job_id)
                self._min_id = min(self._min_id or job_id, job_id)
        return out

    async def commit(self, records: list[dict]) -> None:
        """Return once `records` are on disk (raises OSError if they could not be written)."""
        if not records:
            return
        self._buf.append(b"".join(orjson.dumps(r) + b"\n" for r in records))
        ids = [int(r["id"]) for r in records]
        self._pending_max = max(self._pending_max, *ids)
        self._pending_min = min(self._pending_min or ids[0], *ids)
        self._appended += 1
        mine = self._appended
        async with self._lock:
            if self._settled < mine:
                await self._flush()
            # the write that took our line may have been another waiter's: its failure is ours
            for low, high, exc in self._failed:
                if low < mine <= high:
                    raise exc

    async def _flush(self) -> None:
        batch, self._buf = b"".join(self._buf), []
        low, high, top, bottom = self._settled, self._appended, self._pending_max, self._pending_min
        self._pending_min = 0
        try:
            await self._run(self._write, batch)
        except OSError as exc:
            # every waiter with a line in this batch is refused, not only the one that wrote it
            self._failed.append((low, high, exc))
            del self._failed[:-16]  # waiters of older batches have long been answered
            raise
        finally:
            self._settled = high
        self._max_id = max(self._max_id, top)
        self._min_id = min(self._min_id or bottom, bottom)

    async def _run(self, fn: Callable[..., None], *args: Any) -> None:
        if self.in_thread:
            await trio.to_thread.run_sync(fn, *args)
        else:
            fn(*args)

    def _write(self, data: bytes) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            size = os.fstat(fd).st_size
            try:
                statefile.write_all_fsync(fd, data)
            except OSError:
                # a half-written batch would replay jobs whose submitters were refused
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
        self.writes += 1

    async def trim(self, saved_next_id: int) -> None:
        """A state save holding every job below `saved_next_id` is on disk: drop those lines,
        keeping the newer ones (so the file stays small under steady submissions)."""
        async with self._lock:
            if self._max_id == 0 or self._min_id >= saved_next_id:
                return
            try:
                await self._run(self._rewrite, saved_next_id)
            except OSError as exc:
                logs.event("job journal not trimmed", logging.WARNING, error=str(exc))

    def _rewrite(self, saved_next_id: int) -> None:
        """In the writing thread: replace the file by its lines with id >= saved_next_id."""
        kept = [e for e in self.read() if int(e.get("id", 0)) >= saved_next_id]
        if kept:
            statefile.write_atomic(self.path, b"".join(orjson.dumps(e) + b"\n" for e in kept))
        else:
            with contextlib.suppress(FileNotFoundError):
                os.truncate(self.path, 0)
        ids = [int(e.get("id", 0)) for e in kept]
        self._max_id = max(ids, default=0)
        self._min_id = min(ids, default=0)
