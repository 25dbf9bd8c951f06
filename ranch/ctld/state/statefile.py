"""The controller's saved state: one checksummed JSON file, written crash-safe (temp, fsync,
rename), and beside it the job id mark (ctld/state/store.py writes it), kept with a checksum of
its own so that ids never go back even when the state file and the journal are gone."""

from __future__ import annotations

import os
from functools import partial
from typing import Any

import orjson

from ranch.ctld.state import deferred, integrity
from ranch.ctld.state.integrity import DamagedState

# The durable-write rule lives in protocol/durable.py; the store's modules reach it through here.
from ranch.protocol.durable import write_atomic, write_atomic_by

STATE_FILE = "node_state.json"
NEXT_ID_FILE = "job_id_next"
FORMAT_VERSION = 2  # 2: sealed with a checksum (ctld/state/integrity.py); 1, without, is still read


class StateFileError(DamagedState):
    """The saved state could not be read; the message names the file, the offset and the
    problem."""


def state_path(state_dir: str) -> str:
    return os.path.join(state_dir, STATE_FILE)


def save(state_dir: str, doc: dict[str, Any]) -> None:
    """The state file only: the id mark beside it is the store's (a snapshot's next_id is
    below ids the store has reserved, and must not bring the mark down)."""
    pieces = deferred.pieces({"format": FORMAT_VERSION, **doc})
    write_atomic_by(state_path(state_dir), partial(integrity.write_sealed, pieces))


def load(state_dir: str) -> dict[str, Any] | None:
    """The saved document, or None when there is none yet; StateFileError if it is damaged."""
    path = state_path(state_dir)
    raw = _read(path)
    if raw is None:
        return None
    sealed, problem = integrity.check(raw)
    if problem is not None:
        raise StateFileError(path, 0, problem)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise StateFileError(path, exc.pos, f"not valid JSON ({exc.msg})") from None
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt == FORMAT_VERSION and not sealed:
        raise StateFileError(path, 0, f"format {fmt} without its checksum")
    if fmt not in ((FORMAT_VERSION,) if sealed else (1,)):
        raise StateFileError(path, 0, f"format {fmt!r}, expected {FORMAT_VERSION} (or 1, "
                             "unsealed, from an earlier release)")
    doc.pop("crc", None)
    return doc


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(path, 0, f"cannot be read ({exc.strerror or exc})") from None


def next_id_path(state_dir: str) -> str:
    return os.path.join(state_dir, NEXT_ID_FILE)


def save_next_id(state_dir: str, next_id: int, started: tuple[int, int] | None = None) -> None:
    """Every job id acknowledged is below `next_id` (crash-safe, sealed). `started`: (segment,
    seq) of the newest journal segment and its first record, once that record is on disk: the
    proof that the segment existed (ctld/state/continuity.py)."""
    doc: dict[str, Any] = {"next_id": next_id}
    if started is not None:
        doc["segment"], doc["first_seq"] = started
    write_atomic(next_id_path(state_dir), integrity.seal(orjson.dumps(doc)))


def load_next_id(state_dir: str) -> int:
    """The job id floor kept beside the state file (1 when there is none); StateFileError if
    damaged."""
    mark = load_mark(state_dir)
    return 1 if mark is None else mark[0]


def load_mark(state_dir: str) -> tuple[int, tuple[int, int] | None] | None:
    """(next_id, (segment, first seq) or None) of the id mark, None when there is none;
    StateFileError if damaged."""
    path = next_id_path(state_dir)
    raw = _read(path)
    if raw is None:
        return None
    sealed, problem = integrity.check(raw)
    if not sealed:
        problem = problem or "no checksum"
    if problem is not None:
        raise StateFileError(path, 0, problem)
    try:
        doc = orjson.loads(raw)
        started = (int(doc["segment"]), int(doc["first_seq"])) if "segment" in doc else None
        return int(doc["next_id"]), started
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise StateFileError(path, 0, "not a next-id file") from None
