"""The one store for everything rctld persists: a snapshot (the state file) and a journal of the
records that changed since it. Whatever a reply confirms is in the journal before the reply
leaves; a snapshot, written now and then, lets the journal be trimmed.

Store is the interface (`load` once at start, `append` + `commits.wait` for each group commit,
`snapshot` now and then); FileStore (files in StateSaveLocation) is the default, the etcd store
of a controller pair (ctld/state/etcdstore.py) the other.

Journal records are dicts with a sequence number `seq` and one of: `job` (a job's record; a
job's first line holds its request, later ones only what changes), `node` + `entry` (a node's
entry as the state file holds it), `resv` + `entry` (a reservation's record; null: deleted) or
`acct` (the whole accounting tree, ctld/accounts/). A
snapshot names the last `seq` it holds (`journal_seq`); at start the records after it are laid
over it in order, so a record never rolls a newer snapshot back. Lines of the version-4
submission journal (a job's record, no `seq`) are read too.

Every journal record and snapshot carries a checksum (ctld/state/integrity.py); a damaged one stops
rctld at start with one line naming the file and offset (ctld/state/journalfile.py), unless it
is the torn last record of the newest segment (a crash mid-append, never acknowledged), which is cut
off. A file or records that the others prove existed, gone, stop it too (ctld/state/continuity.py:
the journal's numbers run without a gap, the id mark names the newest segment's first record).
`rctld -i` moves damaged files aside and starts without missing ones instead. Records of
earlier releases (no checksum) are taken as they decode.

Job ids never go back, even when the newest segment loses whole records at its end (a cut at
a record boundary reads as a crash before those appends): the id mark (job_id_next) is written
with the group commit that first journals an id at or above it, before any reply, and reserves
ID_BLOCK ids past it, so it is rewritten once a block. A clean stop (`save`) brings it down to
the true next id: no gap. After a crash ids resume at the mark, skipping at most a block (as a
PostgreSQL sequence skips its pre-logged values after a crash).

The journal is a series of segment files (journal.N.jsonl). A snapshot starts a new segment the
moment it is built; once it is on disk the older segments are deleted whole, so trimming never
reads or rewrites what was appended (nor holds up a commit while it does).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

import trio

from ranch.ctld import logs
from ranch.ctld.state import continuity, integrity, journalfile, statefile
from ranch.ctld.state.groupcommit import GroupCommit
from ranch.protocol import durable

LEGACY_JOURNAL = "job_journal.jsonl"  # version 4's submission journal, read at start
SEGMENT_PREFIX, SEGMENT_SUFFIX = "journal.", ".jsonl"
# Job ids reserved past the highest one journaled: one write of the mark (two fsyncs) per block,
# and the most ids a crash skips.
ID_BLOCK = 256


class Store(Protocol):
    # damaged files `load` moved aside, and missing ones it started without (rctld -i); the
    # daemon writes a fresh snapshot at once when there are any, so what was taken from them
    # lives in no journal, and the next start finds the state whole
    moved_aside: list[str]
    ignored: list[str]

    def load(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """(the snapshot or None, the journal records after it, oldest first). Damaged state
        raises integrity.DamagedState (rctld prints it as its one line and stops); it is never
        taken as empty. The snapshot's jobs.next_id is never below an id already given out."""

    # tickets: `commits.wait(ticket)` returns once the records of `ticket` (and all before)
    # are durable, OSError if not; `commits.run` is the committer, where the store has one
    commits: GroupCommit

    def append(self, records: list[dict[str, Any]]) -> int:
        """Queue records for the next write; returns the ticket `commits.wait` takes."""

    async def snapshot(self, doc: dict[str, Any]) -> None:
        """Write a snapshot (built by the caller after `last_seq` was read) and trim."""


