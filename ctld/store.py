"""The one store for everything rctld persists: a snapshot (the state file) and a journal of the
records that changed since it. Whatever a reply confirms is in the journal before the reply
leaves; a snapshot, written now and then, lets the journal be trimmed.

Store is the interface; FileStore (files in StateSaveLocation) is the default. A replicated store
(etcd behind a standby controller) is meant to sit behind the same four calls: `load` once at
start, `append` + `wait` for each group of changes (group commit: records that arrive while a
write is under way share the next write and its one fsync), `snapshot` now and then.

Journal records are dicts with a sequence number `seq` and one of: `job` (a job's record; a job's
first line holds its request, later ones only what changes) or `node` + `entry` (a node's entry
as the state file holds it). A snapshot names the last `seq` it holds (`journal_seq`); at start
the records after it are laid over it in order, so a record never rolls a newer snapshot back.
Lines of the version-4 submission journal (a job's record, no `seq`) are read too.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

import orjson
import trio

from ctld import logs, statefile

JOURNAL_FILE = "job_journal.jsonl"


class Store(Protocol):
    def load(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """(the snapshot or None, the journal records after it, oldest first)."""

    def append(self, records: list[dict[str, Any]]) -> int:
        """Queue records for the next write; returns the ticket `wait` takes."""

    async def wait(self, ticket: int) -> None:
        """Return once the records of `ticket` (and all before) are durable; OSError if not."""

    async def snapshot(self, doc: dict[str, Any]) -> None:
        """Write a snapshot (built by the caller after `last_seq` was read) and trim."""


class FileStore:
    """node_state.json (atomic replace) + job_journal.jsonl (append, fsync), in one directory."""

    def __init__(self, state_dir: str, *, in_thread: bool = True) -> None:
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, JOURNAL_FILE)
        self.in_thread = in_thread
        self.seq = 0  # the last sequence number handed out
        self._buf: list[bytes] = []
        self._appended = 0  # tickets handed out
        self._settled = 0  # tickets whose write has ended (on disk, or in a failed range)
        self._failed: list[tuple[int, int, OSError]] = []  # (after, upto] tickets not written
        self._lock = trio.Lock()
        self.writes = 0  # fsyncs done (for the benchmark)

    # -- start -----------------------------------------------------------------------------

    def load(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """Raises statefile.StateFileError for an unreadable snapshot (the caller decides)."""
        lines = self.read()
        doc = statefile.load(self.state_dir)
        after = int(doc.get("journal_seq", 0)) if doc else 0
        self.seq = max([after, *(int(r.get("seq", 0)) for r in lines)])
        return doc, [r for r in lines if "seq" not in r or int(r["seq"]) > after]

    def read(self) -> list[dict[str, Any]]:
        """The journal's records, oldest first; a torn last line is skipped."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            logs.event("journal unreadable", logging.ERROR, path=self.path,
                       error=exc.strerror or str(exc))
            return []
        out = []
        for line in raw.splitlines():
            if not line.strip():
                continue
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                logs.event("torn journal line skipped", logging.WARNING, path=self.path)
                continue
            if isinstance(entry, dict):
                out.append(entry)
        return out

    # -- group commit ----------------------------------------------------------------------

    @property
    def last_ticket(self) -> int:
        return self._appended

    def settled(self, ticket: int) -> bool:
        return self._settled >= ticket

    def append(self, records: list[dict[str, Any]]) -> int:
        lines = []
        for rec in records:
            self.seq += 1
            lines.append(orjson.dumps({"seq": self.seq, **rec}) + b"\n")
        self._buf.append(b"".join(lines))
        self._appended += 1
        return self._appended

    async def wait(self, ticket: int) -> None:
        if self._settled >= ticket and not self._failed:
            return
        async with self._lock:
            if self._settled < ticket:
                await self._flush()
            # the write that took our records may have been another waiter's: its failure is ours
            for low, high, exc in self._failed:
                if low < ticket <= high:
                    raise exc

    async def commit(self, records: list[dict[str, Any]]) -> None:
        await self.wait(self.append(records))

    async def _flush(self) -> None:
        batch, self._buf = b"".join(self._buf), []
        low, high = self._settled, self._appended
        try:
            await self._run(self._write, batch)
        except OSError as exc:
            # every waiter with a record in this batch is refused, not only the one that wrote
            self._failed.append((low, high, exc))
            del self._failed[:-16]  # waiters of older batches have long been answered
            raise
        finally:
            self._settled = high

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.in_thread:
            return await trio.to_thread.run_sync(fn, *args)
        return fn(*args)

    def _write(self, data: bytes) -> None:
        if not data:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            size = os.fstat(fd).st_size
            try:
                statefile.write_all_fsync(fd, data)
            except OSError:
                # a half-written batch would replay changes whose replies said "failed"
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
        self.writes += 1

    # -- snapshots -------------------------------------------------------------------------

    async def snapshot(self, doc: dict[str, Any]) -> None:
        """Write the snapshot `doc` (its journal_seq says what it holds), then drop the journal
        records it holds. OSError when the snapshot could not be written."""
        await self._run(statefile.save, self.state_dir, doc)
        upto = int(doc.get("journal_seq", 0))
        async with self._lock:
            try:
                await self._run(self._trim, upto)
            except OSError as exc:
                logs.event("journal not trimmed", logging.WARNING, error=str(exc))

    def _trim(self, upto: int) -> None:
        """In the writing thread: keep only the records after `upto` (and none of the old
        submission lines, which every snapshot since holds)."""
        kept = [e for e in self.read() if int(e.get("seq", 0)) > upto]
        if kept:
            statefile.write_atomic(self.path, b"".join(orjson.dumps(e) + b"\n" for e in kept))
        else:
            with contextlib.suppress(FileNotFoundError):
                os.truncate(self.path, 0)
