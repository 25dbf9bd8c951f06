"""The event log and the job history are sealed as the journal is (ctld/state/journalfile.py,
issue 30):
a torn last line is cut off and logged, a cut, garbage or random bytes anywhere else are refused
naming the file and offset, -i moves the file aside and keeps what checks out, and the unsealed
files of an earlier release still load."""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import pytest

from ranch.ctld.jobs import history
from ranch.ctld.jobs.history import FileHistory
from ranch.ctld.nodes import eventlog
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.state.integrity import DamagedState

DAY = "20260101"
END = 1767268800.0  # 2026-01-01 12:00 UTC


def _events(tmp_path: Path, n: int = 5) -> Path:
    log = EventLog(max_events=100, max_age=10**10)
    for i in range(n):
        log.add("state", f"n{i}", reason=f"r{i}")
    eventlog.flush(log, str(tmp_path))
    return tmp_path / eventlog.FILE_NAME


def _history(tmp_path: Path, n: int = 5) -> tuple[FileHistory, Path]:
    h = FileHistory(str(tmp_path / history.DIR_NAME))
    for i in range(1, n + 1):
        h.ended({"job_id": i, "restarts": 0, "state": "COMPLETED", "end_time": END})
    batch = h.take()
    h.write(batch)
    h.written(batch, ok=True)
    return h, Path(h.path(DAY))


def _offsets(data: bytes) -> list[int]:
    return [0] + [i + 1 for i, b in enumerate(data[:-1]) if b == 0x0A]


def _damage(path: Path, how: str) -> tuple[int, str]:
    """Damage the third line of `path` (lines follow it): its offset and the problem named."""
    data = path.read_bytes()
    at = _offsets(data)[2]
    if how == "cut":  # a line cut short with its newline kept: lines follow, so no torn tail
        end = data.index(b"\n", at)
        path.write_bytes(data[:at + 40] + data[end:])
        return at, "checksum mismatch"
    if how == "garbage":
        path.write_bytes(data[:at] + b"garbage\n" + data[at:])
        return at, "not a JSON record"
    path.write_bytes(data[:at + 30] + os.urandom(8).replace(b"\n", b"x") + data[at + 38:])
    return at, "checksum mismatch"


def _load(tmp_path: Path, ignore: bool = False) -> EventLog:
    log = EventLog(max_events=100, max_age=10**10)
    log.load(str(tmp_path), ignore)
    return log


def test_event_lines_are_sealed_and_a_torn_last_one_is_cut_off(tmp_path, caplog) -> None:
    path = _events(tmp_path)
    whole = path.read_bytes()
    assert all(line.startswith(b'{"crc":"') for line in whole.splitlines())
    path.write_bytes(whole + whole.splitlines(keepends=True)[0][:25])  # a crash mid-append
    assert [e["node"] for e in _load(tmp_path).query()] == [f"n{i}" for i in range(5)]
    assert path.read_bytes() == whole  # whole again for the next append
    assert "torn last record dropped" in caplog.text


@pytest.mark.parametrize("how", ["cut", "garbage", "random"])
def test_damage_inside_the_event_log_is_refused_at_its_offset(tmp_path, how) -> None:
    path = _events(tmp_path)
    at, problem = _damage(path, how)
    before = path.read_bytes()
    with pytest.raises(DamagedState) as err:
        _load(tmp_path)
    assert (err.value.path, err.value.offset) == (str(path), at)
    assert str(err.value).startswith(
        f"damaged state: {path} at byte {at}: event log record {problem}. Nothing was changed")
    assert path.read_bytes() == before


def test_ignore_damaged_moves_the_event_log_aside_and_keeps_what_checks_out(tmp_path) -> None:
    path = _events(tmp_path)
    _damage(path, "random")
    damaged = path.read_bytes()
    log = _load(tmp_path, ignore=True)
    assert [e["node"] for e in log.query()] == ["n0", "n1", "n3", "n4"]
    [aside] = tmp_path.glob(eventlog.FILE_NAME + ".damaged-*")
    assert aside.read_bytes() == damaged and not path.exists()
    eventlog.flush(log, str(tmp_path))  # the flusher writes what was taken to a new file
    assert [e["node"] for e in _load(tmp_path).query()] == ["n0", "n1", "n3", "n4"]


def test_an_unsealed_event_log_of_an_earlier_release_loads(tmp_path) -> None:
    path = _events(tmp_path)
    path.write_bytes(re.sub(rb'(?m)^\{"crc":"[0-9a-f]{8}",', b"{", path.read_bytes()))
    assert len(_load(tmp_path).query()) == 5


def test_history_lines_are_sealed_and_a_torn_last_one_is_cut_at_start(tmp_path) -> None:
    h, path = _history(tmp_path)
    whole = path.read_bytes()
    assert all(line.startswith(b'{"crc":"') for line in whole.splitlines())
    path.write_bytes(whole + b'{"crc":"0000')
    assert len(h.read()) == 5  # a reader leaves an append under way alone
    h.check()
    assert path.read_bytes() == whole


def test_a_torn_history_line_left_by_a_crash_is_cut_before_the_next_append(tmp_path) -> None:
    h, path = _history(tmp_path, 2)
    path.write_bytes(path.read_bytes() + b'{"crc":"0000')
    h.ended({"job_id": 3, "restarts": 0, "state": "FAILED", "end_time": END})
    batch = h.take()
    h.write(batch)
    h.check()  # nothing torn or damaged left behind
    assert sorted(r["job_id"] for r in h.read()) == [1, 2, 3]


@pytest.mark.parametrize("how", ["cut", "garbage", "random"])
def test_damage_inside_a_history_day_is_refused_at_start_at_its_offset(
        tmp_path, how, caplog) -> None:
    h, path = _history(tmp_path)
    at, problem = _damage(path, how)
    before = path.read_bytes()
    with pytest.raises(DamagedState) as err:
        h.check()
    assert (err.value.path, err.value.offset, err.value.what) == (
        str(path), at, f"job history record {problem}")
    assert path.read_bytes() == before
    # found later by a reader: logged in its one line, what checks out is still served
    assert sorted(r["job_id"] for r in h.read()) == ([1, 2, 4, 5] if how != "garbage"
                                                      else [1, 2, 3, 4, 5])
    assert f"{path} at byte {at}" in caplog.text


def test_ignore_damaged_moves_a_history_day_aside_and_writes_back_what_checks_out(
        tmp_path) -> None:
    h, path = _history(tmp_path)
    _damage(path, "random")
    h.check(ignore_damaged=True)
    [aside] = path.parent.glob(path.name + ".damaged-*")
    assert aside.exists()
    h.check()  # the day rewritten is whole
    assert sorted(r["job_id"] for r in FileHistory(h.dir).read()) == [1, 2, 4, 5]


def test_an_unsealed_history_day_of_an_earlier_release_loads(tmp_path) -> None:
    h, path = _history(tmp_path)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in h.read()))
    h.check()
    assert len(FileHistory(h.dir).read()) == 5
