"""rnoded logging: the daemons' one format (protocol/logformat.py), on stderr or in --log-file."""

from __future__ import annotations

import logging

from ranch.protocol import logformat
from ranch.protocol.logformat import LogSink


def setup_logging(fmt: str = "text", level: int = logging.INFO,
                  path: str | None = None) -> LogSink:
    """Every logger's records (rnoded's and its libraries') to `path` (None: stderr); raises
    OSError if the file cannot be opened."""
    return logformat.setup(logging.getLogger(), fmt, level, path, own="rnoded")
