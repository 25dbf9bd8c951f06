"""The controller's saved state: one JSON file, written crash-safe (temp, fsync, rename)."""

from __future__ import annotations

import os
from typing import Any

import orjson

STATE_FILE = "node_state.json"
FORMAT_VERSION = 1


class StateFileError(Exception):
    """The saved state could not be read; the message names the file and the problem."""


def state_path(state_dir: str) -> str:
    return os.path.join(state_dir, STATE_FILE)


def write_all_fsync(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (os.write may take less than asked), then fsync."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def write_atomic(path: str, data: bytes) -> None:
    """Replace `path` by `data` so that a crash leaves either the old or the new file, whole."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all_fsync(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)  # make the rename itself durable


def fsync_dir(directory: str) -> None:
    """Make the names in `directory` (a file created or renamed there) durable."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save(state_dir: str, doc: dict[str, Any]) -> None:
    body = {"format": FORMAT_VERSION, **doc}
    write_atomic(state_path(state_dir), orjson.dumps(body))


def load(state_dir: str) -> dict[str, Any] | None:
    """The saved document, or None when there is none yet."""
    path = state_path(state_dir)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"cannot read state file {path}: {exc.strerror}") from None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise StateFileError(f"state file {path} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION:
        raise StateFileError(
            f"state file {path} has format {doc.get('format') if isinstance(doc, dict) else '?'}"
            f", expected {FORMAT_VERSION}"
        )
    return doc
