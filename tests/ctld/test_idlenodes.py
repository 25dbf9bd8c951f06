"""Registered nodes between frames are parked on the server's epoll with no task each
(ctld/rpc/idlenodes.py), over real loopback TCP: a parked node is read when it speaks, closed at
once by close_soon, forgotten when it hangs up, and closed when the server stops; a busy poller
gathers a few milliseconds of frames per wake-up, a quiet one takes a frame at once (as it does
one node's frames in quick succession). A plain heartbeat is answered in the poller's own task,
a storm's batch of them in slices; whatever it cannot finish (a reply that waits for the
journal, a frame not yet whole, two at once, another request, a refused frame) a task carries
on, and a reply the kernel takes only part of is finished by one, in order; a failure there ends
that connection, never the poller."""

from __future__ import annotations

import collections
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import orjson
import pytest
import trio
import trio.testing

from ranch.ctld.compose.layers import rpc_server
from ranch.ctld.rpc import idlenodes
from ranch.ctld.rpc.connection import Connection, Links
from ranch.ctld.rpc.fastio import RawStream, StreamIO
from ranch.ctld.rpc.idlenodes import GATHER, GATHER_LONG, LONG_FROM, IdleNodes
from ranch.protocol import messages as m
from ranch.protocol.versions import CURRENT
from tests.ctld.helpers import wall
from tests.ctld.test_connections import (
    KEY,
    _beat,
    _cluster,
    _frame,
    _read_frames,
    _register,
    _server,
)


async def _until(cond: Callable[[], bool], what: str) -> None:
    with trio.move_on_after(10):
        while not cond():
            await trio.sleep(0.005)
    assert cond(), f"not {what} within 10 s"


class _Tasks(trio.abc.Instrument):
    """Counts the connection tasks started (the reader's, ctld/rpc/server.py names them)."""

    def __init__(self) -> None:
        self.started = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.started += task.name == "rpc connection"


@asynccontextmanager
async def _parked_node(sync: Callable[[], Any] | None = None, version: int = 3,
                       settle_here: bool = False) -> AsyncIterator[tuple]:
    """(cluster, server, the node's stream): a server on loopback TCP
    whose node n1 registered (speaking protocol `version`) and is parked; the server is
    stopped when the block ends. `sync`: the server's journal write (none by default);
    `settle_here`: it holds the loop (the file journal's), as the daemon then tells the server."""
    cluster = _cluster()
    if sync is None:
        server = _server(cluster)
    else:
        async def reconfigure(who: str) -> m.ReconfigureResult:
            return m.ReconfigureResult(ok=True)

        server = rpc_server(cluster.controller, KEY, reconfigure=reconfigure, sync=sync,
                            settle_here=settle_here)
    async with trio.open_nursery() as outer:
        server.spawn = outer.start_soon
        async with trio.open_nursery() as nursery:
            [listener] = await nursery.start(partial(server.serve_tcp, 0, host="127.0.0.1"))
            stream = await trio.open_tcp_stream("127.0.0.1", listener.socket.getsockname()[1])
            await stream.send_all(_frame(_register(), 1, version=version))
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


async def test_a_parked_nodes_heartbeats_are_answered_without_a_task() -> None:
    tasks = _Tasks()
    async with _parked_node() as (cluster, server, stream):
        trio.lowlevel.add_instrument(tasks)
        try:
            for seq in range(1, 6):
                await stream.send_all(_frame(_beat("n1", seq), 100 + seq))
                [reply] = await _read_frames(stream, 1)
                assert reply.request_id == 100 + seq
                assert reply.msg.node_state.startswith("IDLE")
                await _until(lambda: len(server.idle) == 1, "parked again")
            # the Ack of a push has no reply: taken, and the node parked again
            [conn] = server.connections
            await stream.send_all(_frame(m.Ack(), 200))  # on loopback: in rctld's socket now
            await _until(lambda: conn.io.unread() == 0 and len(server.idle) == 1,
                         "read, and parked after the Ack")
            await stream.send_all(_frame(_beat("n1", 6), 201))
            [reply] = await _read_frames(stream, 1)
            assert reply.request_id == 201  # nothing came for the Ack
        finally:
            trio.lowlevel.remove_instrument(tasks)
        assert tasks.started == 0
        assert cluster.nodes["n1"].seq == 6


