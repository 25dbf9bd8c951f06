"""The submission journal: every accepted job is on disk before its SubmitReply leaves.

An append-only file of job records (one JSON line each) beside the state file. Submissions that
arrive while a write is under way share the next write and its one fsync (group commit), so the
cost per job falls as the rate rises. Once a state save holds every journalled job the file is
emptied; at start the lines the state file does not hold are replayed (ctld/jobs.py restore).
"""

from __future__ import annotations

import logging
import os

import orjson
import trio

from ctld import logs

JOURNAL_FILE = "job_journal.jsonl"


class Journal:
    def __init__(self, state_dir: str, *, in_thread: bool = True) -> None:
        self.path = os.path.join(state_dir, JOURNAL_FILE)
        self.in_thread = in_thread
        self._buf: list[bytes] = []
        self._appended = 0  # lines handed to commit()
        self._durable = 0  # lines known to be on disk
        self._max_id = 0  # highest job id in the file
        self._pending_max = 0
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
                self._max_id = max(self._max_id, int(entry.get("id", 0)))
        return out

    async def commit(self, records: list[dict]) -> None:
        """Return once `records` are on disk (raises OSError if they could not be written)."""
        if not records:
            return
        self._buf.append(b"".join(orjson.dumps(r) + b"\n" for r in records))
        self._pending_max = max(self._pending_max, *(int(r["id"]) for r in records))
        self._appended += 1
        mine = self._appended
        async with self._lock:
            if self._durable >= mine:
                return  # a write made while we waited for the lock took our line too
            batch, self._buf = b"".join(self._buf), []
            upto, top = self._appended, self._pending_max
            if self.in_thread:
                await trio.to_thread.run_sync(self._write, batch)
            else:
                self._write(batch)
            self._durable = upto
            self._max_id = max(self._max_id, top)

    def _write(self, data: bytes) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        self.writes += 1

    async def trim(self, saved_next_id: int) -> None:
        """A state save holding every job below `saved_next_id` is on disk: empty the file if
        it holds nothing newer (else keep it; replay skips what the state file has)."""
        async with self._lock:
            if self._max_id == 0 or self._max_id >= saved_next_id or self._buf:
                return
            try:
                os.truncate(self.path, 0)
            except FileNotFoundError:
                pass
            except OSError as exc:
                logs.event("job journal not emptied", logging.WARNING, error=str(exc))
                return
            self._max_id = 0
