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
        second = int(record.created)
        if second != self._second:  # a burst of lines shares one formatted second
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        name = "" if record.name == self.own else f"{record.name}: "
        line = f"{self._stamp}Z {record.levelname} {name}{record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts (Unix seconds), level, msg, plus the record's `fields`."""

    def __init__(self, own: str) -> None:
        super().__init__()
        self.own = own

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "msg": record.getMessage(),
        }
        if record.name != self.own:
            obj["logger"] = record.name
        fields = getattr(record, "fields", None)
        if fields:
            obj.update(fields)
        if record.exc_info:
            obj["exc"] = self.formatException(record.exc_info)
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
