"""What the saved state's files prove about each other at start: a file, or journal records, that
another one proves existed and that are gone stop rctld in one line, never a silent restart."""

# The proofs (docs/ha.md, "What is checked at start"):
# - journal records run without a gap from the snapshot's journal_seq + 1 to the last one (a
#   failed write leaves a void record for the numbers it had taken: ctld/state/store.py);
# - the journal reaches the first record of the newest segment, which the id mark names once
#   that record is on disk (so a segment deleted or emptied whole is seen even when newest);
# - the id mark is there when sealed state holds jobs (this release writes it before any);
# - node_credentials.json is there when the snapshot names nodes that hold credentials.

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from ranch.ctld.state import statefile
from ranch.ctld.state.integrity import DamagedState

CREDENTIALS_FILE = "node_credentials.json"  # ctld/rpc/nodecredentials.py writes it
NAMES_SHOWN = 5


class MissingState(DamagedState):
    """State that the other files prove existed is gone; str() is rctld's one line."""

    def __init__(self, path: str, what: str) -> None:
        self.path, self.offset, self.what = path, 0, what
        Exception.__init__(
            self, f"missing state: {what}. Nothing was changed; restore it from a backup, or "
            "start rctld with -i (--ignore-damaged-state) to start without it")


def in_state_dir(state_dir: str, doc: dict[str, Any] | None, after: int,
                 segments: list[tuple[str, list[dict[str, Any]]]],
                 mark: tuple[int, tuple[int, int] | None] | None, sealed_jobs: bool,
                 segment_path: Callable[[int], str]) -> list[MissingState]:
    """Everything missing from a FileStore's directory: `doc` the snapshot (None: none), `after`
    its journal_seq, `segments` (path, records) oldest first, `mark` the id mark as
    statefile.load_mark reads it, `sealed_jobs` whether a sealed segment holds jobs."""
    started = mark[1] if mark is not None else None
    credentials = os.path.join(state_dir, CREDENTIALS_FILE)
    found = [
        journal_gap(after, segments,
                    None if started is None else (segment_path(started[0]), started[1]),
                    statefile.state_path(state_dir), doc is not None),
        None if mark is not None else mark_missing(
            doc, sealed_jobs, statefile.next_id_path(state_dir)),
        credentials_missing(doc, os.path.exists(credentials), credentials),
    ]
    return [f for f in found if f is not None]


def journal_gap(after: int, segments: Iterable[tuple[str, list[dict[str, Any]]]],
                started: tuple[str, int] | None, snapshot: str,
                have_snapshot: bool) -> MissingState | None:
    """The first hole in the journal: `after` is the snapshot's journal_seq (0: none),
    `segments` (name, records) oldest first, `started` (name, seq): the newest segment and its
    first record as the id mark names them, `snapshot` the snapshot's path (`have_snapshot`:
    it is there)."""
    need = after + 1  # the next record the journal must hold
    prev: str | None = None
    for name, records in segments:
        for rec in records:
            if "seq" not in rec:
                continue  # version 4's submissions: no numbers to follow
            seq = int(rec["seq"])
            low = int(rec.get("void_from", seq))
            if seq < need:
                continue  # the snapshot holds it (a segment not trimmed yet)
            if low > need:
                return MissingState(*_hole(need, low - 1, prev, name, after, snapshot,
                                           have_snapshot))
            need = seq + 1
        prev = name if records else prev
    if started is not None and started[1] >= need:
        name, first = started
        return MissingState(
            name, f"{name} is missing or lost its records: the id mark says it was started "
            f"with record {first}, and the journal "
            f"{_ends(need - 1, prev, after, snapshot if have_snapshot else None)}")
    return None


def _hole(low: int, high: int, prev: str | None, name: str, after: int, snapshot: str,
          have_snapshot: bool) -> tuple[str, str]:
    """(the path of what is missing, the words)."""
    span = (f"journal record {low} is" if low == high
            else f"journal records {low}-{high} are")
    if prev is not None and prev != name:
        return name, (f"{span} missing: the journal jumps from {prev} to {name} (a segment "
                      "between them deleted or emptied)")
    if prev == name:
        return name, f"{span} missing from the middle of {name}"
    if not have_snapshot:
        return snapshot, (f"{snapshot} (the snapshot) is missing: the journal starts at record "
                          f"{high + 1} in {name}, so a snapshot held records 1-{high}")
    return name, (f"{span} missing: {snapshot} holds records up to {after} and the journal "
                  f"resumes at {high + 1} in {name} (a segment deleted or emptied, or the "
                  "snapshot older than the journal)")


def _ends(last: int, prev: str | None, after: int, snapshot: str | None) -> str:
    if prev is not None:
        return f"ends at record {last} in {prev}"
    if snapshot is not None:
        return f"is empty after {snapshot}'s record {after}"
    return "and the snapshot are empty"


def mark_missing(doc: dict[str, Any] | None, sealed_jobs: bool, path: str) -> MissingState | None:
    """The id mark is gone though sealed state shows jobs (this release writes the mark before
    it journals the first job id, and keeps it)."""
    jobs = (doc or {}).get("jobs") or {}
    sealed_doc = doc is not None and doc.get("format") == 2 and int(jobs.get("next_id", 1)) > 1
    if not (sealed_doc or sealed_jobs):
        return None
    proof = "the snapshot" if sealed_doc else "the journal"
    return MissingState(path, f"{path} (the job id mark) is missing, though {proof} holds jobs; "
                        "without it a job id acknowledged before a crash may be given again")


def credentials_missing(doc: dict[str, Any] | None, present: bool,
                        path: str) -> MissingState | None:
    """node_credentials.json is gone though the snapshot names nodes that hold credentials
    (without it any process with the cluster key could register under their names)."""
    holders = list((doc or {}).get("node_credentials") or ())
    if present or not holders:
        return None
    shown = ", ".join(map(str, holders[:NAMES_SHOWN]))
    more = f" and {len(holders) - NAMES_SHOWN} more" if len(holders) > NAMES_SHOWN else ""
    return MissingState(path, f"{path} is missing, though the snapshot says nodes hold "
                        f"credentials ({shown}{more}); without it anyone with the cluster key "
                        "could register under their names")


def without_voided(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records less those a later void record names: a write reported failed (its callers
    refused, a submission retracted) may still have reached the store in part (an etcd flush of
    several transactions, a file write whose fsync failed); replaying such a record would run a
    job its submitter was told was not taken."""
    voids = [(int(r["void_from"]), int(r["seq"]), i) for i, r in enumerate(records)
             if "void_from" in r]
    if not voids:
        return records
    return [r for i, r in enumerate(records)
            if "seq" not in r or "void_from" in r
            or not any(low <= int(r["seq"]) <= high and i < at for low, high, at in voids)]
