"""rctld's TCP side: one task per connection, frames in, the core's replies and pushes out.

A peer's faults stay on its own connection: a half-sent frame times out after MessageTimeout,
pushes go through a bounded queue (a reader too slow to drain it is disconnected), and any frame
that fails authentication or decoding is answered with an Error, logged and the connection closed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ctld import logs
from ctld.cluster import Cluster
from ctld.wire import Prebuilt, encode_body_frame
from protocol import messages as m
from protocol.errors import ProtocolError
from protocol.framing import MAX_SIZE, FrameDecoder, ReplayGuard, encode_frame
from protocol.versions import CURRENT

RECEIVE_CHUNK = 1 << 16
SEND_QUEUE = 64  # frames waiting for a slow reader before it is cut off
FIRST_FRAME_TIMEOUT = 30.0  # a connection that never says anything is dropped
ADMIN_IDLE_TIMEOUT = 120.0  # a command's connection idle this long is dropped

Reconfigurer = Callable[[str], Awaitable[m.ReconfigureResult]]


class Connection:
    """One peer: a node daemon's long-lived session or a command's short one."""

    def __init__(self, stream: trio.SocketStream, peer: str, server: Server) -> None:
        self.stream = stream
        self.peer = peer
        self.server = server
        self.version = CURRENT
        self.node: str | None = None  # set once it registered
        self.send_chan, self.recv_chan = trio.open_memory_channel[tuple[Any, int, int]](
            SEND_QUEUE
        )
        self.scope = trio.CancelScope()

    # Pusher, for the core
    def push(self, msg: Any) -> bool:
        try:
            self.send_chan.send_nowait((msg, 0, self.version))
            return True
        except trio.WouldBlock:
            logs.event("send queue full; disconnecting slow peer", logging.WARNING,
                       peer=self.peer, node=self.node or "-")
            self.close_soon()
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        return False

    def close_soon(self) -> None:
        self.scope.cancel()

    async def writer(self) -> None:
        timeout = self.server.message_timeout
        async for msg, request_id, version in self.recv_chan:
            data = self.server.encode(msg, request_id, version)
            with trio.move_on_after(max(timeout, 1.0)) as sc:
                try:
                    await self.stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.close_soon()
                    return
            if sc.cancelled_caught:
                logs.event("peer too slow to read; disconnecting", logging.WARNING,
                           peer=self.peer, node=self.node or "-")
                self.close_soon()
                return

    async def reply(self, msg: Any, request_id: int, version: int) -> None:
        await self.send_chan.send((msg, request_id, version))


class Server:
    def __init__(
        self,
        cluster: Cluster,
        key: bytes,
        *,
        reconfigure: Reconfigurer,
        max_size: int = MAX_SIZE,
    ) -> None:
        self.cluster = cluster
        self.key = key
        self.max_size = max_size
        self.reconfigure = reconfigure
        self.replay_guard = ReplayGuard(window=self.message_timeout)
        self.connections: set[Connection] = set()

    @property
    def message_timeout(self) -> float:
        return float(self.cluster.config.timeouts.message_timeout)

    def encode(self, msg: Any, request_id: int, version: int) -> bytes:
        if isinstance(msg, Prebuilt):
            return encode_body_frame(msg.type_name, msg.body, self.key, request_id=request_id,
                                     version=version)
        try:
            return encode_frame(msg, self.key, request_id=request_id, version=version)
        except ValueError:  # the message is newer than the peer's protocol
            err = m.Error("version", f"{type(msg).__name__} needs a newer protocol version "
                          f"than {version}")
            return encode_frame(err, self.key, request_id=request_id, version=version)

    async def handle(self, stream: trio.SocketStream) -> None:
        peer = _peer(stream)
        conn = Connection(stream, peer, self)
        self.connections.add(conn)
        try:
            with conn.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(conn.writer)
                    try:
                        await self._read(conn)
                    finally:
                        conn.send_chan.close()  # the writer sends what is queued, then ends
        except Exception as exc:  # never let one peer take the server down
            logs.event("connection failed", logging.ERROR, peer=peer, error=repr(exc))
        finally:
            self.connections.discard(conn)
            self.cluster.disconnected(conn)
            if conn.node:
                logs.event("node disconnected", node=conn.node, peer=peer)
            await trio.aclose_forcefully(stream)

    async def _read(self, conn: Connection) -> None:
        mt = self.message_timeout
        decoder = FrameDecoder(self.key, max_size=self.max_size, message_timeout=mt,
                               replay_guard=self.replay_guard)
        seen_frame = False
        while True:
            try:
                frame = decoder.next_frame()
            except ProtocolError as exc:
                self._reject(conn, exc)
                await conn.reply(exc.to_error(), exc.request_id, exc.version or CURRENT)
                return
            if frame is None:
                if decoder.buffered:
                    limit, why = mt, f"half-sent frame not completed within {mt:g} s"
                elif not seen_frame:
                    limit, why = FIRST_FRAME_TIMEOUT, "no request"
                elif conn.node is None:
                    limit, why = ADMIN_IDLE_TIMEOUT, "idle"
                else:
                    limit, why = math.inf, ""
                with trio.move_on_after(limit) as sc:
                    try:
                        data = await conn.stream.receive_some(RECEIVE_CHUNK)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return
                if sc.cancelled_caught:
                    logs.event("connection timed out", logging.WARNING, peer=conn.peer,
                               node=conn.node or "-", why=why)
                    if decoder.buffered:
                        await conn.reply(m.Error("timeout", why), 0, conn.version)
                    return
                if not data:
                    return
                decoder.feed(data)
                continue
            seen_frame = True
            conn.version = frame.version
            try:
                reply = await self._dispatch(conn, frame.msg)
            except Exception as exc:
                logging.getLogger(logs.LOGGER_NAME).exception(
                    "request failed: %s from %s", type(frame.msg).__name__, conn.peer)
                reply = m.Error("internal", f"{type(frame.msg).__name__} failed: {exc!r}")
            if reply is not None:
                await conn.reply(reply, frame.request_id, frame.version)
                _log_refusal(conn, frame.type, reply)

    def _reject(self, conn: Connection, exc: ProtocolError) -> None:
        logs.event("frame rejected", logging.WARNING, peer=conn.peer, node=conn.node or "-",
                   code=exc.code, error=exc.message)

    async def _dispatch(self, conn: Connection, msg: Any) -> Any:
        cluster = self.cluster
        if isinstance(msg, m.Heartbeat):
            return cluster.heartbeat(msg, conn)
        if isinstance(msg, m.Register):
            reply = cluster.register(msg, conn, version=conn.version)
            if reply.accepted:
                conn.node = msg.name
            return reply
        if isinstance(msg, m.GetSnapshot):
            return Prebuilt(
                "Snapshot", cluster.snapshot_body(metrics=msg.metrics, fields=msg.fields)
            )
        if isinstance(msg, m.UpdateNodes):
            return cluster.update_nodes(msg)
        if isinstance(msg, m.SetAllocation):
            return cluster.set_allocation(msg)
        if isinstance(msg, m.ShutdownNotice):
            return cluster.shutdown_notice(msg, conn)
        if isinstance(msg, m.Ping):
            return cluster.ping()
        if isinstance(msg, m.GetConfig):
            return cluster.config_dump
        if isinstance(msg, m.Reconfigure):
            return await self.reconfigure(msg.user or conn.peer)
        if isinstance(msg, m.Ack):
            return None  # a node acknowledging a push
        return m.Error("bad_request", f"{type(msg).__name__} is not a request rctld serves")


def _log_refusal(conn: Connection, request: str, reply: Any) -> None:
    """Every refused request is logged with the peer that sent it."""
    if isinstance(reply, m.Error):
        errors: tuple[str, ...] = (f"{reply.code}: {reply.message}",)
    elif isinstance(reply, m.UpdateResult | m.ReconfigureResult) and not reply.ok:
        errors = reply.errors
    elif isinstance(reply, m.RegisterReply) and not reply.accepted:
        if reply.health_check_first:
            return  # the normal first step of a node with a health check, not a refusal
        errors = (reply.reason,)
    else:
        return
    shown = "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
    logs.event("request refused", logging.WARNING, request=request, peer=conn.peer,
               node=conn.node or "-", error=shown)


def _peer(stream: trio.SocketStream) -> str:
    try:
        addr = stream.socket.getpeername()
        return f"{addr[0]}:{addr[1]}"
    except (OSError, AttributeError, IndexError):
        return "?"
