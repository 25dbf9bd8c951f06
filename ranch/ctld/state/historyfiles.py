"""The job history's files (StateSaveLocation/job_history/jobs.YYYYMMDD.jsonl): one sealed JSON
line per run that reached a final state (ctld/state/journalfile.py), in the file of the UTC day
it ended; a run is known by (job id, restarts). ctld/jobs/history.py keeps them."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from ranch.ctld import logs
from ranch.ctld.state import journalfile
from ranch.ctld.state.integrity import DamagedState

DIR_NAME = "job_history"
PREFIX, SUFFIX = "jobs.", ".jsonl"
RECORD = "job history record"  # what a damaged line is called in rctld's refusal


def key(rec: dict[str, Any]) -> tuple[int, int]:
    """The run a record is of: (job id, restarts)."""
    return int(rec["job_id"]), int(rec.get("restarts") or 0)


def day_of(t: float) -> str:
    return time.strftime("%Y%m%d", time.gmtime(t))


def day_path(directory: str, day: str) -> str:
    return os.path.join(directory, f"{PREFIX}{day}{SUFFIX}")


def read_day(path: str) -> list[dict[str, Any]]:
    """The day's records; a torn last line (an append under way) is left alone. Damage found
    after the start's check is logged in its one line, and the records that check out are
    served."""
    try:
        recs = journalfile.read(path, newest=True, cut=False, what=RECORD)[0]
    except DamagedState as exc:
        logs.event("job history damaged", logging.ERROR, error=str(exc))
        try:
            recs = journalfile.read(path, newest=False, salvage=True)[0]
        except DamagedState:
            return []
    return [r for r in recs if "job_id" in r]
