"""An accepted connection's stream without trio's wrappers (ctld/rpc/fastio.py RawStream)."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from ranch.ctld.rpc.fastio import RawStream, StreamIO


async def test_raw_stream_sends_receives_and_wakes_a_waiter_when_closed() -> None:
    ours, theirs = socket.socketpair()
    stream = RawStream(ours)
    assert not ours.getblocking()  # every wait goes through trio
    big = bytes(range(256)) * 8192  # 2 MB: more than the kernel takes at once
    theirs.setblocking(False)
    got = bytearray()

    async def drain() -> None:
        while len(got) < len(big):
            await trio.lowlevel.wait_readable(theirs)
            got.extend(theirs.recv(1 << 20))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        await stream.send_all(big)
    assert bytes(got) == big
    theirs.send(b"hello")
    assert await StreamIO(stream).receive_some(100) == b"hello"
    woken: list[type] = []

    async def waiter() -> None:
        try:
            await stream.receive_some(100)
        except trio.ClosedResourceError:
            woken.append(trio.ClosedResourceError)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        stream.close()
    assert woken == [trio.ClosedResourceError] and ours.fileno() == -1
    with pytest.raises(trio.ClosedResourceError):
        await stream.send_all(b"x")
    theirs.close()


async def test_raw_stream_send_to_a_closed_peer_is_broken() -> None:
    ours, theirs = socket.socketpair()
    stream = RawStream(ours)
    theirs.close()
    with pytest.raises(trio.BrokenResourceError):
        await stream.send_all(b"x" * 100)
    await stream.aclose()
