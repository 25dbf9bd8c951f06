"""Event-log load for the fleet benchmark: admin state changes at a steady rate (so the event
log has traffic), and a `rcontrol events --follow` client that never reads (issue 13: a stalled
follower must not slow heartbeats)."""

from __future__ import annotations

import socket
import time

import trio

from ranch.protocol import typedclient
from ranch.protocol.framing import FrameDecoder, encode_frame
from ranch.protocol.messages import Events, GetEvents, UpdateNodes


def open_stalled(addr: tuple[str, int], key: bytes) -> socket.socket:
    """Subscribe with --follow, then never read (a receive buffer of a few KB fills at once)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(addr)
    sock.sendall(encode_frame(GetEvents(follow=True), key, request_id=1))
    return sock


def drain_stalled(sock: socket.socket, key: bytes, seconds: float = 5.0) -> tuple[int, int]:
    """Read what the stalled follower was sent at last: (events received, events missed)."""
    decoder = FrameDecoder(key, max_size=64 << 20, message_timeout=1e9)
    got = missed = 0
    sock.settimeout(0.5)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not data:
            break
        decoder.feed(data)
        for frame in decoder:
            if isinstance(frame.msg, Events):
                got += len(frame.msg.events)
                missed += frame.msg.missed
    sock.close()
    return got, missed


async def event_churn(addr: tuple[str, int], key: bytes, expr: str, per_s: float,
                      counter: list[int]) -> None:
    """DRAIN/UNDRAIN the nodes of `expr` alternately, `per_s` requests a second, until
    cancelled; counter[0] counts the requests answered."""
    period = 1.0 / per_s
    i = 0

    def send(state: str) -> None:
        typedclient.request(addr, key, UpdateNodes(expr, state, "fleet bench event churn",
                                              "fleetbench"), timeout=30.0)

    next_at = trio.current_time()
    while True:
        await trio.to_thread.run_sync(send, "DRAIN" if i % 2 == 0 else "UNDRAIN")
        counter[0] += 1
        i += 1
        next_at += period
        await trio.sleep_until(next_at)
