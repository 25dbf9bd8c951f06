"""rctld logging (protocol/logformat.py): one line per node state change and per rejection."""

from __future__ import annotations

import logging
import re
from typing import Any

from ranch.protocol import logformat
from ranch.protocol.logformat import LogSink

LOGGER_NAME = "rctld"
log = logging.getLogger(LOGGER_NAME)


def setup(fmt: str = "text", level: int = logging.INFO, path: str | None = None) -> LogSink:
    """Send rctld's log to `path` (None: stderr) in the chosen format (text | json); the sink
    it returns reopens the file (SIGUSR2, SIGHUP). Raises OSError if the file cannot be opened."""
    # Neither format shows the caller, thread or process: logging would otherwise walk the
    # stack and look them up for every line (a line per submission; docs/benchmarks.md).
    logging._srcfile = None  # the documented switch (logging HOWTO, "Optimization")
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    sink = logformat.setup(log, fmt, level, path)
    log.propagate = False
    return sink


def event(msg: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log `msg` with structured fields (shown as key=value in text, as keys in JSON)."""
    if not log.isEnabledFor(level):
        return
    text = msg
    for key, value in fields.items():  # a loop, not a generator and a call a value: both
        shown = str(value)  # would be code of their own, fetched cold at each line
        if _PLAIN(shown) is None:
            shown = _quote(shown.replace("\n", "\\n"))
        text += f" {key}={shown}"
    _write(level, text, {"event": msg, **fields})


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
    _write(logging.INFO, text, fields)


def _write(level: int, text: str, fields: dict[str, Any]) -> None:
    """The line straight to the log's sink where that is all there is to the logger
    (LogSink.direct), else through logging (a test's caplog, a handler someone added)."""
    handlers = log.handlers
    if not (handlers and isinstance(sink := handlers[0], LogSink)
            and sink.direct(log, level, text, fields)):
        log.log(level, text, extra={"fields": fields})


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# a value shown as it is: not empty, and none of ' "=' nor a newline in it (one C call, not a
# generator over the four characters: six values a submission); else quoted, newlines as \n
_PLAIN = re.compile('[^ "=\n]+').fullmatch

