"""ranch.protocol.durable: the one durable-write rule (the whole new file or the old one, nothing
left over)."""

from __future__ import annotations

import os

import pytest

from ranch.protocol import durable


def test_replaces_the_file_whole_and_leaves_no_temporary(tmp_path) -> None:
    path = tmp_path / "state.json"
    durable.write_atomic(path, b"one")
    durable.write_atomic(path, b"two")
    assert path.read_bytes() == b"two"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_create_only_never_replaces_what_is_there(tmp_path) -> None:
    path = tmp_path / "ranch.key"
    durable.write_atomic(path, b"first", replace=False)
    with pytest.raises(FileExistsError):
        durable.write_atomic(path, b"second", replace=False)
    assert path.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ranch.key"]


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch) -> None:
    path = tmp_path / "spool.json"
    durable.write_atomic(path, b"old")

    def full(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(durable, "write_all", full)
    with pytest.raises(OSError, match="No space"):
        durable.write_atomic(path, b"new")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool.json"]


def test_pieces_are_written_in_order_as_one_file(tmp_path) -> None:
    path = tmp_path / "state.json"
    body = b"x" * 100_000
    durable.write_atomic(path, (b"head,", memoryview(body)[1:], b""))
    assert path.read_bytes() == b"head," + body[1:]
