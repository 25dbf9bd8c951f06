"""rrun's side of a node's rnoded restarting under a step (cli/step_io.py, cli/step_tasks.py;
issue 46): the node's connection closing with its tasks unfinished is waited out
(RECONNECT_WAIT); a new connection from the same node, signed with the step's key, carries on;
an exit said again is said once; a node that does not come back loses its tasks as before. Real
sockets (socketpair), a fake clock."""

from __future__ import annotations

import _socket
import argparse
import secrets

import pytest

from ranch.cli import step_tasks
from ranch.cli.step_frames import pack
from ranch.cli.step_io import Conn, StepIO

KEY = secrets.token_bytes(32)
GRANTED = {"job_id": 5, "step_id": 0, "key": KEY.hex(), "nodes": ["n1"], "tasks": [[0]]}


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def make() -> tuple[StepIO, Clock]:
    args = argparse.Namespace(label=False, unbuffered=True, input="none", kill_on_bad_exit=0)
    clock = Clock()
    return StepIO(GRANTED, args, clock=clock), clock


def connect(io: StepIO) -> tuple[Conn, _socket.socket]:
    """A node's connection as rrun accepted it, and the node's end."""
    ours, theirs = _socket.socketpair()
    ours.setblocking(False)
    conn = Conn(ours, KEY, io.clock(), io.seen)
    io.socks[conn.fd] = conn
    return conn, theirs


def say(io: StepIO, conn: Conn, node_end: _socket.socket, *frames: tuple[str, dict]) -> None:
    for kind, body in frames:
        node_end.sendall(pack(kind, body, KEY))
    io.receive(conn)


HELLO = ("StepHello", {"job_id": 5, "step_id": 0, "node": "n1", "tasks": [0]})


def test_a_restarted_rnoded_carries_on_and_an_exit_is_said_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    io, clock = make()
    first, node_end = connect(io)
    say(io, first, node_end, HELLO, ("TaskOutput", {"task": 0, "fd": 1, "data": "one\n"}))
    node_end.close()
    io.receive(first)  # end of file: rnoded stopped
    assert not io.finished and io.exits == {}
    assert io.lost_at == {"n1": clock.now + step_tasks.RECONNECT_WAIT}
    clock.now += step_tasks.RECONNECT_WAIT - 1
    io.expire_lost(clock.now)
    assert not io.finished
    second, node_end = connect(io)  # the next rnoded
    say(io, second, node_end, HELLO, ("TaskOutput", {"task": 0, "fd": 1, "data": "two\n"}),
        ("TaskExit", {"task": 0, "exit_code": 3, "signal": 0}),
        ("TaskExit", {"task": 0, "exit_code": 3, "signal": 0}))
    assert io.conns["n1"] is second and io.lost_at == {} and io.gone == set()
    assert io.finished and io.exits == {0: (3, 0)} and io.exit_code() == 3
    captured = capsys.readouterr()
    assert captured.out == "one\ntwo\n"
    assert captured.err.splitlines() == ["rrun: error: n1: task 0: Exited with exit code 3"]
    node_end.close()


def test_a_node_that_does_not_come_back_loses_its_tasks(
        capsys: pytest.CaptureFixture[str]) -> None:
    io, clock = make()
    conn, node_end = connect(io)
    say(io, conn, node_end, HELLO)
    node_end.close()
    io.receive(conn)
    clock.now += step_tasks.RECONNECT_WAIT
    io.expire_lost(clock.now)
    assert io.finished and io.exits == {0: (1, 0)}
    assert capsys.readouterr().err.splitlines() == [
        "rrun: error: n1: tasks 0: Unknown exit status (node connection lost)"]


def frames_to_node(node_end: _socket.socket) -> list[tuple[str, dict]]:
    """What rrun queued for the node, sent and read back as the node would."""
    from ranch.protocol.cjson import loads
    from ranch.protocol.rawframe import PREFIX, open_frame

    node_end.setblocking(False)
    data = b""
    while True:
        try:
            data += node_end.recv(1 << 16)
        except BlockingIOError:
            break
    out = []
    while data:
        (length,) = PREFIX.unpack_from(data)
        frame = open_frame(data[PREFIX.size:PREFIX.size + length], KEY)
        out.append((frame.type, loads(frame.body)))
        data = data[PREFIX.size + length:]
    return out


def test_rrun_says_what_output_it_took_to_each_rnoded_that_says_hello(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """OutputAck: in answer to each StepHello (a restarted rnoded sends on from its counts) and
    after every ACK_EVERY bytes (the node lets go of what rrun has)."""
    from ranch.cli import step_io

    monkeypatch.setattr(step_io, "ACK_EVERY", 8)
    io, _ = make()
    first, node_end = connect(io)
    say(io, first, node_end, HELLO, ("TaskOutput", {"task": 0, "fd": 1, "data": "one\n"}),
        ("TaskOutput", {"task": 0, "fd": 2, "data": "e\n"}))
    io.flush(first)
    assert frames_to_node(node_end) == [("OutputAck", {"received": []})]
    say(io, first, node_end, ("TaskOutput", {"task": 0, "fd": 1, "data": "two\n"}))
    io.flush(first)
    assert frames_to_node(node_end) == [("OutputAck", {"received": [[0, 1, 8], [0, 2, 2]]})]
    say(io, first, node_end, ("TaskOutput", {"task": 0, "fd": 1, "data": "six\n"}))
    node_end.close()
    io.receive(first)
    second, node_end = connect(io)  # the next rnoded: it hears the counts of every connection
    say(io, second, node_end, HELLO)
    io.flush(second)
    assert frames_to_node(node_end) == [("OutputAck", {"received": [[0, 1, 12], [0, 2, 2]]})]
    assert capsys.readouterr().out == "one\ntwo\nsix\n"
    node_end.close()
