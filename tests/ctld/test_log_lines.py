"""rctld's log lines written straight to the sink (LogSink.direct) are the lines logging writes,
and logging still gets every line whenever anything else is attached to the logger."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ranch.ctld import logs
from ranch.protocol.logformat import LogSink

NOW = 1796115164.6514


@pytest.fixture
def rctld_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
    """rctld's logger as a test found it, put back afterwards (logs.setup changes it)."""
    log = logging.getLogger(logs.LOGGER_NAME)
    saved = (log.handlers[:], log.level, log.propagate, log.filters[:])
    monkeypatch.setattr(time, "time", lambda: NOW)  # both ways read the clock through it
    yield log
    for handler in log.handlers:
        if handler not in saved[0]:
            handler.close()
    log.handlers[:], log.level, log.propagate, log.filters[:] = saved  # type: ignore[misc]


def write_both_ways(log: logging.Logger, tmp_path: Path, fmt: str) -> tuple[str, str]:
    """The same lines logged once straight to the sink, once through logging (a filter that
    lets everything by is enough to send them that way)."""
    got = []
    records: list[str] = []
    make = log.makeRecord

    def counted(*args: object, **kwargs: object) -> logging.LogRecord:
        records.append(str(args[4]))
        return make(*args, **kwargs)  # type: ignore[arg-type]

    log.makeRecord = counted  # type: ignore[method-assign]
    for way in ("direct", "logging"):
        path = tmp_path / f"{way}.{fmt}"
        logs.setup(fmt, logging.INFO, str(path))
        if way == "logging":
            assert records == []  # the sink alone: no LogRecord was made for any line
            log.addFilter(lambda record: True)
        logs.event("job submitted", job=12, user="alice", name="a b", partition="debug")
        logs.event("launch refused", logging.WARNING, job=12, why='quote " and = sign')
        logs.state_change("c1", "IDLE", "IDLE+DRAIN", "admin:alice", "bad fan")
        logs.state_change("c2", "DOWN", "IDLE", "registered", None)
        log.filters.clear()
        got.append(path.read_text())
    del log.makeRecord
    assert len(records) == 4  # the second way went through logging
    return got[0], got[1]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_line_written_straight_is_the_line_logging_writes(
        rctld_log: logging.Logger, tmp_path: Path, fmt: str) -> None:
    direct, through_logging = write_both_ways(rctld_log, tmp_path, fmt)
    assert direct == through_logging
    lines = direct.splitlines()
    assert len(lines) == 4
    if fmt == "text":
        assert lines[0] == ("2026-12-01T08:52:44Z INFO job submitted job=12 user=alice "
                            'name="a b" partition=debug')
        assert lines[1].startswith("2026-12-01T08:52:44Z WARNING launch refused job=12 why=")
        assert lines[2] == ('2026-12-01T08:52:44Z INFO node=c1 old=IDLE new=IDLE+DRAIN '
                            'cause=admin:alice "bad fan"')
    else:
        first = orjson.loads(lines[0])
        assert first == {"ts": 1796115164.651, "level": "INFO",
                         "msg": 'job submitted job=12 user=alice name="a b" partition=debug',
                         "event": "job submitted", "job": 12, "user": "alice", "name": "a b",
                         "partition": "debug"}
        assert orjson.loads(lines[2])["reason"] == "bad fan"
        assert "reason" not in orjson.loads(lines[3])


def test_another_handler_on_the_logger_gets_every_line_and_the_sink_too(
        rctld_log: logging.Logger, tmp_path: Path) -> None:
    logs.setup("text", logging.INFO, str(tmp_path / "rctld.log"))
    seen: list[logging.LogRecord] = []
    catcher = logging.Handler()
    catcher.emit = seen.append  # type: ignore[method-assign]
    rctld_log.addHandler(catcher)
    logs.event("job submitted", job=7)
    logs.state_change("c1", "IDLE", "MIXED", "job 7", None)
    assert [r.getMessage() for r in seen] == ["job submitted job=7",
                                              "node=c1 old=IDLE new=MIXED cause=job 7"]
    assert seen[0].fields == {"event": "job submitted", "job": 7}  # type: ignore[attr-defined]
    assert (tmp_path / "rctld.log").read_text().count("\n") == 2


def test_a_sink_above_the_line_s_level_writes_nothing(
        rctld_log: logging.Logger, tmp_path: Path) -> None:
    sink = logs.setup("text", logging.INFO, str(tmp_path / "rctld.log"))
    sink.setLevel(logging.WARNING)
    logs.event("job submitted", job=7)
    logs.event("launch refused", logging.WARNING, job=7)
    assert (tmp_path / "rctld.log").read_text().splitlines() == [
        "2026-12-01T08:52:44Z WARNING launch refused job=7"]


class Broken:
    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_write_that_fails_is_reported_as_logging_reports_it_and_goes_no_further(
        rctld_log: logging.Logger, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sink = logs.setup("text", logging.INFO, str(tmp_path / "rctld.log"))
    assert isinstance(sink, LogSink)
    sink.stream.close()
    sink.stream = Broken()  # type: ignore[assignment]
    logs.event("job submitted", job=7)  # no exception: a full disk is not rctld's end
    err = capsys.readouterr().err
    assert "--- Logging error ---" in err and "No space left on device" in err
    assert "job submitted job=7" in err  # the line it could not write, named
    sink.stream = open(tmp_path / "rctld.log", "a")  # closed by the fixture


def test_a_value_with_a_space_quote_equals_sign_or_newline_is_quoted_and_others_are_not(
        rctld_log: logging.Logger, tmp_path: Path) -> None:
    logs.setup("text", logging.INFO, str(tmp_path / "rctld.log"))
    logs.event("something happened", detail="two\nlines", empty="", n=3, q='a"b', eq="k=v",
               bs="c:\\x", none=None, t=(1, 2))
    logs.event("nothing more")
    assert (tmp_path / "rctld.log").read_text().splitlines() == [
        '2026-12-01T08:52:44Z INFO something happened detail="two\\\\nlines" empty="" n=3 '
        'q="a\\"b" eq="k=v" bs=c:\\x none=None t="(1, 2)"',
        "2026-12-01T08:52:44Z INFO nothing more"]
