"""The one log format of both daemons (UTC text or JSON lines) and a log file reopened on signal."""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, TextIO

import orjson


class TextFormatter(logging.Formatter):
    """`2026-11-21T08:00:00Z INFO message key=value ...` (a library's logger: `name: message`)."""

    _second = -1
    _stamp = ""

    def __init__(self, own: str) -> None:
        super().__init__()
        self.own = own  # the daemon's own logger, whose lines carry no name

    def format(self, record: logging.LogRecord) -> str:
        name = "" if record.name == self.own else f"{record.name}: "
        line = self.line(record.created, record.levelname, name + record.getMessage(), None)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line

    def line(self, created: float, levelname: str, msg: str,
             fields: dict[str, Any] | None) -> str:
        """A line of the daemon's own logger (no name shown; `fields` are in `msg` already)."""
        second = int(created)
        if second != self._second:  # a burst of lines shares one formatted second
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}Z {levelname} {msg}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts (Unix seconds), level, msg, plus the record's `fields`."""

    def __init__(self, own: str) -> None:
        super().__init__()
        self.own = own

    def format(self, record: logging.LogRecord) -> str:
        return self.line(record.created, record.levelname, record.getMessage(),
                         getattr(record, "fields", None),
                         logger=None if record.name == self.own else record.name,
                         exc=self.formatException(record.exc_info) if record.exc_info else None)

    def line(self, created: float, levelname: str, msg: str, fields: dict[str, Any] | None,
             *, logger: str | None = None, exc: str | None = None) -> str:
        obj: dict[str, Any] = {"ts": round(created, 3), "level": levelname, "msg": msg}
        if logger is not None:
            obj["logger"] = logger
        if fields:
            obj.update(fields)
        if exc is not None:
            obj["exc"] = exc
        return orjson.dumps(obj, default=str).decode()


class LogSink(logging.StreamHandler):
    """stderr, or a file opened for append that `reopen` opens afresh (logrotate's SIGUSR2).
    Not logging's WatchedFileHandler: that one stats the file before every line."""

    def __init__(self, path: str | None) -> None:
        self.path = os.path.abspath(path) if path else None
        super().__init__(self._open() if self.path else sys.stderr)

    def _open(self) -> TextIO:
        assert self.path is not None
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        return os.fdopen(fd, "a", encoding="utf-8", buffering=1)

    def direct(self, logger: logging.Logger, level: int, msg: str,
               fields: dict[str, Any]) -> bool:
        """Write a line of `logger` (the daemon's own, its level already checked) straight to
        the stream, as logging would through the formatter, when this sink is all there is to
        it: no filter, no other handler (a test's caplog), one of our formatters. True when
        done; False: the caller goes through logging. Why: logging's way (a LogRecord of some
        twenty attributes, then handle, filter, callHandlers, emit, format) is 16 functions a
        line, and a controller woken 40 times a second runs each one cold; one line a
        submission, five a job (docs/benchmarks.md, issue 50, fourteenth pass)."""
        if (logger.handlers != [self] or logger.filters or self.filters or level < self.level
                or logger.disabled):
            return False
        fmt = self.formatter
        if not isinstance(fmt, TextFormatter | JsonFormatter):
            return False
        created = time.time()
        self.acquire()  # the formatter's second too, as logging formats under the lock
        try:
            line = fmt.line(created, logging.getLevelName(level), msg, fields)
            stream = self.stream
            stream.write(line + self.terminator)
            stream.flush()
        except Exception:  # as emit does: reported on stderr, never the daemon's end
            self.handleError(logger.makeRecord(logger.name, level, "", 0, msg, (), None))
        finally:
            self.release()
        return True

    def reopen(self) -> None:
        """Open the file again under its name (the old one was rotated away). On failure the
        old file stays in use and the error is raised for the caller to log."""
        if self.path is not None:
            self.retarget(self.path)

    def retarget(self, path: str) -> None:
        """Write to `path` from now on (rnoded: the SlurmdLogFile its controller serves)."""
        was_file = self.path is not None
        self.path = os.path.abspath(path)
        try:
            new = self._open()
        except OSError:
            if not was_file:
                self.path = None
            raise
        self.acquire()
        try:
            old, self.stream = self.stream, new
        finally:
            self.release()
        if was_file:
            old.close()

    def close(self) -> None:
        if self.path is not None:
            self.stream.close()
        super().close()


def setup(logger: logging.Logger, fmt: str, level: int, path: str | None,
          *, own: str | None = None) -> LogSink:
    """Send `logger`'s records (and those of its children) to `path` (None: stderr) in `fmt`
    (text | json); raises OSError if the file cannot be opened."""
    sink = LogSink(path)
    name = own or logger.name
    sink.setFormatter(JsonFormatter(name) if fmt == "json" else TextFormatter(name))
    for old in logger.handlers:
        if isinstance(old, LogSink):
            old.close()
    logger.handlers[:] = [sink]
    logger.setLevel(level)
    return sink
