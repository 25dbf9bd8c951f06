"""trio helpers shared by rctld and rnoded: a framed, authenticated message stream.

Timeouts are the caller's job: wrap `receive()` in `trio.move_on_after`/`fail_after` (a peer that
sends half a frame then stalls otherwise waits forever). A server runs one task per connection,
so one stalled or hostile peer never holds up another.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import MAX_SIZE, Frame, FrameDecoder, ReplayGuard, encode_frame
from ranch.protocol.versions import CURRENT

RECEIVE_CHUNK = 1 << 16


class PeerClosed(EOFError):
    """The peer closed the connection (possibly mid-frame)."""


class FramedStream:
    """Signed frames over a trio stream. Sends are serialised, so several tasks may send on one
    connection; receive from one task only."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        key: bytes,
        *,
        max_size: int = MAX_SIZE,
        message_timeout: float = 10.0,
        replay_guard: ReplayGuard | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.stream = stream
        self.key = key
        self.decoder = FrameDecoder(
            key,
            max_size=max_size,
            message_timeout=message_timeout,
            replay_guard=replay_guard,
            clock=clock,
        )
        self._send_lock = trio.Lock()

    def sign_with(self, key: bytes) -> None:
        """Sign what is sent from now on with `key` (a refusal to a peer whose key is not
        known yet is signed with one it knows)."""
        self.key = key

    def use_key(self, key: bytes) -> None:
        """A session key agreed with the peer: both what is sent and what is read."""
        self.key = self.decoder.key = key

    async def send(self, msg: Any, request_id: int, version: int = CURRENT) -> None:
        data = encode_frame(msg, self.key, request_id=request_id, version=version)
        async with self._send_lock:
            await self.stream.send_all(data)

    async def send_error(self, exc: ProtocolError, version: int = CURRENT) -> None:
        """Answer a refused frame with an Error carrying its code, matched to its request."""
        await self.send(exc.to_error(), exc.request_id, exc.version or version)

    async def receive(self) -> Frame:
        """The next frame. Raises ProtocolError for a refused frame (the connection stays usable
        unless `exc.fatal`) and PeerClosed at end of stream."""
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                return frame
            try:
                data = await self.stream.receive_some(RECEIVE_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise PeerClosed(f"connection lost: {exc}") from None
            if not data:
                partial = self.decoder.buffered
                raise PeerClosed(f"peer closed the connection{' mid-frame' if partial else ''}")
            self.decoder.feed(data)

    async def messages(self) -> AsyncIterator[Any]:
        """Each message the peer sends, until it closes the connection or breaks the stream
        (a refused frame that leaves it in sync is skipped)."""
        while True:
            try:
                frame = await self.receive()
            except ProtocolError as exc:
                if exc.fatal:
                    return
                continue
            except (PeerClosed, OSError):
                return
            yield frame.msg

    async def aclose(self) -> None:
        await self.stream.aclose()
