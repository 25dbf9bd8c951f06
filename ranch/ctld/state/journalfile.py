"""A file of sealed JSON lines (a journal segment, the event log, a job history day), read
strictly: every record checks out, or it is refused at its offset."""

# Only a torn last record (no newline after it: a crash in the middle of an append, never
# acknowledged) is dropped, and only in the newest segment or one the last release wrote. Torn
# means the start of a record as an append writes it, after the file's whole records: a last
# line of anything else (garbage, zeros) is damage, and so is a torn first line of a file whose
# first record is known to have been whole (`proven`: the id mark names the segment only once
# its first write is on disk), since nothing is left that an append could have torn.

from __future__ import annotations

import logging
import os
import re
from typing import Any

import orjson

from ranch.ctld import logs
from ranch.ctld.state import integrity
from ranch.ctld.state.integrity import DamagedState
from ranch.protocol.durable import fsync_dir


def encode(rec: dict[str, Any]) -> bytes:
    """One journal line: the record sealed with its checksum (ctld/state/integrity.py)."""
    return integrity.seal(orjson.dumps(rec)) + b"\n"


# a job record as encode writes it: its id is job_json's first key (a decode if it ever is not)
_JOB_ID = re.compile(rb'"seq":\d+,"job":\{"id":(\d+)[,}]')


def job_id(line: bytes) -> int:
    """The job id in `line`, encode's line of a record with a "job" (whose entry may be an
    orjson.Fragment, which cannot be read back)."""
    hit = _JOB_ID.match(line, integrity.HEAD)
    if hit is not None:
        return int(hit.group(1))
    return int(orjson.loads(line)["job"]["id"])


def _decode(line: bytes) -> tuple[dict[str, Any] | None, str]:
    """(the record, "") or (None, what is wrong with it)."""
    sealed, problem = integrity.check(line)
    if problem is not None:
        return None, problem
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None, "not a JSON record"
    if not isinstance(rec, dict):
        return None, "not a JSON object"
    if sealed:
        del rec["crc"]
    return rec, ""


def read(path: str, *, newest: bool, salvage: bool = False, what: str = "journal record",
         cut: bool = True, proven: bool = False) -> tuple[list[dict[str, Any]], int]:
    """(the records of the segment at `path`, the number of bad records skipped). A bad record
    raises DamagedState naming its offset, unless it is the torn last line of the newest
    segment, or of any segment an earlier release wrote (cut off the file, so that the next
    start finds it whole; not `cut`: left there, for a reader while a writer may append), or
    `salvage` (a segment moved aside by -i: every record that checks out is taken)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return [], 0
    except OSError as exc:
        raise DamagedState(path, 0, f"cannot be read ({exc.strerror or exc})") from None
    out: list[dict[str, Any]] = []
    skipped = 0
    sealed = False  # a segment of this release (an earlier one never cut its torn tails)
    at = 0
    size = len(raw)
    while at < size:
        end = raw.find(b"\n", at)
        last = end < 0
        stop = size if last else end
        line = raw[at:stop]
        if line.strip():
            rec, problem = _decode(line)
            if rec is not None:
                out.append(rec)
                sealed = sealed or line.startswith(integrity.PREFIX)
            elif salvage:
                skipped += 1
            elif last and (newest or not sealed) and _torn(line, out, sealed, proven):
                if cut:
                    _cut(path, at, size - at, problem)
                break
            else:
                raise DamagedState(path, at, f"{what} {problem}")
        at = stop + 1
    return out, skipped


def _torn(line: bytes, before: list[dict[str, Any]], sealed: bool, proven: bool) -> bool:
    """Whether the unterminated last `line` can be an append cut short: the start of a sealed
    record (or, in a file without sealed records, as earlier releases wrote, of any JSON
    object), and either whole records before it or a file not known to have held one."""
    if not before and proven:
        return False
    if integrity.PREFIX.startswith(line[:len(integrity.PREFIX)]):
        return True
    return not sealed and line.startswith(b"{")


def read_or_set_aside(path: str, *, ignore_damaged: bool, what: str, newest: bool = True,
                      proven: bool = False) -> tuple[list[dict[str, Any]], str | None]:
    """(read's records, None); a damaged file raises DamagedState unless `ignore_damaged`
    (rctld -i): then it is moved aside, every record in it that checks out is taken, and
    where it went is returned in place of None."""
    try:
        return read(path, newest=newest, what=what, proven=proven)[0], None
    except DamagedState as exc:
        if not ignore_damaged:
            raise
        aside = set_aside(exc)
    records, skipped = read(aside, newest=False, salvage=True)
    logs.event("records taken from a damaged file", logging.WARNING, path=aside,
               records=len(records), bad=skipped)
    return records, aside


def set_aside(exc: DamagedState) -> str:
    """rctld -i: the damaged file of `exc` moved aside (never overwritten); its new name."""
    aside = integrity.move_aside(exc.path)
    fsync_dir(os.path.dirname(exc.path))
    logs.event("damaged state file moved aside (-i)", logging.ERROR, path=exc.path,
               offset=exc.offset, error=exc.what, moved_to=aside)
    return aside


def cut_torn_tail(path: str, what: str) -> None:
    """Before appending to `path`: a torn last record (a crash mid-append) is cut off, so the
    new records never follow it. DamagedState when anything else in it fails its check."""
    read(path, newest=True, what=what)


def _cut(path: str, offset: int, length: int, problem: str) -> None:
    """A crash in the middle of an append left a partial record, never acknowledged (its
    write had no fsync): remove it so the file is whole for every later start."""
    logs.event("torn last record dropped", logging.WARNING, path=path, offset=offset,
               bytes=length, problem=problem)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, offset)
        os.fsync(fd)
    finally:
        os.close(fd)
