"""The event log's file in the state directory (events.jsonl): one sealed JSON line per kept
event (ctld/state/journalfile.py), appended in batches or rewritten whole from what is kept."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ranch.ctld.state import journalfile
from ranch.protocol import durable

FILE_NAME = "events.jsonl"
RECORD = "event log record"  # what a damaged line is called in rctld's refusal


def write(state_dir: str, batch: list[dict[str, Any]], everything: list[dict[str, Any]] | None
          ) -> int:
    """Append `batch` (or replace the file with `everything`); returns the file's line count
    delta or new count, via the caller. Runs in a worker thread: the records are never mutated
    once logged."""
    path = os.path.join(state_dir, FILE_NAME)
    os.makedirs(state_dir, exist_ok=True)
    if everything is not None:
        durable.write_atomic(path, b"".join(journalfile.encode(r) for r in everything))
        return len(everything)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        size = os.fstat(fd).st_size
        try:
            durable.write_all_fsync(fd, b"".join(journalfile.encode(r) for r in batch))
        except OSError:
            with contextlib.suppress(OSError):  # no torn line for the next append to follow
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)
    return len(batch)
