"""Runs the HTTP app as one task of rctld's nursery, with a cap on open connections."""

# rctld's own accept loop sits in front of hypercorn's connection handler: hypercorn's serve()
# takes every connection the kernel hands it, so HTTP clients could spend the descriptors the
# journal needs (issue 30). At most `http_cap` are open at once (a quarter of the descriptor
# reserve, ctld/rpc/admission.py); one over it is closed at once, idle ones go after the keep-alive.

from __future__ import annotations

import errno
import logging
from typing import TYPE_CHECKING, Any, cast

import trio
from hypercorn.config import Config
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.utils import repr_socket_addr, wrap_app

from ranch.ctld import logs
from ranch.ctld.rpc.admission import QuietLog, caps_for, fd_limit
from ranch.ctld.web.app import build_app
from ranch.ctld.web.limits import BodyCap

if TYPE_CHECKING:
    from ranch.ctld.site import Site
    from ranch.ctld.web.webports import (
        Health,
        ReservationBook,
        WebAdmin,
        WebDurability,
        WebEvents,
        WebJobs,
        WebNodes,
    )

KEEP_ALIVE = 5.0  # seconds an idle connection is kept (hypercorn's default, said here)
READ_TIMEOUT = 30  # seconds a request may take to arrive whole (a trickle is dropped)
ACCEPT_RETRY = 0.1  # seconds to wait when the descriptor table is full (trio's own figure)


def bind_of(listen: str) -> str:
    """hypercorn's bind for HttpListen (an empty host is every IPv4 address)."""
    host, _, port = listen.rpartition(":")
    return f"{host or '0.0.0.0'}:{port}"


def http_cap(limit: int, nodes: int = 0) -> int:
    """HTTP connections open at once: a quarter of what the wire leaves in reserve."""
    caps = caps_for(limit, nodes)
    return max(8, (caps.fd_limit - caps.connections) // 4)


class HttpListener:
    """The accept loop: counts connections, closes those over the cap before hypercorn sees
    them, and hands the rest to hypercorn's TCPServer."""

    def __init__(self, app: Any, config: Config, cap: int) -> None:
        self.app, self.config, self.cap = app, config, cap
        self.context = WorkerContext(None)
        self.open = 0
        self.refused = 0
        self.log = QuietLog()

    async def serve(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS):
                    self.log.event("descriptors", "HTTP accept waits: no descriptor free",
                                   logging.ERROR, error=exc.strerror or str(exc))
                    await trio.sleep(ACCEPT_RETRY)
                    continue
                raise
            if self.open >= self.cap:
                self.refused += 1
                self.log.event("full", "HTTP connection closed: the cap is reached",
                               open=self.open, cap=self.cap)
                stream.socket.close()  # no trio wrapper to unwind: the descriptor goes now
                continue
            self.open += 1
            nursery.start_soon(self._handle, stream)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            # hypercorn types this argument as its TLS stream; a plain stream serves as well
            await TCPServer(self.app, self.config, self.context, {}, cast(Any, stream)).run()
        except Exception as exc:  # one connection's failure is never the daemon's
            self.log.event("error", "HTTP connection failed", logging.ERROR, error=repr(exc))
        finally:
            self.open -= 1


async def serve_http(nodes: WebNodes, jobs: WebJobs, events: WebEvents, admin: WebAdmin,
                     reservations: ReservationBook, health: Health, site: Site, settings: Any,
                     durability: WebDurability | None = None, *,
                     task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled; task_status gets the URLs it listens on. The ports are the
    composition root's (ctld/daemon.py web_ports), each handed over on its own."""
    config = Config()
    config.bind = [bind_of(settings.listen)]
    config.accesslog = None
    config.errorlog = logging.getLogger("ranch.http")
    config.keep_alive_timeout = KEEP_ALIVE
    config.read_timeout = READ_TIMEOUT
    web_app = build_app(nodes, jobs, events, admin, reservations, health, site, settings,
                        durability)
    problem = web_app.state.web.gate.tokens.problem()
    if problem is not None and settings.token_file:
        logs.event("HTTP writes disabled until the token file is fixed", logging.ERROR,
                   error=problem)
    app = wrap_app(cast(Any, BodyCap(web_app)), config.wsgi_max_body_size, "asgi")
    try:
        sockets = config.create_sockets()
    except OSError as exc:
        logs.event("HTTP cannot listen", logging.ERROR, addr=settings.listen,
                   error=exc.strerror or str(exc))
        raise
    http = HttpListener(app, config, http_cap(fd_limit(), len(nodes.nodes)))
    web_app.state.http = http
    urls = []
    listeners = []
    for sock in sockets.insecure_sockets:
        sock.listen(config.backlog)
        listeners.append(trio.SocketListener(trio.socket.from_stdlib_socket(sock)))
        urls.append(f"http://{repr_socket_addr(sock.family, sock.getsockname())}")
    logs.event("HTTP connection cap", cap=http.cap)
    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(http.serve, listener, nursery)
        task_status.started(urls)