class FileStore:
    """node_state.json (atomic replace) + job_journal.jsonl (append, fsync), in one directory."""

    def __init__(self, state_dir: str, *, in_thread: bool = True,
                 ignore_damaged: bool = False) -> None:
        self.state_dir = state_dir
        self.ignore_damaged = ignore_damaged  # rctld -i: damaged files are moved aside
        self.moved_aside: list[str] = []  # where they went (load)
        self.segment = 1 + max(self._segments(), default=0)  # appends go here
        self.in_thread = in_thread
        self.seq = 0  # the last sequence number handed out
        self._buf: list[bytes] = []
        # group commit (ctld/state/groupcommit.py): `append` hands out its tickets, callers
        # wait on them, and the first waiter of a scheduling round writes. The write is made
        # on the event loop: a thread per write cost more CPU than the fsync itself
        # (docs/internals.md, issue 24 figures), and a disk that stalls is a controller stall,
        # which rctld's stall detection already answers.
        self.commits = GroupCommit(self._flush, "journal write failed", on_loop=True)
        self.writes = 0  # fsyncs done (for the benchmark)
        self._open: tuple[str, int, int] | None = None  # (segment, fd, its size)
        self._inode = 0
        self.id_mark = 1  # every job id journaled is below it (the next write puts it on disk)
        self._mark_on_disk = 1  # job_id_next: every job id acknowledged is below it
        # (segment, seq): the newest segment and its first record, as the mark names them
        self._started: tuple[int, int] | None = None
        self._flushed_seq = 0  # every record up to it is on disk (or voided: _flush)
        self._sealed_jobs = False  # a sealed segment holds jobs (so the id mark must be there)
        self.ignored: list[str] = []  # what -i started without (missing files, records)

    @property
    def path(self) -> str:
        """The segment appends go to now."""
        return self._segment_path(self.segment)

    def _segment_path(self, n: int) -> str:
        return os.path.join(self.state_dir, f"{SEGMENT_PREFIX}{n}{SEGMENT_SUFFIX}")

    def _segments(self) -> list[int]:
        try:
            names = os.listdir(self.state_dir)
        except OSError:
            return []
        out = []
        for name in names:
            if name.startswith(SEGMENT_PREFIX) and name.endswith(SEGMENT_SUFFIX):
                middle = name[len(SEGMENT_PREFIX):-len(SEGMENT_SUFFIX)]
                if middle.isdigit():
                    out.append(int(middle))
        return sorted(out)

    # -- start -----------------------------------------------------------------------------

    def load(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """Raises integrity.DamagedState (one line: file, offset, what to do) for any damaged
        file, and continuity.MissingState for a file or records the others prove existed
        (ctld/state/continuity.py), unless started to ignore damaged state (-i): then each
        damaged file is moved aside, what checks out in it is taken, what is missing is logged
        and started without, and job ids resume past the highest one seen anywhere."""
        doc = self._attempt(lambda: statefile.load(self.state_dir))
        mark = self._attempt(lambda: statefile.load_mark(self.state_dir))
        started = mark[1] if mark is not None else None
        self._started = started
        segments = self._read_segments(started)
        lines = [r for _name, records in segments for r in records]
        after = int(doc.get("journal_seq", 0)) if doc else 0
        self._check(doc, after, segments, mark)
        floor = mark[0] if mark is not None else 1
        self._mark_on_disk = floor
        if self.moved_aside or self.ignored:
            floor = max(floor, self._highest_id_seen() + 1 + integrity.MARGIN)
            logs.event("damaged or missing state ignored (-i); job ids resume past every id "
                       "seen", logging.WARNING, next_id=floor,
                       moved=" ".join(self.moved_aside) or "-", missing=len(self.ignored))
        self.id_mark = floor
        if floor > 1:
            doc = doc if doc is not None else {}
            jobs = doc.setdefault("jobs", {})
            jobs["next_id"] = max(int(jobs.get("next_id", 1)), floor)
        # past every number the mark proves was taken, even where its records are lost (-i)
        self.seq = max([after, started[1] if started else 0,
                        *(int(r.get("seq", 0)) for r in lines)])
        self._flushed_seq = self.seq
        return doc, continuity.without_voided(
            [r for r in lines if "seq" not in r or int(r["seq"]) > after])

    def _check(self, doc: dict[str, Any] | None, after: int,
               segments: list[tuple[str, list[dict[str, Any]]]],
               mark: tuple[int, tuple[int, int] | None] | None) -> None:
        """What the files prove about each other: the first thing missing is refused, unless
        -i (then each is logged at ERROR and started without)."""
        for missing in continuity.in_state_dir(self.state_dir, doc, after, segments, mark,
                                                self._sealed_jobs, self._segment_path):
            if not self.ignore_damaged:
                raise missing
            self.ignored.append(missing.what)
            logs.event("MISSING STATE IGNORED (-i): starting without it", logging.ERROR,
                       missing=missing.what)

    def _attempt(self, fn: Callable[[], Any]) -> Any:
        """fn(); a damaged file is refused, or with -i moved aside (None is returned then)."""
        try:
            return fn()
        except integrity.DamagedState as exc:
            if not self.ignore_damaged:
                raise
            self._set_aside(exc)
            return None

    def _set_aside(self, exc: integrity.DamagedState) -> str:
        aside = journalfile.set_aside(exc)
        self.moved_aside.append(aside)
        return aside

    def _highest_id_seen(self) -> int:
        """Every job id written in the state directory, damaged files included."""
        top = 0
        for root, _dirs, files in os.walk(self.state_dir):
            for name in files:
                with contextlib.suppress(OSError), open(os.path.join(root, name), "rb") as f:
                    top = max(top, integrity.highest_id(f.read()))
        return top

    def read(self) -> list[dict[str, Any]]:
        """The journal's records, oldest first (journalfile.read: strict; only a torn last
        record of the newest segment is dropped)."""
        mark = statefile.load_mark(self.state_dir)
        return [r for _name, records in self._read_segments(mark[1] if mark else None)
                for r in records]

    def _read_segments(self, started: tuple[int, int] | None
                       ) -> list[tuple[str, list[dict[str, Any]]]]:
        """(path, records) of each journal file, oldest first. `started`: the segment the id
        mark names, whose first record is known to have been whole (never a torn tail)."""
        out: list[tuple[str, list[dict[str, Any]]]] = []
        numbered = [(os.path.join(self.state_dir, LEGACY_JOURNAL), -1)]
        numbered += [(self._segment_path(n), n) for n in self._segments()]
        numbered = [(p, n) for p, n in numbered if os.path.exists(p)]
        self._sealed_jobs = False
        for i, (path, n) in enumerate(numbered):
            records, aside = journalfile.read_or_set_aside(
                path, newest=i == len(numbered) - 1, ignore_damaged=self.ignore_damaged,
                what="journal record", proven=started is not None and started[0] == n)
            out.append((path, records))
            if aside is not None:
                self.moved_aside.append(aside)
            elif records and any("job" in r for r in records) and _sealed(path):
                self._sealed_jobs = True
        return out

    # -- group commit ----------------------------------------------------------------------

    def append(self, records: list[dict[str, Any]]) -> int:
        lines = []
        top = 0
        for rec in records:
            self.seq += 1
            line = journalfile.encode({"seq": self.seq, **rec})
            lines.append(line)
            if "job" in rec:
                top = max(top, journalfile.job_id(line))
        if top >= self.id_mark:  # reserve the next block in the same write (see _flush)
            self.id_mark = top + 1 + ID_BLOCK
        self._buf.append(b"".join(lines))
        return self.commits.ticket()

    async def commit(self, records: list[dict[str, Any]]) -> None:
        """Append and wait: durable on return (OSError if not)."""
        ticket = self.append(records)
        await self.commits.wait(ticket)

    async def _flush(self) -> None:
        """Everything appended so far, in one write (GroupCommit keeps the tickets). A write
        that fails leaves a void record for the numbers its records took, in front of the next
        write's, so the journal's numbers run without a gap (ctld/state/continuity.py refuses
        one): its changes go back to the change log and are journaled again under new ones."""
        batch, self._buf = b"".join(self._buf), []
        first, upto = self._flushed_seq + 1, self.seq
        mark = self.id_mark if self.id_mark > self._mark_on_disk else 0
        try:  # on the loop, never yielding (GroupCommit's on_loop)
            self._write(batch, self.segment, first, mark)
        except OSError:
            if upto >= first:
                self._buf.insert(0, journalfile.encode({"seq": upto, "void_from": first}))
            raise
        self._flushed_seq = upto
        if mark:
            self._mark_on_disk = max(self._mark_on_disk, mark)

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.in_thread:
            return await trio.to_thread.run_sync(fn, *args)
        return fn(*args)

    def _write(self, data: bytes, segment: int, first: int, mark: int = 0) -> None:
        """Append and fsync, the id `mark` first when one is due (both are durable before any
        reply). The segment stays open between writes (an open and a close per commit cost as
        much CPU as its fsync); a new segment's name is made durable once, and once its first
        records are on disk the mark names it and their first seq (`first`), the proof that
        it existed should it vanish (ctld/state/continuity.py)."""
        if mark:
            statefile.save_next_id(self.state_dir, mark, self._started)
        if not data:
            return
        path = self._segment_path(segment)
        if self._open is None or self._open[0] != path or not self._still_there():
            self.close()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            st = os.fstat(fd)
            self._open = (path, fd, st.st_size)
            self._inode = st.st_ino
            durable.fsync_dir(self.state_dir)
        path, fd, size = self._open
        try:
            durable.write_all_fsync(fd, data)
            if size == 0 and self._started != (segment, first):
                statefile.save_next_id(self.state_dir, mark or self._mark_on_disk,
                                       (segment, first))
                self._started = (segment, first)
        except OSError:
            # a half-written batch would replay changes whose replies said "failed"
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            self.close()  # reopened (and its size read again) by the next write
            raise
        self._open = (path, fd, size + len(data))
        self.writes += 1

    def _still_there(self) -> bool:
        """The open segment is still the file of its name (a stat is far cheaper than an
        open): one removed or replaced under us is opened afresh, as a write always did."""
        try:
            return os.stat(self._open[0]).st_ino == self._inode  # type: ignore[index]
        except OSError:
            return False

    def close(self) -> None:
        """Close the segment kept open for appends."""
        if self._open is not None:
            fd, self._open = self._open[1], None
            with contextlib.suppress(OSError):
                os.close(fd)

    # -- snapshots -------------------------------------------------------------------------

    def save(self, doc: dict[str, Any]) -> None:
        """Write the snapshot `doc` now, in this thread (a clean stop; rctld -i), then bring the
        id mark down to its next id: a clean restart resumes from the true last id. OSError
        when it could not be written (the mark stays where it was)."""
        statefile.save(self.state_dir, doc)
        jobs = doc.get("jobs")
        nxt = jobs.get("next_id") if isinstance(jobs, dict) else None
        if isinstance(nxt, int) and nxt != self._mark_on_disk:
            statefile.save_next_id(self.state_dir, nxt, self._started)
            self.id_mark = self._mark_on_disk = nxt

    def rotate(self) -> int:
        """Start a new segment (when a snapshot is built: every record in the older segments
        is in it); returns the first segment the snapshot does not hold."""
        self.segment += 1
        return self.segment

    async def snapshot(self, doc: dict[str, Any], keep_from: int | None = None,
                       before: Callable[[], None] | None = None,
                       after: Callable[[], None] | None = None) -> None:
        """Write the snapshot `doc` (its journal_seq says what it holds), then delete the
        segments before `keep_from` (from `rotate`, called when `doc` was built). `before`
        runs first, in the same thread (files the snapshot's records point to), `after` once
        the snapshot is on disk (files only older snapshots point to). OSError when the
        snapshot could not be written."""
        if keep_from is None:
            keep_from = self.rotate()
        if before is not None:
            await self._run(before)
        await self._run(statefile.save, self.state_dir, doc)
        if after is not None:
            try:
                await self._run(after)
            except OSError as exc:
                logs.event("job files not removed", logging.WARNING, error=str(exc))
        try:
            await self._run(self._drop_before, keep_from)
        except OSError as exc:
            logs.event("journal not trimmed", logging.WARNING, error=str(exc))

    def _drop_before(self, keep_from: int) -> None:
        """Delete the segments a durable snapshot holds (replay skips their records anyway,
        by seq, should a delete not reach the disk before a crash)."""
        for n in self._segments():
            if n < keep_from:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._segment_path(n))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.state_dir, LEGACY_JOURNAL))


def _sealed(path: str) -> bool:
    """Whether the journal file at `path` is this release's (its records sealed)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(integrity.PREFIX)) == integrity.PREFIX
    except OSError:
        return False
