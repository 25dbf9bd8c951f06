"""An rnoded that relays other nodes' traffic to rctld (issue 47, RelayNodes=).

It listens on its node's address and port. A relayed node opens with RelayJoin (cluster key),
then sends frames signed with its own node key, which the relay cannot check or make: it
forwards them unchanged, gathered into one RelayUp every FLUSH seconds over its single
connection to rctld, and hands each node the frames of rctld's RelayDown meant for it. When that
connection is lost, every relayed node's connection is closed at once, so that the nodes go to
the next relay or straight to rctld (noded/relayjoin.py) rather than wait on a dead path; the
relay accepts no node until it is connected again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import trio

from ranch.noded.link import LOST
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import MAX_SIZE
from ranch.protocol.relaymessages import split_frames
from ranch.protocol.tcp import RECEIVE_CHUNK, FramedStream

log = logging.getLogger("rnoded")

FLUSH = 0.02  # seconds a node's frame may wait for others to share its RelayUp
BATCH_BYTES = 256 << 10  # a RelayUp's frames at most: a busy rctld reads it whole in time
KEEPALIVE = 30.0  # an empty RelayUp this often (rctld drops a connection idle 120 s)
NODE_QUEUE = 256  # frames waiting for a slow relayed node before it is cut off


class Downstream:
    """One relayed node's connection to this relay."""

    __slots__ = ("_receive", "name", "out", "scope", "stream")

    def __init__(self, name: str, stream: trio.SocketStream) -> None:
        self.name = name
        self.stream = stream
        self.out, self._receive = trio.open_memory_channel[bytes](NODE_QUEUE)
        self.scope = trio.CancelScope()


    def close(self) -> None:
        self.scope.cancel()

    async def writer(self) -> None:
        try:
            async for frame in self._receive:
                await self.stream.send_all(frame)
        except LOST:
            pass
        self.close()  # the node's connection is done either way


