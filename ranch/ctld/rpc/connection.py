"""One peer's connection to rctld (a node daemon's long-lived session or a command's short one):
its pushes, each written by a short task of the daemon's nursery, and its sends, which offer a
frame to the kernel first and take a send lock, made only when two writes meet, otherwise."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

import attrs
import trio

from ranch.ctld import logs
from ranch.ctld.rpc.fastio import RawStream, StreamIO
from ranch.ctld.rpc.idlenodes import IdleNodes
from ranch.protocol.versions import CURRENT

SEND_QUEUE = 64  # pushes waiting for a slow reader before it is cut off


@attrs.frozen
class Links:
    """What a connection uses of its server (ctld/rpc/server.py), built once there and shared
    by every connection."""

    spawn: Callable[[], Callable[..., Any] | None]  # where pushes are written from, when asked
    connections: Collection[Any]  # the open ones: a closed one pushes nothing
    idle: IdleNodes  # where a parked connection is closed
    message_timeout: Callable[[], float]
    encode: Callable[..., bytes]  # (msg, request_id, version, key=None) -> a frame


class Connection:
    """One peer: a node daemon's long-lived session or a command's short one. Kept small: there
    is one per node (docs/benchmarks.md, hot spot 3)."""

    __slots__ = ("closing", "io", "key", "links", "node", "peer", "pending", "ready", "relaying",
                 "scope",
                 "send_lock", "stream", "version", "who")

    def __init__(self, stream: RawStream | trio.SocketStream, peer: str, links: Links,
                 ready: bool = False) -> None:
        self.stream = stream
        # bytes (or the end of stream) are likely waiting: the next read tries before it waits
        self.ready = ready
        self.io = StreamIO(stream)
        self.peer = peer
        self.links = links
        self.version = CURRENT
        self.node: str | None = None  # the node that registered on it (registered_as)
        self.send_lock: trio.Semaphore | None = None  # made the first time a send waits
        # the scope its reader's task runs in (ctld/rpc/reading.py): none while a node's
        # connection is parked between frames (ctld/rpc/idlenodes.py)
        self.scope: trio.CancelScope | None = None
        self.closing = False
        self.relaying = False  # a relay's link (ctld/rpc/relayhub.py): a frame's deadline moves
        self.pending = 0  # pushes not yet written
        # AuthType=auth/munge (ctld/rpc/userauth.py): the user munged vouched for and the session
        # key of this connection; None for the cluster key's holder (daemons, root)
        self.who: Any = None
        self.key: bytes | None = None

    # Pusher, for the core
    def registered_as(self, name: str) -> None:
        """A node registered on this connection (its close is then a lookup of that node)."""
        self.node = name

    def push(self, msg: Any) -> bool:
        links = self.links
        spawn = links.spawn()
        if spawn is None or self.closing or self not in links.connections:
            return False
        if self.pending >= SEND_QUEUE:
            logs.event("send queue full; disconnecting slow peer", logging.WARNING,
                       peer=self.peer, node=self.node or "-")
            self.close_soon()
            return False
        self.pending += 1
        spawn(self._push, msg, self.version)
        return True

    def close_soon(self) -> None:
        """End the connection: its reader's task is cancelled, or a parked one closed now."""
        self.closing = True
        if self.scope is not None:
            self.scope.cancel()
        else:
            self.links.idle.close(self)

    async def _push(self, msg: Any, version: int) -> None:
        try:
            await self.send(self.links.encode(msg, 0, version, self.key))
        finally:
            self.pending -= 1

    async def send(self, frame: bytes) -> bool:
        """Write one frame; a peer that does not take it within MessageTimeout is cut off."""
        lock = self.send_lock
        if lock is not None and lock.value == 0:  # another write under way: after it
            await lock.acquire()
            return await self._send_rest(lock, frame)
        # Nothing else is writing: offer the frame to the kernel, which nearly always takes all
        # of it (no await between the check and the acquire in _locked).
        sent = self._offer(frame)
        if sent is None:
            return False
        if sent == len(frame):
            return True
        return await self._send_rest(self._locked(), memoryview(frame)[sent:])

    def send_now(self, frame: bytes) -> bool | None:
        """`send` for a caller that does not wait (the idle poller acting on a node's frame,
        ctld/rpc/reading.py): True once the kernel took `frame`, or took part of it and a short
        task of the daemon's nursery writes the rest (later sends wait for it); False when the
        connection broke (it is closing); None, nothing written, while another write is under
        way or before the daemon's nursery is there to finish one."""
        lock = self.send_lock
        spawn = self.links.spawn()
        if spawn is None or (lock is not None and lock.value == 0):
            return None
        sent = self._offer(frame)
        if sent is None:
            return False
        if sent < len(frame):
            spawn(self._send_rest, self._locked(), memoryview(frame)[sent:])
        return True

    def _offer(self, frame: bytes) -> int | None:
        """What the kernel takes of `frame` now, without waiting; None when the connection
        broke (it is closing)."""
        try:
            return self.io.try_send(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.close_soon()
            return None

    def _locked(self) -> trio.Semaphore:
        """The send lock, made the first time a write waits, taken now (it is free)."""
        lock = self.send_lock
        if lock is None:
            # a semaphore, not a Lock: a rest handed to another task (send_now) is let go there;
            # it hands over in arrival order, as a StrictFIFOLock does
            lock = self.send_lock = trio.Semaphore(1, max_value=1)
        lock.acquire_nowait()
        return lock

    async def _send_rest(self, lock: trio.Semaphore, data: bytes | memoryview) -> bool:
        """Write `data` under the send lock, taken for it; let the lock go after."""
        try:
            with trio.move_on_after(max(self.links.message_timeout(), 1.0)):
                try:
                    await self.stream.send_all(data)
                    return True
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.close_soon()
                    return False
        finally:
            lock.release()
        logs.event("peer too slow to read; disconnecting", logging.WARNING,
                   peer=self.peer, node=self.node or "-")
        self.close_soon()
        return False

    async def reply(self, msg: Any, request_id: int, version: int) -> bool:
        return await self.send(self.links.encode(msg, request_id, version, self.key))
