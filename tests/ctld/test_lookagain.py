"""A command whose request was not in when its connection was accepted is looked at once more
after a pass (ctld/rpc/readnow.py, Batch.look_again), over real loopback TCP against a whole
rctld: what arrived meanwhile is answered in the accept loop with no task (a submission after
the journal's write, as a restart finds it); what did not, or a connection dropped meanwhile,
goes to its task; a stop in between closes the connection unanswered."""

from __future__ import annotations

import socket
from typing import Any

import trio

from ranch.ctld.daemon import Daemon
from ranch.ctld.rpc import readnow
from ranch.protocol import messages as m
from ranch.protocol.framing import encode_frame
from tests.ctld.test_readnow import KEY, _rctld, _replies, _until

from .helpers import job, make_config


class _Meanwhile:
    """Batch.look_again with the commands' bytes arriving during its pass, as they do when the
    accept loop wakes at a command's connect, before its send."""

    def __init__(self, monkeypatch: Any) -> None:
        self.todo: list[tuple[socket.socket, Any]] = []
        self.looked: list[int] = []  # how many were waiting at each look
        real = readnow.Batch.look_again
        outer = self

        async def look_again(self: readnow.Batch) -> None:
            if self.later:
                outer.looked.append(len(self.later))
                outer.arrive(self)
            await real(self)

        monkeypatch.setattr(readnow.Batch, "look_again", look_again)

    def arrive(self, batch: readnow.Batch) -> None:
        for sock, msg in self.todo:
            if msg is not None:
                sock.sendall(encode_frame(msg, KEY, request_id=1))
                sock.shutdown(socket.SHUT_WR)
        self.todo.clear()

    def connect(self, port: int, msg: Any) -> socket.socket:
        """A connection whose `msg` (None: nothing) is sent only once the accept loop has it."""
        sock = socket.create_connection(("127.0.0.1", port))
        self.todo.append((sock, msg))
        return sock


async def test_a_request_that_arrives_after_the_accept_is_answered_without_a_task(
        tmp_path, monkeypatch) -> None:
    meanwhile = _Meanwhile(monkeypatch)
    async with _rctld(tmp_path) as (d, port, tasks):
        [pong], closed = await _replies(meanwhile.connect(port, m.Ping()))
        assert type(pong) is m.Pong and closed
        await d.durability.durable()
        writes = d.store.writes
        socks = [meanwhile.connect(port, job(hold=True)) for _ in range(3)]
        answers = [await _replies(s) for s in socks]
        ids = sorted(r.job_id for [r], _ in answers)
        assert all(closed for _, closed in answers) and len(set(ids)) == 3
        assert d.store.writes == writes + 1  # the three late ones share one write
        assert meanwhile.looked == [1, 3]
        assert tasks.started.get("rpc connection", 0) == 0
        await _until(lambda: not d.server.connections)
        assert d.server.admission.open == 0
        again = Daemon(make_config(), KEY, state_dir=str(tmp_path), host="127.0.0.1",
                       port=0, save_in_thread=False)
        again.restore()  # what a restart finds on disk now: the acknowledged jobs
        assert set(ids) <= set(again.controller.jobs.store.jobs)


async def test_one_still_not_in_goes_to_its_task_which_answers_it(tmp_path, monkeypatch) -> None:
    meanwhile = _Meanwhile(monkeypatch)
    async with _rctld(tmp_path) as (_, port, tasks):
        sock = meanwhile.connect(port, None)  # nothing by the second look
        await _until(lambda: tasks.started.get("rpc connection", 0) == 1)
        sock.sendall(encode_frame(m.GetDiag(), KEY, request_id=3))
        sock.shutdown(socket.SHUT_WR)
        [diag], closed = await _replies(sock)
        assert type(diag) is m.Diag and closed
        assert meanwhile.looked == [1]


async def test_one_dropped_meanwhile_to_make_room_is_ended_by_its_task(
        tmp_path, monkeypatch) -> None:
    real = readnow.Batch.look_again
    socks: list[socket.socket] = []

    async def dropped(self: readnow.Batch) -> None:
        for reader in self.later:
            reader.conn.close_soon()  # as Admission.refuses does to make room
        for sock in socks:  # its request in by the look, all the same
            sock.sendall(encode_frame(m.Ping(), KEY, request_id=1))
            sock.shutdown(socket.SHUT_WR)
        await real(self)

    monkeypatch.setattr(readnow.Batch, "look_again", dropped)
    async with _rctld(tmp_path) as (d, port, tasks):
        sock = socket.create_connection(("127.0.0.1", port))
        socks.append(sock)
        await _until(lambda: tasks.started.get("rpc connection", 0) == 1)
        await _until(lambda: not d.server.connections)
        sock.settimeout(5)
        try:
            got = sock.recv(100)
        except ConnectionResetError:  # closed with the request unread
            got = b""
        assert got == b""  # closed unanswered
        sock.close()
        assert d.server.admission.open == 0


async def test_a_stop_before_the_second_look_closes_the_connection_unanswered(
        tmp_path, monkeypatch) -> None:
    d = Daemon(make_config(), KEY, state_dir=str(tmp_path), host="127.0.0.1", port=0,
               save_in_thread=False)
    real = readnow.Batch.look_again
    stop = trio.CancelScope()

    async def stopped(self: readnow.Batch) -> None:
        if self.later:
            stop.cancel()  # the server stops during the pass before the look
        await real(self)

    monkeypatch.setattr(readnow.Batch, "look_again", stopped)
    with stop:
        async with trio.open_nursery() as nursery:
            port = (await nursery.start(d.run))[0].socket.getsockname()[1]
            sock = socket.create_connection(("127.0.0.1", port))
            await trio.sleep_forever()
    assert d.server.connections == set() and d.server.admission.open == 0
    sock.settimeout(5)
    assert sock.recv(100) == b""
    sock.close()
