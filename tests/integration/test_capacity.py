"""Restart storms: a node refused for the controller's connection cap is told so, never marked
DOWN, and admitted once a place frees (ctld/rpc/capacity.py); a Register left unread past its
deadline by the controller itself is still served (ctld/rpc/reading.py)."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

from ranch.protocol import messages as m
from ranch.protocol.framing import FrameDecoder, encode_frame
from ranch.protocol.messages import Hardware

from .cluster import Cluster

FD_LIMIT = 96  # rctld: a reserve of 64 descriptors, 32 connections in all, 16 of them for nodes
PLACES = 32
NODE_PLACES = 16


def _ask(sock: socket.socket, key: bytes, msg: object, rid: int) -> object:
    """Send `msg` on a held connection and read its reply."""
    sock.sendall(encode_frame(msg, key, request_id=rid))
    dec = FrameDecoder(key, max_size=64 << 20)
    sock.settimeout(10)
    while True:
        data = sock.recv(1 << 16)
        assert data, "rctld closed a proven connection"
        dec.feed(data)
        for frame in dec:
            if frame.request_id == rid:
                return frame.msg


def _state(sock: socket.socket, key: bytes, name: str, rid: int) -> str:
    snap = _ask(sock, key, m.GetSnapshot(), rid)
    assert isinstance(snap, m.Snapshot), snap
    return next(n["complete"] for n in snap.nodes if n["name"] == name)


def test_a_node_over_the_cap_is_told_so_kept_up_and_admitted_once_room_frees(
        tmp_path: Path) -> None:
    with Cluster(tmp_path, ["n1"], ctld_fd_limit=FD_LIMIT) as c:
        c.start_ctld()
        log = c.log("rctld")
        assert f"fd_limit={FD_LIMIT} connections={PLACES}" in log
        assert "nodes_allowed=16 nodes=1" in log
        # Every place nodes may take held by a peer that proved the key (a Ping answered on
        # each).
        held = []
        for i in range(NODE_PLACES):
            s = socket.create_connection(c.addr, timeout=10)
            assert isinstance(_ask(s, c.key, m.Ping(), i + 1), m.Pong)
            held.append(s)
        c.start_node("n1")
        refused = "connection refused: at the connection limit"
        c.wait_for(lambda: refused in c.log("rctld"), timeout=30, what="n1 refused")
        assert "node=n1" in c.log("rctld").split(refused, 1)[1].splitlines()[0]
        # The node read why, in words, and keeps trying.
        c.wait_for(lambda: "busy: rctld is at its connection limit" in c.log("n1"),
                   timeout=30, what="rnoded logs the refusal")
        # Past SlurmdTimeout (3 s) and two heartbeat intervals, still refused: never DOWN (its
        # retries come within BUSY_RETRY, 5 s).
        rid = 100
        until = time.monotonic() + 8.0
        states = set()
        while time.monotonic() < until:
            rid += 1
            states.add(_state(held[0], c.key, "n1", rid))
            time.sleep(0.3)
        assert not any("DOWN" in s for s in states), states
        # nor NOT_RESPONDING from the first refusal on (before it, rctld had not heard of n1)
        after = c.log("rctld").split(refused, 1)[1]
        assert "node=n1 old=" not in after, after
        assert c.log("n1").count("has no place for this node's connection") >= 2, c.log("n1")
        # Commands still get in, to the places kept for them.
        r = c.run_cli("ranch.cli.rinfo", "-h", "-o", "%n %t")
        assert r.returncode == 0 and "n1" in r.stdout, r.stderr
        # A place frees: the node gets it at its next try.
        for s in held[1:4]:
            s.close()
        c.wait_for(lambda: _state(held[0], c.key, "n1", rid + 1) == "IDLE", timeout=30,
                   what="n1 admitted")
        for s in held:
            s.close()


def test_a_register_that_came_in_time_but_waited_on_a_stopped_rctld_is_read(
        tmp_path: Path) -> None:
    """The first-frame deadline measures the peer: Registers sent within MessageTimeout of
    connecting, then left unread past it by a controller that could not run, are served."""
    with Cluster(tmp_path, [f"n{i}" for i in range(1, 41)]) as c:
        c.start_ctld()
        assert c.ctld is not None
        connected = time.monotonic()
        socks = [socket.create_connection(c.addr, timeout=10) for _ in range(40)]
        time.sleep(0.3)  # accepted, each under its deadline (MessageTimeout=3 s)
        c.ctld.send_signal(signal.SIGSTOP)
        try:
            for i, s in enumerate(socks, 1):
                s.sendall(encode_frame(m.Register(f"n{i}", Hardware(1, 1, 1, 1, 1, 64, 0),
                                                  boot_time=time.time() - 100,
                                                  rnoded_version="test"), c.key,
                                       request_id=1))
            # The scenario itself, not a wait for an outcome: a controller that cannot run
            # until every first-frame deadline (MessageTimeout=3 s from connecting) has passed,
            # with the Registers unread in its sockets. Nothing in the stopped rctld changes to
            # be waited on, so the wait is the deadline's, and no longer.
            time.sleep(max(0.0, connected + 3.0 + 0.5 - time.monotonic()))
        finally:
            c.ctld.send_signal(signal.SIGCONT)
        got = []
        for s in socks:
            s.settimeout(30)
            dec = FrameDecoder(c.key, max_size=64 << 20)
            reply = None
            while reply is None:
                data = s.recv(1 << 16)
                if not data:
                    break
                dec.feed(data)
                reply = next((f.msg for f in dec), None)
            got.append(reply)
            s.close()
        refused = [r for r in got if not (isinstance(r, m.RegisterReply) and r.accepted)]
        assert not refused, (len(refused), refused[:3])
        assert "no complete request within" not in c.log("rctld")


def test_nodes_let_in_unproven_during_a_storm_keep_the_command_places(tmp_path: Path) -> None:
    with Cluster(tmp_path, ["n1", "n2", "n3"], ctld_fd_limit=FD_LIMIT) as c:
        c.start_ctld()
        held = []
        for i in range(NODE_PLACES - 1):
            s = socket.create_connection(c.addr, timeout=10)
            assert isinstance(_ask(s, c.key, m.Ping(), i + 1), m.Pong)
            held.append(s)
        # three connections let in before they say what they are (a storm), then Registers
        socks = [socket.create_connection(c.addr, timeout=10) for _ in range(3)]
        time.sleep(0.3)
        replies = []
        for i, s in enumerate(socks, 1):
            replies.append(_ask(s, c.key, m.Register(f"n{i}", Hardware(1, 1, 1, 1, 1, 64, 0),
                                                     boot_time=time.time() - 100,
                                                     rnoded_version="test"), 7))
        accepted = [r for r in replies if isinstance(r, m.RegisterReply) and r.accepted]
        busy = [r for r in replies if isinstance(r, m.Error) and r.code == "busy"]
        assert len(accepted) == 1 and len(busy) == 2, replies
        # the last node places were not given away: a command still gets in
        r = c.run_cli("ranch.cli.rinfo", "-h", "-o", "%n %t")
        assert r.returncode == 0 and "n1" in r.stdout, r.stderr
        for s in held + socks:
            s.close()
