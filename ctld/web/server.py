"""Runs the HTTP app with hypercorn's trio worker as one task of rctld's nursery."""

from __future__ import annotations

import logging
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from ctld import logs
from ctld.web.app import build_app


def bind_of(listen: str) -> str:
    """hypercorn's bind for HttpListen (an empty host is every IPv4 address)."""
    host, _, port = listen.rpartition(":")
    return f"{host or '0.0.0.0'}:{port}"


async def serve_http(cluster: Any, settings: Any,
                     task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled; task_status gets the URLs it listens on."""
    config = Config()
    config.bind = [bind_of(settings.listen)]
    config.accesslog = None
    config.errorlog = logging.getLogger("ranch.http")
    config.graceful_timeout = 1.0
    app = build_app(cluster, settings)
    problem = app.state.web.tokens.problem()
    if problem is not None and settings.token_file:
        logs.event("HTTP writes disabled until the token file is fixed", logging.ERROR,
                   error=problem)
    try:
        await serve(app, config, task_status=task_status)  # type: ignore[arg-type]
    except OSError as exc:
        logs.event("HTTP cannot listen", logging.ERROR, addr=settings.listen,
                   error=exc.strerror or str(exc))
        raise
