"""A command's one request answered in the accept loop's pass (ctld/rpc/readnow.py), over real
loopback TCP against a whole rctld (its file journal): a request and the end of stream already
in the kernel are answered with no task for the connection, and the connection closed; the
submissions of one accept batch share one journal write and one task, each reply leaving after
it; a failed write refuses and retracts the jobs; anything else (no end of stream yet, a request
whose route waits, a reply the kernel takes in part, the server stopping) is finished as before."""

from __future__ import annotations

import errno
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import pytest
import trio

from ranch.ctld.compose.layers import rpc_server
from ranch.ctld.daemon import Daemon
from ranch.ctld.rpc import readnow
from ranch.ctld.rpc.fastio import StreamIO
from ranch.protocol import durable
from ranch.protocol import messages as m
from ranch.protocol.framing import FrameDecoder, encode_frame
from tests.ctld.harness import Harness as Cluster

from .helpers import job, make_config, wall

KEY = b"k" * 32


class _Tasks(trio.abc.Instrument):
    """Counts the tasks started by name (ctld/rpc/server.py names a connection's and a batch's)."""

    def __init__(self) -> None:
        self.started: dict[str, int] = {}

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.started[task.name] = self.started.get(task.name, 0) + 1


@asynccontextmanager
async def _rctld(tmp_path: Any) -> AsyncIterator[tuple[Daemon, int, _Tasks]]:
    d = Daemon(make_config(), KEY, state_dir=str(tmp_path), host="127.0.0.1", port=0,
               save_in_thread=False)
    tasks = _Tasks()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(d.run)
        trio.lowlevel.add_instrument(tasks)
        try:
            yield d, listeners[0].socket.getsockname()[1], tasks
        finally:
            trio.lowlevel.remove_instrument(tasks)
            nursery.cancel_scope.cancel()


