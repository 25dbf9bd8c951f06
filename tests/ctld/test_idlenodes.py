"""Registered nodes between frames are parked on the server's epoll with no task each
(ctld/rpc/idlenodes.py), over real loopback TCP: a parked node is read when it speaks, closed at
once by close_soon, forgotten when it hangs up, and closed when the server stops; a busy poller
gathers a few milliseconds of frames per wake-up, a quiet one takes a frame at once."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

import trio
import trio.testing

from ranch.ctld.rpc.fastio import RawStream, StreamIO
from ranch.ctld.rpc.idlenodes import GATHER, IdleNodes
from tests.ctld.test_connections import _beat, _cluster, _frame, _read_frames, _register, _server


async def _until(cond: Callable[[], bool], what: str) -> None:
    with trio.move_on_after(10):
        while not cond():
            await trio.sleep(0.005)
    assert cond(), f"not {what} within 10 s"


@asynccontextmanager
async def _parked_node() -> AsyncIterator[tuple]:
    """(cluster, server, the node's stream): a server on loopback TCP
    whose node n1 registered and is parked; the server is stopped when the block ends."""
    cluster = _cluster()
    server = _server(cluster)
    async with trio.open_nursery() as outer:
        server.spawn = outer.start_soon
        async with trio.open_nursery() as nursery:
            [listener] = await nursery.start(partial(server.serve_tcp, 0, host="127.0.0.1"))
            stream = await trio.open_tcp_stream("127.0.0.1", listener.socket.getsockname()[1])
            await stream.send_all(_frame(_register(), 1))
            [reply] = await _read_frames(stream, 1)
            assert reply.msg.accepted
            await _until(lambda: len(server.idle) == 1, "parked")
            yield cluster, server, stream
            nursery.cancel_scope.cancel()
        outer.cancel_scope.cancel()


async def test_a_parked_node_is_read_when_it_speaks_and_closed_at_once() -> None:
    async with _parked_node() as (cluster, server, stream):
        [conn] = server.connections
        assert conn.scope is None  # no task reads it: none holds a cancel scope
        for seq in (1, 2, 3):
            await stream.send_all(_frame(_beat("n1", seq), 10 + seq))
            [beat] = await _read_frames(stream, 1)
            assert beat.request_id == 10 + seq and type(beat.msg).__name__ == "HeartbeatReply"
            await _until(lambda: len(server.idle) == 1, "parked again")
        assert cluster.nodes["n1"].conn is conn
        conn.close_soon()  # as a re-registration elsewhere does
        assert server.connections == set() and len(server.idle) == 0
        assert cluster.nodes["n1"].conn is None
        assert await stream.receive_some(100) == b""
        assert conn.push(_beat("n1", 9)) is False


async def test_a_parked_node_that_hangs_up_is_forgotten() -> None:
    async with _parked_node() as (cluster, server, stream):
        await stream.aclose()
        await _until(lambda: not server.connections, "forgotten")
        assert len(server.idle) == 0 and cluster.nodes["n1"].conn is None


async def test_stopping_the_server_closes_parked_connections() -> None:
    async with _parked_node() as (_, server, stream):
        assert len(server.idle) == 1
    # the block's end stopped the server (its nursery cancelled), the node still parked
    assert server.connections == set() and len(server.idle) == 0
    assert not server.idle.running
    assert await stream.receive_some(100) == b""


class _Conn:
    def __init__(self, sock: socket.socket) -> None:
        self.io = StreamIO(RawStream(sock))
        self.ready = False


class _Reader:
    """A parked reader that notes when the poller started it (trio's clock)."""

    def __init__(self, sock: socket.socket, started: list[tuple[int, float]], n: int) -> None:
        self.conn = _Conn(sock)
        self.started, self.n = started, n

    async def run(self) -> None:
        self.started.append((self.n, trio.current_time()))
        assert self.conn.io.read_now(16) == b"x"


async def test_a_busy_poller_gathers_and_a_quiet_one_answers_at_once(
        autojump_clock: trio.testing.MockClock) -> None:
    idle = IdleNodes(lambda conn: None)
    pairs = [socket.socketpair() for _ in range(3)]
    started: list[tuple[int, float]] = []
    readers = [_Reader(ours, started, n) for n, (ours, _) in enumerate(pairs)]
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(idle.run, nursery)
            await trio.testing.wait_all_tasks_blocked()
            assert all(idle.park(r) for r in readers)
            await trio.sleep(1.0)
            quiet = trio.current_time()
            pairs[0][1].send(b"x")  # after a quiet spell: taken at once
            await trio.testing.wait_all_tasks_blocked()
            assert started == [(0, quiet)] and trio.current_time() == quiet
            pairs[1][1].send(b"x")  # the poller woke just now: these wait for the gather
            pairs[2][1].send(b"x")
            await _until(lambda: len(started) == 3, "started")
            assert sorted(started[1:]) == [(1, quiet + GATHER), (2, quiet + GATHER)]
            assert idle.park(readers[0])
            await trio.sleep(GATHER * 4)
            again = trio.current_time()
            pairs[0][1].send(b"x")
            await _until(lambda: len(started) == 4, "started again")
            assert started[3] == (0, again)
            nursery.cancel_scope.cancel()
    finally:
        for a, b in pairs:
            a.close()
            b.close()