async def _ending_answered_after_the_write(stream: trio.SocketStream, syncs: list[float],
                                          written: trio.Event) -> Any:
    """Send a beat that carries an ending (request 11), see the journal's write begin and no
    reply leave before the test lets the write end; the reply then."""
    ending = attrs.evolve(_beat("n1", 1), jobs_ended=(m.JobEnd(77, "COMPLETED"),))
    await stream.send_all(_frame(ending, 11, version=CURRENT))
    await _until(lambda: bool(syncs), "the write begun")
    with trio.move_on_after(0.2):
        await stream.receive_some(1 << 16)
        raise AssertionError("a reply confirming an ending left before the write")
    written.set()
    [reply] = await _read_frames(stream, 1)
    return reply


async def test_what_a_heartbeat_cannot_finish_a_task_carries_on() -> None:
    written = trio.Event()
    syncs: list[float] = []

    async def sync() -> None:  # the journal's write, held until the test lets it go
        syncs.append(trio.current_time())
        await written.wait()

    tasks = _Tasks()
    async with _parked_node(sync) as (cluster, server, stream):
        trio.lowlevel.add_instrument(tasks)
        try:
            reply = await _ending_answered_after_the_write(stream, syncs, written)
            assert reply.request_id == 11 and type(reply.msg) is m.HeartbeatReply
            await _until(lambda: len(server.idle) == 1, "parked after the ending")
            # two beats in one write: both answered, in order
            await stream.send_all(_frame(_beat("n1", 2), 12) + _frame(_beat("n1", 3), 13))
            assert [f.request_id for f in await _read_frames(stream, 2)] == [12, 13]
            await _until(lambda: len(server.idle) == 1, "parked after two")
            # a beat in two pieces: answered once it is whole
            whole = _frame(_beat("n1", 4), 14)
            await stream.send_all(whole[:40])
            await trio.sleep(0.05)
            await stream.send_all(whole[40:])
            [reply] = await _read_frames(stream, 1)
            assert reply.request_id == 14
            await _until(lambda: len(server.idle) == 1, "parked after the pieces")
            # another request: its route's task answers it
            await stream.send_all(_frame(m.Ping(), 15))
            [reply] = await _read_frames(stream, 1)
            assert reply.request_id == 15 and type(reply.msg) is m.Pong
            await _until(lambda: len(server.idle) == 1, "parked after the ping")
            assert cluster.nodes["n1"].seq == 4
            assert tasks.started == 4  # one for each of the four above
            # a frame signed with another key: refused, and the connection ends
            await stream.send_all(_frame(_beat("n1", 5), 16)[:-1] + b"?")
            [reply] = await _read_frames(stream, 1)
            assert type(reply.msg) is m.Error and reply.msg.code == "bad_mac"
            await _until(lambda: not server.connections, "closed")
            assert cluster.nodes["n1"].conn is None
        finally:
            trio.lowlevel.remove_instrument(tasks)