def _send(port: int, *msgs: Any, half_close: bool = True) -> socket.socket:
    """A command's connection, its request(s) written, without yielding to rctld: the accept
    loop finds them in the kernel (and the end of stream, `half_close`)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"".join(encode_frame(msg, KEY, request_id=i) for i, msg in
                          enumerate(msgs, 1)))
    if half_close:
        sock.shutdown(socket.SHUT_WR)
    return sock


async def _replies(sock: socket.socket, count: int = 1) -> tuple[list[Any], bool]:
    """(the replies, whether rctld closed the connection after them)."""
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    decoder, got = FrameDecoder(KEY), list[Any]()
    with trio.fail_after(10):
        while len(got) < count:
            data = await stream.receive_some(1 << 16)
            assert data, f"closed after {len(got)} of {count} replies"
            decoder.feed(data)
            got.extend(f.msg for f in decoder)
        closed = await stream.receive_some(1 << 16) == b""
    await stream.aclose()
    return got, closed


async def _next(stream: trio.SocketStream, decoder: FrameDecoder) -> Any:
    with trio.fail_after(10):
        while (frame := decoder.next_frame()) is None:
            data = await stream.receive_some(1 << 16)
            assert data, "closed before the reply"
            decoder.feed(data)
    return frame


async def _until(cond: Callable[[], bool]) -> None:
    with trio.fail_after(10):
        while not cond():
            await trio.sleep(0.005)


async def test_a_read_and_the_end_of_stream_in_the_kernel_are_answered_without_a_task(
        tmp_path) -> None:
    async with _rctld(tmp_path) as (d, port, tasks):
        for msg, kind in ((m.Ping(), m.Pong), (m.GetSnapshot(), m.Snapshot),
                          (m.GetJobs(), m.JobList), (m.GetDiag(), m.Diag)):
            [reply], closed = await _replies(_send(port, msg))
            assert type(reply) is kind and closed
        assert tasks.started.get("rpc connection", 0) == 0
        assert d.server.connections == set() and d.server.admission.open == 0


async def test_a_batchs_submissions_share_one_write_and_each_reply_follows_it(tmp_path) -> None:
    async with _rctld(tmp_path) as (d, port, tasks):
        await d.durability.durable()
        writes = d.store.writes
        socks = [_send(port, job(hold=True)) for _ in range(4)]  # before rctld runs a step
        answers = [await _replies(s) for s in socks]
        ids = sorted(r.job_id for [r], _ in answers)
        assert all(closed for _, closed in answers) and len(set(ids)) == 4
        again = Daemon(make_config(), KEY, state_dir=str(tmp_path), host="127.0.0.1",
                       port=0, save_in_thread=False)
        again.restore()  # what a restart finds on disk now: the acknowledged jobs
        assert set(ids) <= set(again.controller.jobs.store.jobs)
        assert d.store.writes - writes == 1  # one write for the batch
        assert tasks.started.get("rpc connection", 0) == 0
        assert tasks.started.get("rpc settle", 0) == 0  # the file journal: the accept loop's
        assert d.server.connections == set() and d.server.admission.open == 0


async def test_with_a_write_that_waits_on_the_network_one_task_settles_the_batch() -> None:
    """etcd's journal (settle_here off): the accept loop hands the batch's replies to one task
    and goes on accepting; each reply leaves after the one write."""
    cluster = Cluster(make_config(), wall=wall)
    jobs = cluster.controller.jobs.submission
    ids = [jobs.submit(job(hold=True)).job_id for _ in range(3)]
    writes: list[set[int]] = []

    async def sync() -> None:  # etcd's: a round trip, then the batch is on disk
        await trio.sleep(0.05)
        writes.append({j for j, rec in cluster.controller.jobs.store.jobs.items()
                       if rec.state == "CANCELLED"})

    async def reconfigure(who: str) -> m.ReconfigureResult:
        return m.ReconfigureResult(ok=True)

    server = rpc_server(cluster.controller, KEY, reconfigure=reconfigure, sync=sync)
    tasks = _Tasks()
    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(partial(server.serve_tcp, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        trio.lowlevel.add_instrument(tasks)
        try:
            socks = [_send(port, m.CancelJobs(job_ids=(jid,), user="root", uid=0)) for jid in ids]
            for sock in socks:
                [reply], closed = await _replies(sock)
                assert type(reply) is m.JobResult and reply.ok and closed, reply
        finally:
            trio.lowlevel.remove_instrument(tasks)
        assert writes == [set(ids)]  # one write, holding every cancel, before any reply
        assert tasks.started.get("rpc settle") == 1
        assert tasks.started.get("rpc connection", 0) == 0
        nursery.cancel_scope.cancel()


async def test_a_failed_write_refuses_and_retracts_the_batchs_jobs(tmp_path,
                                                                     monkeypatch) -> None:
    def failing(fd: int, data: bytes) -> None:
        raise OSError(errno.EIO, "Input/output error")

    async with _rctld(tmp_path) as (d, port, tasks):
        kept = (await d.durability.submit(job(hold=True))).job_id
        monkeypatch.setattr(durable, "write_all_fsync", failing)  # the disk fails from now
        socks = [_send(port, job(hold=True)) for _ in range(2)]
        for sock in socks:
            [reply], closed = await _replies(sock)
            assert type(reply) is m.Error and reply.code == "internal", reply
            assert "could not be written" in reply.message and closed
        # retracted: never acknowledged, never run
        assert list(d.controller.jobs.store.jobs) == [kept]
        assert tasks.started.get("rpc connection", 0) == 0


@pytest.mark.parametrize("settle_here", [True, False])
async def test_a_fault_while_a_batch_waits_ends_its_connections_not_the_server(
        settle_here: bool) -> None:
    cluster = Cluster(make_config(), wall=wall)
    jid = cluster.controller.jobs.submission.submit(job(hold=True)).job_id

    async def sync() -> None:  # a fault of ours, not the disk's
        raise RuntimeError("a bug")

    async def reconfigure(who: str) -> m.ReconfigureResult:
        return m.ReconfigureResult(ok=True)

    server = rpc_server(cluster.controller, KEY, reconfigure=reconfigure, sync=sync,
                        settle_here=settle_here)
    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(partial(server.serve_tcp, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        sock = _send(port, m.CancelJobs(job_ids=(jid,), user="root", uid=0))
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        with trio.fail_after(10):
            assert await stream.receive_some(100) == b""  # closed unanswered
        [pong], closed = await _replies(_send(port, m.Ping()))  # and the server goes on
        assert type(pong) is m.Pong and closed
        assert server.connections == set()
        nursery.cancel_scope.cancel()


async def test_what_it_cannot_finish_the_connections_task_carries_on(tmp_path) -> None:
    async with _rctld(tmp_path) as (d, port, tasks):
        # no end of stream yet: the task answers, and reads the next request on the connection
        sock = _send(port, m.Ping(), half_close=False)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        decoder = FrameDecoder(KEY)
        assert type((await _next(stream, decoder)).msg) is m.Pong
        await stream.send_all(encode_frame(m.GetDiag(), KEY, request_id=7))
        await stream.send_eof()
        reply = await _next(stream, decoder)
        assert reply.request_id == 7 and type(reply.msg) is m.Diag
        assert tasks.started["rpc connection"] == 1
        # two requests at once, and a request whose route waits (racct's): each by its task
        [a, b], closed = await _replies(_send(port, m.Ping(), m.GetConfig()), 2)
        assert (type(a), type(b)) == (m.Pong, m.ConfigDump) and closed
        [acct], closed = await _replies(_send(port, m.GetAcct()))
        assert type(acct) is m.AcctList and closed
        assert tasks.started["rpc connection"] == 3
        await _until(lambda: not d.server.connections)


async def test_a_reply_the_kernel_takes_in_part_is_finished_then_closed(tmp_path,
                                                                        monkeypatch) -> None:
    real = StreamIO.try_send

    def stingy(self: StreamIO, data: bytes) -> int:
        return real(self, data[:100])  # the kernel's buffer full after 100 bytes

    async with _rctld(tmp_path) as (_, port, tasks):
        monkeypatch.setattr(StreamIO, "try_send", stingy)
        [reply], closed = await _replies(_send(port, m.GetSnapshot()))
        assert type(reply) is m.Snapshot and reply.nodes and closed
        assert tasks.started.get("rpc connection", 0) == 0


async def test_stopping_while_a_batch_waits_closes_its_connections_unanswered(tmp_path) -> None:
    d = Daemon(make_config(), KEY, state_dir=str(tmp_path), host="127.0.0.1", port=0,
               save_in_thread=False)

    async def stalled() -> None:  # a journal write that does not end before the stop
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        port = (await nursery.start(d.run))[0].socket.getsockname()[1]
        d.server.steps = attrs.evolve(d.server.steps, sync=stalled)  # the readers made from now
        sock = _send(port, job(hold=True))
        await _until(lambda: len(d.controller.jobs.store.jobs) == 1)  # acted on, reply held
        nursery.cancel_scope.cancel()
    assert d.server.connections == set() and d.server.admission.open == 0
    sock.settimeout(5)
    assert sock.recv(100) == b""  # closed unanswered, as its task was
    sock.close()


AT_ONCE_REQUESTS = [
    m.Ping(), m.GetSnapshot(), m.GetJobs(), m.GetDiag(), m.GetConfig(),
    m.PriorityRequest(), m.ShareRequest(), job(hold=True), m.CancelJobs(job_ids=(99,)),
    m.JobControl("hold", (99,)),
]


def test_every_at_once_request_is_checked_below() -> None:
    assert {type(msg) for msg in AT_ONCE_REQUESTS} == readnow.AT_ONCE


@pytest.mark.parametrize("msg", AT_ONCE_REQUESTS, ids=lambda msg: type(msg).__name__)
async def test_each_at_once_route_answers_without_waiting(tmp_path, msg) -> None:
    """The accept loop may act only on routes that never wait: each in AT_ONCE answers at once
    (dispatch_now refuses a route that returns a coroutine, with a TypeError)."""
    d = Daemon(make_config(), KEY, state_dir=str(tmp_path), host="127.0.0.1", port=0,
               save_in_thread=False)

    class Conn:
        who = None
        node = None
        peer = "test"

    reply, _ = d.server.dispatcher.dispatch_now(Conn(), msg)
    assert reply is not None