class RelayServer:
    """The relay: its listener, its link to rctld, the nodes it carries."""

    def __init__(self, name: str, key: bytes, controllers: Callable[[], tuple[tuple[str, int],
                 ...]], message_timeout: Callable[[], float],
                 connect_timeout: float = 5.0) -> None:
        self.name = name
        self.key = key
        self.controllers = controllers
        self.message_timeout = message_timeout
        self.connect_timeout = connect_timeout
        self.up: FramedStream | None = None
        self.nodes: dict[str, Downstream] = {}
        self.pending: list[m.RelayItem] = []
        self._wake = trio.Event()
        self.forwarded_up = 0
        self.forwarded_down = 0

    async def run(self, host: str, port: int,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(port, host=host or None)
        log.info("relay %s listening on %s:%d", self.name, host, port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._uplink_loop)
            nursery.start_soon(trio.serve_listeners, self._serve_node, listeners)
            task_status.started()

    # -- upward ---------------------------------------------------------------------------

    async def _uplink_loop(self) -> None:
        attempt = 0
        while True:
            for host, port in self.controllers():
                try:
                    with trio.fail_after(self.connect_timeout):
                        stream = await trio.open_tcp_stream(host, port)
                except (OSError, trio.TooSlowError) as exc:
                    log.warning("relay %s cannot reach controller %s:%d: %s", self.name, host,
                                port, exc or "timeout")
                    continue
                fs = FramedStream(stream, self.key, message_timeout=self.message_timeout())
                why = await self._uplink(fs)
                log.warning("relay %s: link to controller %s:%d ended: %s; its %d nodes move",
                            self.name, host, port, why, len(self.nodes))
                attempt = 0
            attempt += 1
            await trio.sleep(min(5.0, 0.25 * 2 ** min(attempt, 5)))

    async def _uplink(self, fs: FramedStream) -> str:
        why = ["closed"]

        async def guarded(fn: Callable[[FramedStream], Awaitable[str | None]],
                          cancel: trio.CancelScope) -> None:
            try:
                ended = await fn(fs)
            except (ProtocolError, *LOST) as exc:
                ended = str(exc) or type(exc).__name__
            if ended is not None:
                why[0] = ended
            cancel.cancel()

        try:
            self.up = fs
            async with trio.open_nursery() as nursery:
                nursery.start_soon(guarded, self._reader, nursery.cancel_scope)
                nursery.start_soon(guarded, self._flusher, nursery.cancel_scope)
        finally:
            self.up = None
            for node in list(self.nodes.values()):
                node.close()
            self.pending.clear()
            with trio.move_on_after(0.5):
                await fs.aclose()
        return why[0]

    async def _reader(self, fs: FramedStream) -> str | None:
        # say who we are at once: rctld knows the relay before its first node's frame
        await fs.send(m.RelayUp(self.name), 0)
        while True:
            frame = await fs.receive()
            if isinstance(frame.msg, m.RelayDown):
                self._down(frame.msg)
            elif isinstance(frame.msg, m.Error):
                return f"controller refused: {frame.msg.code}: {frame.msg.message}"

    def _queue(self, item: m.RelayItem) -> None:
        self.pending.append(item)
        self._wake.set()

    async def _flusher(self, fs: FramedStream) -> str | None:
        while True:
            with trio.move_on_after(KEEPALIVE):
                await self._wake.wait()
            self._wake = trio.Event()
            await trio.sleep(FLUSH)  # let the other nodes' frames of this moment join
            while True:
                n = _fits(self.pending, BATCH_BYTES)
                items = tuple(self.pending[:n])
                del self.pending[:n]
                await fs.send(m.RelayUp(self.name, items, time.time()), 0)
                self.forwarded_up += len(items)
                if not self.pending:
                    break

    # -- downward -------------------------------------------------------------------------

    def _down(self, msg: m.RelayDown) -> None:
        for item in msg.items:
            node = self.nodes.get(item.node)
            if node is None:
                continue
            if item.gone:
                node.close()
                continue
            try:
                node.out.send_nowait(item.frame)
                self.forwarded_down += 1
            except trio.WouldBlock:
                log.warning("relay %s: node %s reads too slowly; closing it", self.name,
                            item.node)
                node.close()

    # -- the relayed nodes ----------------------------------------------------------------

    async def _serve_node(self, stream: trio.SocketStream) -> None:
        fs = FramedStream(stream, self.key, message_timeout=self.message_timeout())
        try:
            with trio.fail_after(self.message_timeout()):
                frame = await fs.receive()
        except (ProtocolError, trio.TooSlowError, *LOST):
            await trio.aclose_forcefully(stream)
            return
        join = frame.msg
        if not isinstance(join, m.RelayJoin) or self.up is None:
            why = ("not connected to the controller" if isinstance(join, m.RelayJoin)
                   else f"{frame.type} is not a RelayJoin")
            with trio.move_on_after(1):
                await fs.send(m.Error("unavailable", f"relay {self.name}: {why}"),
                              frame.request_id, frame.version)
            await trio.aclose_forcefully(stream)
            return
        node = Downstream(join.node, stream)
        old = self.nodes.get(join.node)
        if old is not None:
            old.close()  # the node came back on a new connection
        self.nodes[join.node] = node
        try:
            with node.scope:
                await fs.send(m.Ack(), frame.request_id, frame.version)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(node.writer)
                    await self._read_node(node, bytearray(fs.decoder.pending()))
                    nursery.cancel_scope.cancel()
        except LOST:
            pass  # its connection broke: as if it closed it
        finally:
            if self.nodes.get(join.node) is node:
                del self.nodes[join.node]
                if self.up is not None:
                    self._queue(m.RelayItem(join.node, gone=True))
            await trio.aclose_forcefully(stream)

    async def _read_node(self, node: Downstream, buf: bytearray) -> None:
        """The node's frames, whole, to the next RelayUp, until it closes (or breaks: a frame
        that cannot be one, a read that fails)."""
        try:
            while True:
                for frame in split_frames(buf, MAX_SIZE):
                    self._queue(m.RelayItem(node.name, frame))
                data = await node.stream.receive_some(RECEIVE_CHUNK)
                if not data:
                    return
                buf += data
        except (ValueError, *LOST) as exc:
            log.info("relay %s: node %s: %s", self.name, node.name, exc)


def _fits(items: list[m.RelayItem], room: int) -> int:
    n = size = 0
    for item in items:
        size += len(item.frame)
        if n and size > room:
            break
        n += 1
    return n

