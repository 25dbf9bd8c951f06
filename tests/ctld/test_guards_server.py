"""rctld's server against slow and surplus peers, on trio's clock (issue 18): a frame's deadline
counts from its first byte and never restarts, a silent peer goes after MessageTimeout, and a
connection over a cap is closed at once."""

from __future__ import annotations

import trio
import trio.testing

from ranch.ctld.rpc.admission import Caps
from ranch.ctld.rpc.server import Server
from ranch.protocol import messages as m
from ranch.protocol.framing import FrameDecoder, encode_frame
from tests.ctld.harness import Harness as Cluster
from tests.ctld.helpers import make_config, wall

KEY = b"k" * 32


def _server(caps: Caps | None = None) -> tuple[Cluster, Server]:
    cluster = Cluster(make_config(), wall=wall)

    async def reconfigure(who: str) -> m.ReconfigureResult:
        return m.ReconfigureResult(ok=True)

    return cluster, Server(cluster, KEY, reconfigure=reconfigure, caps=caps)


async def _until_closed(stream: trio.abc.ReceiveStream) -> tuple[float, list]:
    """(when the server closed, the frames it sent before)."""
    dec = FrameDecoder(KEY)
    frames: list = []
    while data := await stream.receive_some(1 << 16):
        dec.feed(data)
        frames.extend(f.msg for f in dec)
    return trio.current_time(), frames


async def test_a_dribbled_frame_is_cut_a_message_timeout_after_its_first_byte(
        autojump_clock) -> None:
    cluster, server = _server()
    mt = cluster.config.timeouts.message_timeout
    client, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.handle, server_end)
        await client.send_all(encode_frame(m.Ping(), KEY, request_id=1))
        dec = FrameDecoder(KEY)
        while not list(dec):
            dec.feed(await client.receive_some(1 << 16))
        await trio.sleep(60)  # an idle command connection may wait (ADMIN_IDLE_TIMEOUT)
        frame = encode_frame(m.Ping(), KEY, request_id=2)

        async def dribble() -> None:
            for byte in frame:
                try:
                    await client.send_all(bytes([byte]))
                except trio.BrokenResourceError:
                    return
                await trio.sleep(mt / 4)  # each byte well within the old per-receive timeout

        first = trio.current_time()
        nursery.start_soon(dribble)
        closed, frames = await _until_closed(client)
    assert closed - first == mt
    assert [f.code for f in frames] == ["timeout"]
    assert f"within {mt:g} s of its first byte" in frames[0].message


async def test_a_peer_that_never_proves_the_key_goes_after_message_timeout(autojump_clock) -> None:
    cluster, server = _server()
    client, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        nursery.start_soon(server.handle, server_end)
        closed, frames = await _until_closed(client)
    assert closed - start == cluster.config.timeouts.message_timeout and frames == []
    assert server.admission.open == 0 and server.admission.unproven == 0


async def test_connections_over_a_cap_are_closed_at_once(mock_clock) -> None:
    _, server = _server(Caps(fd_limit=100, connections=3, unproven=2))
    pairs = [trio.testing.memory_stream_pair() for _ in range(4)]
    async with trio.open_nursery() as nursery:
        for _, server_end in pairs:  # one after the other (trio starts tasks in any order)
            nursery.start_soon(server.handle, server_end)
            await trio.testing.wait_all_tasks_blocked()
        # the unproven pool (2) is full of fresh connections: the third and fourth are closed
        for client, _ in pairs[2:]:
            assert await client.receive_some(1) == b""
        assert server.admission.open == 2 and server.admission.refused == 2
        # A peer that proves the key leaves the unproven pool: another can come in.
        await pairs[0][0].send_all(encode_frame(m.Ping(), KEY, request_id=1))
        await trio.testing.wait_all_tasks_blocked()
        assert server.admission.unproven == 1
        late_client, late_end = trio.testing.memory_stream_pair()
        nursery.start_soon(server.handle, late_end)
        await late_client.send_all(encode_frame(m.Ping(), KEY, request_id=2))
        dec = FrameDecoder(KEY)
        while not list(dec):
            dec.feed(await late_client.receive_some(1 << 16))
        # The cap in all (3) is reached now: a fourth is refused though it could prove the key.
        extra_client, extra_end = trio.testing.memory_stream_pair()
        nursery.start_soon(server.handle, extra_end)
        assert await extra_client.receive_some(1) == b""
        assert mock_clock.current_time() == 0  # all of it at once, no deadline involved
        nursery.cancel_scope.cancel()