@pytest.mark.parametrize("in_answer", [True, False], ids=["in-the-answer", "ack-then-request"])
async def test_a_launchs_start_time_waits_for_no_task_and_no_write(in_answer: bool) -> None:
    """rctld asks for the start time in the LaunchJob's answer (`started_answer`). Given there
    (JobStarted with `answers_launch`, the push's request id) it gets no reply: the next frame
    the node reads is its heartbeat's reply. An rnoded from before issue 50 ignores the field: it
    answers Ack, then sends JobStarted as a request, answered with an Ack. Neither way confirms
    anything the node keeps (it never sends JobStarted again; a lost one leaves the controller's
    own start time), so each is taken in the poller's task while the journal's write is held,
    and the start time goes with the next write."""
    from tests.ctld.test_allocations import alloc

    written = trio.Event()

    async def sync() -> None:  # the journal's write, held for the whole test
        await written.wait()

    tasks = _Tasks()
    async with _parked_node(sync, version=CURRENT) as (cluster, server, stream):
        job_id = cluster.jobs.submission.submit(alloc(nodelist="n1", num_nodes=1)).job_id
        [push] = await _read_frames(stream, 1)
        assert type(push.msg) is m.LaunchJob and push.msg.job.job_id == job_id
        assert push.msg.started_answer
        cluster.take_unsynced()  # the submission's records: what follows is the start's
        await _until(lambda: len(server.idle) == 1, "parked after the push")
        trio.lowlevel.add_instrument(tasks)
        try:
            [conn] = server.connections
            started_at = wall() - 0.25  # the node's own clock, a little before the launch
            first = m.JobStarted(job_id, 0, started_at, answers_launch=True) if in_answer \
                else m.Ack()
            await stream.send_all(_frame(first, push.request_id, version=CURRENT))
            await _until(lambda: conn.io.unread() == 0 and len(server.idle) == 1,
                         "the answer read, and the node parked again")
            then, expect = (_beat("n1", 2), m.HeartbeatReply) if in_answer else \
                (m.JobStarted(job_id, 0, started_at), m.Ack)
            await stream.send_all(_frame(then, 42, version=CURRENT))
            with trio.fail_after(5):  # with the write still held
                [reply] = await _read_frames(stream, 1)
            assert reply.request_id == 42 and type(reply.msg) is expect
            await _until(lambda: len(server.idle) == 1, "parked again")
        finally:
            trio.lowlevel.remove_instrument(tasks)
        assert tasks.started == 0
        assert not written.is_set()
        assert cluster.jobs.store.jobs[job_id].start_time == started_at
        saved = [r["job"] for r in orjson.loads(orjson.dumps(cluster.take_unsynced()))]
        assert [(j["id"], j["start_time"]) for j in saved] == [(job_id, started_at)]


@pytest.mark.parametrize("fails", [False, True], ids=["written", "not-written"])
async def test_a_beat_with_an_ending_is_answered_after_the_write_with_no_task(
        fails: bool) -> None:
    """With the file journal's write (it holds the loop anyway), the reply to a beat that
    carried an ending is sent from the poller's task once the write is done, and the node
    parked again: no task. A write that failed answers an Error (the node keeps the ending and
    sends it again)."""
    written = trio.Event()
    syncs: list[float] = []

    async def sync() -> None:  # the journal's write, held until the test lets it go
        syncs.append(trio.current_time())
        await written.wait()
        if fails:
            raise OSError(28, "No space left on device")

    tasks = _Tasks()
    async with _parked_node(sync, version=CURRENT, settle_here=True) as (_, server, stream):
        trio.lowlevel.add_instrument(tasks)
        try:
            reply = await _ending_answered_after_the_write(stream, syncs, written)
            assert reply.request_id == 11
            if fails:
                assert type(reply.msg) is m.Error and "No space left" in reply.msg.message
            else:
                assert type(reply.msg) is m.HeartbeatReply
            await _until(lambda: len(server.idle) == 1, "parked after the ending")
            await stream.send_all(_frame(_beat("n1", 2), 12, version=CURRENT))
            [reply] = await _read_frames(stream, 1)
            assert reply.request_id == 12 and type(reply.msg) is m.HeartbeatReply
        finally:
            trio.lowlevel.remove_instrument(tasks)
        assert tasks.started == 0 and len(syncs) == 1


async def test_an_ending_beats_reply_behind_another_write_goes_to_the_task() -> None:
    """A reply settled in the poller's task while another write to the node is under way (a
    push the kernel did not take at once) is left to the connection's task, which sends it
    after that write, once, and parks the node again."""
    async def sync() -> None:
        return None

    tasks = _Tasks()
    async with _parked_node(sync, version=CURRENT, settle_here=True) as (_, server, stream):
        [conn] = server.connections
        lock = conn._locked()  # another write under way
        trio.lowlevel.add_instrument(tasks)
        try:
            ending = attrs.evolve(_beat("n1", 1), jobs_ended=(m.JobEnd(77, "COMPLETED"),))
            await stream.send_all(_frame(ending, 11, version=CURRENT))
            await _until(lambda: tasks.started == 1, "the task started")
            lock.release()
            [reply] = await _read_frames(stream, 1)
            assert reply.request_id == 11 and type(reply.msg) is m.HeartbeatReply
            await _until(lambda: len(server.idle) == 1, "parked again")
        finally:
            trio.lowlevel.remove_instrument(tasks)
        assert tasks.started == 1


