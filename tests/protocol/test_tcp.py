"""FramedStream over an in-memory stream pair: frames, refusals, EOF mid-frame."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import encode_frame
from ranch.protocol.tcp import FramedStream, PeerClosed
from ranch.protocol.versions import CURRENT

KEY = b"t" * 32


async def test_send_receive_and_error_reply() -> None:
    a, b = trio.testing.memory_stream_pair()
    left, right = FramedStream(a, KEY), FramedStream(b, KEY)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(left.send, m.Ping(), 1)
        nursery.start_soon(left.send, m.GetConfig(), 2, 2)
        got = {(f.request_id, f.type, f.version) for f in [await right.receive() for _ in "ab"]}
    assert got == {(1, "Ping", CURRENT), (2, "GetConfig", 2)}
    # A frame with the wrong key: refused, answered with an Error matched to it, stream usable.
    await a.send_all(encode_frame(m.Ping(), b"x" * 32, request_id=5))
    with pytest.raises(ProtocolError) as info:
        await right.receive()
    await right.send_error(info.value)
    reply = await left.receive()
    assert reply.msg.code == "bad_mac"
    await left.send(m.Ping(), 6)
    assert (await right.receive()).request_id == 6


async def test_eof_mid_frame() -> None:
    a, b = trio.testing.memory_stream_pair()
    right = FramedStream(b, KEY)
    await a.send_all(encode_frame(m.Ping(), KEY, request_id=1)[:10])
    await a.aclose()
    with pytest.raises(PeerClosed, match="mid-frame"):
        await right.receive()


async def test_half_frame_times_out_for_caller() -> None:
    a, b = trio.testing.memory_stream_pair()
    right = FramedStream(b, KEY)
    await a.send_all(encode_frame(m.Ping(), KEY, request_id=1)[:10])
    with trio.move_on_after(0.05) as scope:
        await right.receive()
    assert scope.cancelled_caught
