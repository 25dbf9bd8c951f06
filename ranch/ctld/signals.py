"""rctld's signals, as slurmctld's, and the reopening of its log file (logrotate, SIGHUP)."""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ranch.ctld import logs
from ranch.protocol.logformat import LogSink
from ranch.protocol.sdnotify import Notifier

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2, signal.SIGUSR1,
           signal.SIGPIPE)


async def handle_signals(notifier: Notifier, log_sink: LogSink | None,
                         reconfigure: Callable[[str], Awaitable[Any]],
                         stop: Callable[[], None]) -> None:
    """SIGTERM/SIGINT stop (the daemon saves the state on the way out); SIGHUP reconfigures
    and reopens the log file; SIGUSR2 reopens it (logrotate); SIGUSR1 and SIGPIPE are logged
    and ignored. None ends rctld without a line in its log."""
    with trio.open_signal_receiver(*HANDLED) as sigs:
        async for sig in sigs:
            name = signal.Signals(sig).name
            if sig == signal.SIGHUP:
                logs.event("SIGHUP: reconfiguring, reopening the log")
                notifier.reloading()
                reopen_log(log_sink, name)
                await reconfigure("SIGHUP")
                notifier.ready("reconfigured")
            elif sig == signal.SIGUSR2:
                reopen_log(log_sink, name)
            elif sig in (signal.SIGTERM, signal.SIGINT):
                logs.event("shutting down", signal=name)
                stop()
                return
            else:
                logs.event("signal ignored", logging.WARNING, signal=name)


def reopen_log(log_sink: LogSink | None, why: str) -> None:
    """Reopen the log file by its name; a failure keeps writing to the old one."""
    if log_sink is None or log_sink.path is None:
        logs.event("log on stderr; nothing to reopen", signal=why)
        return
    try:
        log_sink.reopen()
    except OSError as exc:
        logs.event("cannot reopen the log file; writing to the old one", logging.ERROR,
                   path=log_sink.path, error=exc.strerror or str(exc))
        return
    logs.event("log file reopened", path=log_sink.path, signal=why)
