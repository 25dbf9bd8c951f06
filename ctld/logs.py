"""rctld logging: text or JSON lines on stderr; one line per node state change and per rejection."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

LOGGER_NAME = "rctld"
log = logging.getLogger(LOGGER_NAME)


class TextFormatter(logging.Formatter):
    """`2026-11-21T08:00:00Z INFO message key=value ...`"""

    _second = -1
    _stamp = ""

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:  # a burst of lines shares one formatted second
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        line = f"{self._stamp}Z {record.levelname} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, msg, plus the record's structured `fields`."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            obj.update(fields)
        if record.exc_info:
            obj["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(obj, default=str).decode()


def setup(fmt: str = "text", level: int = logging.INFO) -> None:
    """Send rctld's log to stderr in the chosen format (text | json)."""
    # Neither format shows the caller, thread or process: logging would otherwise walk the
    # stack and look them up for every line (a line per submission; docs/benchmarks.md).
    logging._srcfile = None  # the documented switch (logging HOWTO, "Optimization")
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False


def event(msg: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log `msg` with structured fields (shown as key=value in text, as keys in JSON)."""
    if not log.isEnabledFor(level):
        return
    text = msg
    if fields:
        text += " " + " ".join(f"{k}={_text_value(v)}" for k, v in fields.items())
    log.log(level, text, extra={"fields": {"event": msg, **fields}})


def state_change(node: str, old: str, new: str, cause: str, reason: str | None) -> None:
    """`node=gpu01 old=IDLE new=IDLE+DRAIN cause=admin:alice "bad fan"`"""
    if not log.isEnabledFor(logging.INFO):
        return
    text = f"node={node} old={old} new={new} cause={cause}"
    if reason:
        text += " " + _quote(reason)
    fields = {"event": "state_change", "node": node, "old": old, "new": new, "cause": cause}
    if reason:
        fields["reason"] = reason
    log.info(text, extra={"fields": fields})


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _text_value(value: Any) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        return _quote(text.replace("\n", "\\n"))
    return text
