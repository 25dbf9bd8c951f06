"""The finished-job history racct reads once rctld has let a job go: one JSON line per run that
reached a final state, in one file per UTC day of its end (StateSaveLocation/job_history/
jobs.YYYYMMDD.jsonl), deleted whole once the day is older than PurgeJobAfter.

JobHistory is the interface (a replicated store could later hold the same records); FileHistory
keeps the files. The controller takes records on the event loop (`ended`), and writes, reads
and prunes in a worker thread: `take` hands a batch to `write`, `written` settles it. Until a
run's record is written and fsynced, `unwritten(job_id)` holds the job in memory and in the
snapshot (ctld/jobs/store.py's purge asks). A crash between the write and the next snapshot can
only make the restarted controller offer the record again: records offered at restart are
checked against the day's file before they are written (`verify`), and reads keep one record
per (job id, run) all the same.

Each line is sealed as a journal record is (ctld/state/journalfile.py). At start (`check`) a torn
last line is cut off and logged, and anything else damaged stops rctld in one line naming the
file and offset (rctld -i: moved aside, what checks out in it written back); days of earlier
releases (unsealed lines) are read as they decode.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ranch.ctld import logs
from ranch.ctld.state import journalfile
from ranch.ctld.state.historyfiles import DIR_NAME as DIR_NAME  # the files' layout: there
from ranch.ctld.state.historyfiles import (
    PREFIX,
    RECORD,
    SUFFIX,
    day_of,
    day_path,
    key,
    read_day,
)
from ranch.ctld.state.integrity import DamagedState
from ranch.ctld.wakeup import Wakeup
from ranch.protocol import durable

DAY = 86400


class JobHistory(Protocol):
    def ended(self, rec: Any, verify: bool = False, run: tuple[int, int] | None = None) -> None:
        """A run reached a final state: its record (or its builder), to be written."""

    @property
    def due(self) -> Wakeup:
        """Set whenever a record waits to be written (the writer's wake-up call)."""

    def build_now(self, run: tuple[int, int]) -> None:
        """The record of `run` (job id, restarts), if offered as a builder and not yet taken,
        built now: its job is about to change."""

    def unwritten(self, job_id: int) -> bool:
        """Whether a run of the job still waits for its record to be durable."""

    def take(self) -> list[dict[str, Any]]:
        """The records to write now (they stay unwritten until `written`)."""

    def write(self, batch: list[dict[str, Any]]) -> int:
        """Blocking: append and fsync; OSError when not written."""

    def written(self, batch: list[dict[str, Any]], ok: bool) -> None:
        """The write of `batch` ended: settled, or handed back for the next try."""

    def read(self, since: float | None = None, ids: Iterable[int] = ()) -> list[dict[str, Any]]:
        """Blocking: the records ending at or after `since`, one per (job id, run)."""

    def prune(self, now: float, keep_seconds: float) -> list[str]:
        """Blocking: delete the days older than `keep_seconds`; their names."""

    def check(self, ignore_damaged: bool = False) -> None:
        """Blocking, at start: integrity.DamagedState for a damaged file (see the module)."""


def _day_start(day: str) -> float:
    import calendar

    return float(calendar.timegm(time.strptime(day, "%Y%m%d")))


class FileHistory:
    """Day files in one directory (created on first write, mode 0700)."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self._pending: dict[tuple[int, int], Any] = {}  # a record, or its builder
        self._verify: set[tuple[int, int]] = set()
        self._open = Counter[int]()  # job id -> runs offered and not yet durable
        # closed day files read before: name -> (size, mtime_ns, lowest id, highest id), so a
        # lookup by job id skips the days that cannot hold it
        self._ranges: dict[str, tuple[int, int, int, int]] = {}
        self.records_written = 0
        self.fsyncs = 0
        self.due = Wakeup()  # set when a record waits: wakes Accounting.keep (ctld/jobs/acct.py)

    # -- the event loop's side ---------------------------------------------------------------

    def ended(self, rec: dict[str, Any] | Callable[[], dict[str, Any]], verify: bool = False,
              run: tuple[int, int] | None = None) -> None:
        """`rec` may be a function that builds the record when the batch is taken (so a
        detail set right after the job's end, in the same step, is in it); then `run` is
        its (job id, restarts)."""
        k = run if run is not None else key(rec)  # type: ignore[arg-type]
        if k not in self._pending:
            self._open[k[0]] += 1
        self._pending[k] = rec
        if verify:
            self._verify.add(k)
        self.due.set()

    def build_now(self, run: tuple[int, int]) -> None:
        rec = self._pending.get(run)
        if callable(rec):
            self._pending[run] = rec()

    def unwritten(self, job_id: int) -> bool:
        return self._open.get(job_id, 0) > 0

    @property
    def waiting(self) -> int:
        return len(self._pending)

    def take(self) -> list[dict[str, Any]]:
        batch = []
        for k, rec in self._pending.items():
            if callable(rec):
                rec = rec()
            if k in self._verify:
                rec["_verify"] = True
            batch.append(rec)
        self._pending = {}
        self._verify = set()
        return batch

    def written(self, batch: list[dict[str, Any]], ok: bool) -> None:
        for rec in batch:
            k = key(rec)
            verify = rec.pop("_verify", False)
            if ok or k in self._pending:  # on disk, or a newer record of the run is due
                self._open[k[0]] -= 1
                if self._open[k[0]] <= 0:
                    del self._open[k[0]]
            else:
                self._pending[k] = rec
                if verify:
                    self._verify.add(k)

    # -- the worker thread's side --------------------------------------------------------------

    def path(self, day: str) -> str:
        return day_path(self.dir, day)

    def days(self) -> list[str]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if name.startswith(PREFIX) and name.endswith(SUFFIX):
                day = name[len(PREFIX):-len(SUFFIX)]
                if len(day) == 8 and day.isdigit():
                    out.append(day)
        return sorted(out)

    def write(self, batch: list[dict[str, Any]]) -> int:
        """Append each record to its day's file and fsync each file (and the directory when a
        file is new). Records offered again after a restart are left out when their day's file
        already holds their run. Returns the records written."""
        by_day: dict[str, list[dict[str, Any]]] = {}
        for rec in batch:
            by_day.setdefault(day_of(float(rec.get("end_time") or 0.0)), []).append(rec)
        if not by_day:
            return 0
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        n = 0
        for day, recs in by_day.items():
            path = self.path(day)
            if any(r.get("_verify") for r in recs):
                have = {key(r) for r in read_day(path)}
                recs = [r for r in recs if not (r.get("_verify") and key(r) in have)]
            if not recs:
                continue
            data = b"".join(journalfile.encode({k: v for k, v in r.items() if k != "_verify"})
                            for r in recs)
            new = not os.path.exists(path)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":  # ours must not follow a torn
                    try:  # line (a crash mid-append since `check`): cut it off first
                        journalfile.cut_torn_tail(path, RECORD)
                    except DamagedState as exc:
                        raise OSError(str(exc)) from None
                    size = os.fstat(fd).st_size
                try:
                    durable.write_all_fsync(fd, data)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, size)  # no half record for a reader or a retry
                    raise
            finally:
                os.close(fd)
            if new:
                durable.fsync_dir(self.dir)
            self.fsyncs += 1
            n += len(recs)
        self.records_written += n
        return n

    def check(self, ignore_damaged: bool = False) -> None:
        for day in self.days():
            path = self.path(day)
            recs, aside = journalfile.read_or_set_aside(path, ignore_damaged=ignore_damaged,
                                                        what=RECORD)
            if aside is not None and recs:  # racct still finds what checked out
                durable.write_atomic(path, b"".join(journalfile.encode(r) for r in recs))

    def read(self, since: float | None = None, ids: Iterable[int] = ()) -> list[dict[str, Any]]:
        wanted = frozenset(ids)
        first = day_of(since) if since else ""
        today = day_of(time.time())
        got: dict[tuple[int, int], dict[str, Any]] = {}
        for day in self.days():
            if day < first:
                continue
            path = self.path(day)
            known = self._ranges.get(day)
            stat = None
            with contextlib.suppress(OSError):
                st = os.stat(path)
                stat = (st.st_size, st.st_mtime_ns)
            if (wanted and known is not None and stat == known[:2]
                    and not any(known[2] <= i <= known[3] for i in wanted)):
                continue
            try:
                recs = read_day(path)
            except OSError as exc:
                logs.event("job history file unreadable", logging.WARNING, path=path,
                           error=exc.strerror or str(exc))
                continue
            if stat is not None and day < today and recs:
                ids_here = [int(r["job_id"]) for r in recs]
                ids_here += [int(r["array_job_id"]) for r in recs if r.get("array_job_id")]
                self._ranges[day] = (*stat, min(ids_here), max(ids_here))
            for rec in recs:
                if wanted and rec["job_id"] not in wanted and rec.get("array_job_id") not in wanted:
                    continue
                if since and float(rec.get("end_time") or 0.0) < since:
                    continue
                got[key(rec)] = rec  # a record written twice (see the module's note) counts once
        return list(got.values())

    def prune(self, now: float, keep_seconds: float) -> list[str]:
        cutoff = now - keep_seconds
        gone = []
        for day in self.days():
            if _day_start(day) + DAY <= cutoff:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path(day))
                self._ranges.pop(day, None)
                gone.append(day)
        return gone