async def test_a_failure_acting_on_a_beat_ends_that_connection_not_the_poller(
        monkeypatch) -> None:
    from ranch.ctld.rpc import server as server_module

    def broken(*args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError("encoder broke")

    async with _parked_node() as (cluster, server, stream):
        monkeypatch.setattr(server_module, "encode_body_frame", broken)
        await stream.send_all(_frame(_beat("n1", 1), 31))
        assert await stream.receive_some(100) == b""  # that connection ends
        assert server.idle.running and cluster.nodes["n1"].conn is None
        monkeypatch.undo()
        # the poller still serves: a node that registers again is read and answered
        again = await trio.open_tcp_stream(*stream.socket.getpeername())
        await again.send_all(_frame(_register(), 32))
        [reply] = await _read_frames(again, 1)
        assert reply.msg.accepted
        await _until(lambda: len(server.idle) == 1, "parked")
        await again.send_all(_frame(_beat("n1", 2), 33))
        [reply] = await _read_frames(again, 1)
        assert reply.request_id == 33 and type(reply.msg) is m.HeartbeatReply
        await again.aclose()


async def test_a_reply_the_kernel_takes_in_part_is_finished_in_order() -> None:
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    theirs.setblocking(False)
    try:
        async with trio.open_nursery() as nursery:
            links = Links(spawn=lambda: nursery.start_soon, connections={None},
                          idle=IdleNodes(lambda conn: None), message_timeout=lambda: 10.0,
                          encode=lambda *a, **k: b"")
            conn = Connection(RawStream(ours), "peer", links)
            first, second = b"a" * 300_000, b"b" * 1000
            assert conn.send_now(first) is True  # the kernel took part; a task writes the rest
            assert conn.send_lock is not None and conn.send_lock.value == 0
            assert conn.send_now(second) is None  # nothing written while that one is under way
            nursery.start_soon(conn.send, second)  # waits for the rest, then goes
            got = bytearray()
            while len(got) < len(first) + len(second):
                await trio.lowlevel.wait_readable(theirs)
                got += theirs.recv(1 << 16)
            assert bytes(got) == first + second
            lock = conn.send_lock
            await _until(lambda: lock.value == 1, "the lock let go")
    finally:
        ours.close()
        theirs.close()


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

    def quick(self) -> bool:
        return False  # nothing it can act on in the poller's task: a task reads it

    async def run(self) -> None:
        self.started.append((self.n, trio.current_time()))
        assert self.conn.io.read_now(16) == b"x"


@attrs.define
class _Parked:
    """A running poller with `n` parked readers, a second after they were parked."""

    idle: IdleNodes
    pairs: list[tuple[socket.socket, socket.socket]]
    readers: list[_Reader]
    started: list[tuple[int, float]]

    def send(self, k: int) -> None:
        self.pairs[k][1].send(b"x")


@asynccontextmanager
async def _parked(n: int) -> AsyncIterator[_Parked]:
    idle = IdleNodes(lambda conn: None)
    pairs = [socket.socketpair() for _ in range(n)]
    started: list[tuple[int, float]] = []
    readers = [_Reader(ours, started, k) for k, (ours, _) in enumerate(pairs)]
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(idle.run, nursery)
            await trio.testing.wait_all_tasks_blocked()
            assert all(idle.park(r) for r in readers)
            await trio.sleep(1.0)
            yield _Parked(idle, pairs, readers, started)
            nursery.cancel_scope.cancel()
    finally:
        for a, b in pairs:
            a.close()
            b.close()


async def test_a_busy_poller_gathers_and_a_quiet_one_answers_at_once(
        autojump_clock: trio.testing.MockClock) -> None:
    async with _parked(3) as p:
        started = p.started
        quiet = trio.current_time()
        p.send(0)  # after a quiet spell: taken at once
        await trio.testing.wait_all_tasks_blocked()
        assert started == [(0, quiet)] and trio.current_time() == quiet
        p.send(1)  # one wake-up is not busy: taken at once too
        await trio.testing.wait_all_tasks_blocked()
        assert started == [(0, quiet), (1, quiet)]
        p.send(2)  # two wake-ups close together: busy, it waits for the gather
        assert p.idle.park(p.readers[1])
        p.send(1)
        await _until(lambda: len(started) == 4, "started")
        assert sorted(started[2:]) == [(1, quiet + GATHER), (2, quiet + GATHER)]
        assert p.idle.park(p.readers[0])
        await trio.sleep(GATHER * 4)
        again = trio.current_time()
        p.send(0)
        await _until(lambda: len(started) == 5, "started again")
        assert started[4] == (0, again)


async def test_one_nodes_frames_in_quick_succession_leave_the_poller_quiet(
        autojump_clock: trio.testing.MockClock) -> None:
    """A job's start and its end come from one node some milliseconds apart: two wake-ups for
    the same one socket do not make the poller busy, so the next frame (another node's) is
    taken at once, not after a gather that wakes rctld for nothing."""
    async with _parked(2) as p:
        started = p.started
        t0 = trio.current_time()
        p.send(0)
        await trio.testing.wait_all_tasks_blocked()
        assert p.idle.park(p.readers[0])
        await trio.sleep(GATHER / 2)
        p.send(0)  # the same node again
        await trio.testing.wait_all_tasks_blocked()
        assert started == [(0, t0), (0, t0 + GATHER / 2)]
        p.send(1)
        await trio.testing.wait_all_tasks_blocked()
        assert started[-1] == (1, t0 + GATHER / 2)
        assert p.idle.park(p.readers[0])
        p.send(0)  # two sockets in a row close together: busy, as before
        await _until(lambda: len(started) == 4, "started after the gather")
        assert started[-1] == (0, t0 + GATHER / 2 + GATHER)


async def test_a_gather_that_finds_many_sockets_is_followed_by_a_longer_one(
        autojump_clock: trio.testing.MockClock) -> None:
    async with _parked(LONG_FROM + 2) as p:
        started = p.started
        t0 = trio.current_time()
        for k in (0, 1):  # two wake-ups at once: busy from here
            p.send(k)
            await trio.testing.wait_all_tasks_blocked()
        assert started == [(0, t0), (1, t0)]
        for k in range(2, 2 + LONG_FROM):  # the short gather finds LONG_FROM sockets
            p.send(k)
        await _until(lambda: len(started) == 2 + LONG_FROM, "the short gather")
        assert {t for _, t in started[2:]} == {t0 + GATHER}
        assert p.idle.park(p.readers[0]) and p.idle.park(p.readers[1])
        p.send(0)  # so the next one waits the long gather out
        await _until(lambda: len(started) == 3 + LONG_FROM, "the long gather")
        assert started[-1] == (0, t0 + GATHER + GATHER_LONG)
        p.send(1)  # it found one: back to the short gather, or none
        await _until(lambda: len(started) == 4 + LONG_FROM, "after the long gather")
        assert started[-1][1] <= t0 + 2 * GATHER + GATHER_LONG


class _Steps(trio.abc.Instrument):
    """Numbers each step any task takes."""

    def __init__(self) -> None:
        self.step = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.step += 1


class _QuickReader(_Reader):
    """A parked reader whose frames are all acted on in the poller's task (noting the step)."""

    steps = _Steps()

    def quick(self) -> bool:
        assert self.conn.io.read_now(16) == b"x"
        self.started.append((self.n, self.steps.step))
        return True


async def test_a_storms_batch_is_acted_on_in_slices(monkeypatch) -> None:
    monkeypatch.setattr(idlenodes, "QUICK_SLICE", 2)
    idle = IdleNodes(lambda conn: None)
    pairs = [socket.socketpair() for _ in range(5)]
    taken: list[tuple[int, int]] = []
    readers = [_QuickReader(ours, taken, n) for n, (ours, _) in enumerate(pairs)]  # type: ignore[arg-type]
    trio.lowlevel.add_instrument(_QuickReader.steps)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(idle.run, nursery)
            await trio.testing.wait_all_tasks_blocked()
            assert all(idle.park(r) for r in readers)
            for _, theirs in pairs:
                theirs.send(b"x")
            await _until(lambda: len(taken) == 5, "all taken")
            per_step = collections.Counter(step for _, step in taken)
            assert max(per_step.values()) == 2 and len(per_step) == 3  # 2 + 2 + 1
            assert len(idle) == 0  # each acted on (the stub does not park again)
            nursery.cancel_scope.cancel()
    finally:
        trio.lowlevel.remove_instrument(_QuickReader.steps)
        for a, b in pairs:
            a.close()
            b.close()
