"""rnoded's requests to rctld: ids, replies routed to waiters, the goodbye, what counts as lost."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import trio

from ranch.protocol.errors import ProtocolError
from ranch.protocol.tcp import FramedStream, PeerClosed

log = logging.getLogger("rnoded")

# Anything that means "this connection is gone": reconnect.
LOST = (PeerClosed, OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError)


class SessionLost(Exception):
    """The current connection cannot go on; the reason is logged and the node reconnects."""


class Requests:
    """Request ids (one count for the daemon's life) and the requests waiting for a reply."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._pending: dict[int, trio.MemorySendChannel[Any]] = {}

    def next_id(self) -> int:
        return next(self._ids)

    async def request(self, fs: FramedStream, msg: Any, version: int, timeout: float) -> Any:
        """Send `msg` and wait for its reply (which the connection's reader delivers); raises
        SessionLost when none comes within `timeout`."""
        request_id = self.next_id()
        send, receive = trio.open_memory_channel[Any](1)
        self._pending[request_id] = send
        try:
            with trio.move_on_after(timeout):
                await fs.send(msg, request_id, version)
                return await receive.receive()
            raise SessionLost(f"no reply to {type(msg).__name__} within {timeout:g} s")
        finally:
            del self._pending[request_id]

    def deliver(self, frame: Any) -> None:
        """A frame that is no push: the reply some request waits for (or a stray, dropped)."""
        channel = self._pending.get(frame.request_id)
        if channel is None:
            log.debug("ignoring unexpected %s (request %d)", frame.type, frame.request_id)
            return
        try:
            channel.send_nowait(frame.msg)
        except trio.WouldBlock:
            log.debug("duplicate reply to request %d", frame.request_id)


async def goodbye(fs: FramedStream, notice: Any, request_id: int, version: int,
                  grace: float) -> None:
    """Send the shutdown notice, wait up to `grace` for its Ack (the reader is gone: read here),
    close the connection."""
    with trio.move_on_after(grace) as scope:
        try:
            await fs.send(notice, request_id, version)
            while (await fs.receive()).request_id != request_id:
                pass
            log.info("controller acknowledged the shutdown notice")
        except (ProtocolError, *LOST) as exc:
            log.warning("shutdown notice not acknowledged: %s", exc)
    if scope.cancelled_caught:
        log.warning("no Ack to the shutdown notice within %gs", grace)
    with trio.move_on_after(0.5):
        await fs.aclose()
