"""A frame's age is judged as of when rctld read its bytes: a fresh frame that then waited in
rctld's own queue (behind a slow request on the same connection) is served, and a frame already
too old when it came is refused with the clock wording (issue 50)."""

from __future__ import annotations

import time

import trio
import trio.testing

from ranch.ctld.compose.layers import rpc_server
from ranch.protocol import messages as m
from ranch.protocol.framing import FrameDecoder, encode_frame
from tests.ctld.harness import Harness as Cluster
from tests.ctld.helpers import make_config, wall

KEY = b"k" * 32
MT = 10.0  # the config's MessageTimeout (Slurm's default); rctld's backlog cover is as long


async def _serve(nursery: trio.Nursery, busy: float = 0.0):
    """(the client's end, the server, the frames' clock): a server whose frame clock is trio's,
    set a minute ahead of the real clock, which its replay floor (its start) is taken from."""
    base = time.time() + 60.0 - trio.current_time()

    def frame_wall() -> float:
        return base + trio.current_time()

    async def reconfigure(who: str) -> m.ReconfigureResult:
        await trio.sleep(busy)  # the controller busy with the request before
        return m.ReconfigureResult(ok=True)

    server = rpc_server(Cluster(make_config(), wall=wall).controller, KEY,
                        reconfigure=reconfigure, wall=frame_wall)
    client, server_end = trio.testing.memory_stream_pair()
    nursery.start_soon(server.handle, server_end)
    return client, server, frame_wall


async def _replies(client: trio.abc.ReceiveStream, count: int) -> list:
    decoder, frames = FrameDecoder(KEY, clock=lambda: 0.0), []  # the replies' age is not tested
    decoder.message_timeout = float("inf")
    while len(frames) < count:
        data = await client.receive_some(1 << 16)
        assert data, f"connection closed after {len(frames)} of {count} replies"
        decoder.feed(data)
        frames.extend(decoder)
    return frames


async def _slow_then_ping(busy: float) -> tuple[list, bytes, trio.abc.Stream]:
    """A Reconfigure that keeps the server `busy` s, and a Ping sent with it in one write (so
    read with it, then queued behind it): (both replies, the Ping's bytes, the client)."""
    async with trio.open_nursery() as nursery:
        client, server, now = await _serve(nursery, busy)
        assert server.message_timeout == MT
        assert server.replay_guard.window == 2 * MT, "nonces kept MT past the window"
        ping = encode_frame(m.Ping(), KEY, request_id=2, now=now())
        await client.send_all(encode_frame(m.Reconfigure(), KEY, request_id=1, now=now()) + ping)
        replies = await _replies(client, 2)
        assert trio.current_time() >= busy
        assert (replies[0].request_id, type(replies[0].msg)) == (1, m.ReconfigureResult)
        if not isinstance(replies[1].msg, m.Error):
            # the same bytes again, read now: refused (too old by now, and its nonce is known)
            await client.send_all(ping)
            replies += await _replies(client, 1)
        nursery.cancel_scope.cancel()
    return replies, ping, client


async def test_a_frame_that_waited_behind_a_slow_request_is_not_stale(autojump_clock) -> None:
    busy = MT + 5.0  # past MessageTimeout, within the cover
    replies, _, _ = await _slow_then_ping(busy)
    ping = replies[1]
    assert ping.request_id == 2 and not isinstance(ping.msg, m.Error), ping.msg
    replay = replies[2].msg
    assert isinstance(replay, m.Error) and replay.code in ("stale", "replay"), replay


async def test_a_frame_queued_past_the_cover_is_refused_as_our_wait(autojump_clock) -> None:
    """Past what the replay guard covers it is refused, as the receiver's wait, not a clock."""
    replies, _, _ = await _slow_then_ping(2 * MT + 5.0)
    err = replies[1].msg
    assert isinstance(err, m.Error) and err.code == "stale", err
    assert "25.0 s in this host's own queue" in err.message, err.message
    assert "clock" not in err.message


async def test_a_frame_too_old_when_it_came_is_refused_as_a_clock_matter(autojump_clock) -> None:
    async with trio.open_nursery() as nursery:
        client, server, now = await _serve(nursery)
        mt = server.message_timeout
        await client.send_all(encode_frame(m.Ping(), KEY, request_id=7, now=now() - mt - 2.0))
        (reply,) = await _replies(client, 1)
        assert isinstance(reply.msg, m.Error) and reply.msg.code == "stale", reply.msg
        assert "behind this host's clock" in reply.msg.message
        assert "check clock sync" in reply.msg.message
        nursery.cancel_scope.cancel()
