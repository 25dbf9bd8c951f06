"""rctld against hostile and absurd peers, as real processes on loopback (issue 18): what an
unauthenticated peer can make it hold, frame deadlines, connection caps, replays across a
restart, and bounded input refused with the field and the limit named."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

from ranch.protocol import messages as m
from ranch.protocol.client import request_raw
from ranch.protocol.framing import FrameDecoder, encode_frame
from ranch.protocol.rawframe import HEAD, PREFIX, TAIL, pack_frame
from ranch.protocol.typedclient import request

from .cluster import REPO, Cluster, wait_for

FD_LIMIT = 256  # rctld takes 192 connections, any of them unproven, 48 per source when full


def _connect(c: Cluster, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(c.addr, timeout=5, source_address=(source, 0))


def _replies(sock: socket.socket, key: bytes, timeout: float = 5.0) -> list:
    """Every frame the controller sends until it closes the connection."""
    dec = FrameDecoder(key, max_size=64 << 20)
    got: list = []
    sock.settimeout(timeout)
    while True:
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return got
        if not data:
            return got
        dec.feed(data)
        got.extend(f.msg for f in dec)


def _reply(sock: socket.socket, key: bytes, timeout: float = 5.0):
    """The controller's first reply frame on `sock`."""
    dec = FrameDecoder(key, max_size=64 << 20)
    sock.settimeout(timeout)
    while True:
        data = sock.recv(65536)
        assert data, "closed without a reply"
        dec.feed(data)
        for frame in dec:
            return frame.msg


def _cut_soon(sock: socket.socket, within: float) -> bool:
    """Whether the controller closed `sock`, or sent the Error it sends before closing, within
    `within` seconds (it sends nothing else to a peer whose request is incomplete)."""
    ready, _, _ = select.select([sock], [], [], within)
    return bool(ready)


def _closed_within(socks: list[socket.socket], within: float) -> list[socket.socket]:
    """The sockets of `socks` the controller closes within `within` seconds."""
    closed: list[socket.socket] = []
    waiting = list(socks)
    deadline = time.monotonic() + within
    while waiting and (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select(waiting, [], [], left)
        for s in ready:
            waiting.remove(s)
            closed.append(s)
    return closed


def _dribble(sock: socket.socket, data: bytes, gap: float) -> None:
    """Send `data` a byte every `gap` seconds until the controller cuts the connection."""
    for byte in data:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            return
        if _cut_soon(sock, gap):
            return
    raise AssertionError("the whole frame went through")


def _rss_mb(c: Cluster) -> float:
    assert c.ctld is not None
    return psutil.Process(c.ctld.pid).memory_info().rss / 2**20


# -- nothing unauthenticated costs more than a little ------------------------------------------


def test_oversize_unauthenticated_frames_are_refused_at_their_header(tmp_path: Path) -> None:
    with Cluster(tmp_path, ["n1"]) as c:
        c.start()
        key = c.key
        # A version-4 frame (no header MAC) announcing 1 MiB: refused after its first six bytes.
        with _connect(c) as s:
            s.sendall(PREFIX.pack(1 << 20) + HEAD.pack(4, 4)[:2])
            (err,) = _replies(s, key)
        assert err.code == "too_large" and "16,384" in err.message
        assert "not yet proven the cluster key" in err.message
        # A version-5 header signed with the wrong key: refused once the header is in.
        forged = pack_frame("Ping", b"x" * (1 << 20), b"w" * 32, request_id=1, version=5)
        head = PREFIX.size + HEAD.size + len("Ping") + TAIL.size + 32
        with _connect(c) as s:
            s.sendall(forged[:head])
            (err,) = _replies(s, key)
        assert err.code == "bad_mac" and "header" in err.message
        # 200 peers each announcing 1 MiB and stopping there cost rctld next to nothing.
        before = _rss_mb(c)
        socks = [_connect(c) for _ in range(200)]
        for s in socks:
            s.sendall(PREFIX.pack(1 << 20) + HEAD.pack(5, 4) + b"Pi")
        c.wait_for(lambda: isinstance(c.request(m.Ping()), m.Pong), what="rctld answers")
        assert _rss_mb(c) - before < 20
        for s in socks:
            s.close()
        # A key holder's large request is read whole (protocol 5 proves the key in its header):
        # a 1 MiB batch script.
        script = "#!/bin/sh\n" + "#" * (1 << 20) + "\ntrue\n"
        reply = request(c.addr, key, m.SubmitJob(script, "alice", os.getuid(), os.getgid(),
                                                 "/tmp"), timeout=20)
        assert isinstance(reply, m.SubmitReply), reply


def test_an_old_client_with_a_large_frame_reads_why_it_was_refused(tmp_path: Path) -> None:
    with Cluster(tmp_path, ["n1"]) as c:
        c.start_ctld()
        # Protocol 4 frames carry no header MAC: over 64 KiB from a fresh connection, refused,
        # and the client reads the Error instead of a reset while it is still sending.
        got, body = request_raw(c.addr, c.key, "Ping", {"pad": "x" * (4 << 20)}, version=4)
        assert got == "Error" and body["code"] == "too_large"
        assert "4,194,3" in body["message"] and "16,384" in body["message"]
        # A key holder's frame over the 16 MiB limit: the same, with that limit named.
        script = "#!/bin/sh\n" + "#" * (20 << 20)
        reply = request(c.addr, c.key, m.SubmitJob(script, "alice", 1000, 1000, "/tmp"),
                        timeout=20)
        assert isinstance(reply, m.Error) and reply.code == "too_large"
        assert "16,777,216" in reply.message


def test_a_frame_dribbled_byte_by_byte_is_cut_at_its_total_deadline(tmp_path: Path) -> None:
    with Cluster(tmp_path, ["n1"]) as c:  # MessageTimeout=3
        c.start_ctld()
        frame = encode_frame(m.Ping(), c.key, request_id=9)
        # A proven peer (it has just had a Pong) dribbling its next frame: cut 3 s after that
        # frame's first byte, although a byte arrives every 0.2 s.
        with _connect(c) as s:
            s.sendall(encode_frame(m.Ping(), c.key, request_id=8))
            dec = FrameDecoder(c.key)
            while not list(dec):
                dec.feed(s.recv(65536))
            first = time.monotonic()
            _dribble(s, frame, 0.2)
            cut = time.monotonic() - first
            assert [e.code for e in _replies(s, c.key)] == ["timeout"]
        assert 2.8 <= cut <= 4.5, cut
        # An unproven peer: cut 3 s after it connected, whatever it sends.
        with _connect(c) as s:
            start = time.monotonic()
            _dribble(s, frame, 0.2)
            cut = time.monotonic() - start
        assert 2.8 <= cut <= 4.5, cut
        assert "frame not completed within 3 s of its first byte" in c.log("rctld")


def test_per_source_cap_refuses_the_excess_while_a_node_registers(tmp_path: Path) -> None:
    with Cluster(tmp_path, ["n1", "n2"], ctld_fd_limit=FD_LIMIT) as c:
        c.start_ctld()
        assert "connection limits fd_limit=256 connections=192 unproven=192" in c.log("rctld")
        # 240 silent connections from one source: 192 fill every place (held until
        # MessageTimeout); while they do, that source is over its share (48): once they have
        # been idle for a moment, the other 48 are accepted and closed at once.
        socks = [_connect(c, "127.0.0.2") for _ in range(240)]
        assert len(_closed_within(socks, 2.0)) == 48
        # Nodes and commands from elsewhere still get in (each takes an idle one's place).
        c.start_node("n1")
        c.wait_for(lambda: c.state("n1") == "IDLE", what="n1 registered")
        r = c.run_cli("ranch.cli.rinfo", "-h", "-o", "%n %t")
        assert r.returncode == 0 and "n1 idle" in r.stdout, r.stderr
        for s in socks:
            s.close()
        # Four sources filling every place: a command still gets in, by dropping the oldest of
        # them, not by waiting for them to time out.
        assert isinstance(c.request(m.Ping()), m.Pong)  # (the first flood's ends are read)
        flood = [_connect(c, f"127.0.1.{i % 4 + 1}") for i in range(191)]  # n1 holds the 192nd
        assert _closed_within(flood, 0.3) == []
        r = c.run_cli("ranch.cli.rinfo", "-h", "-o", "%n %t")
        assert r.returncode == 0 and "n1 idle" in r.stdout, r.stderr
        assert len(_closed_within(flood, 0.3)) == 1  # the oldest made room
        c.start_node("n2")  # and a node registers
        c.wait_for(lambda: c.state("n2") == "IDLE", what="n2 registered")
        log = c.log("rctld")
        assert "dropped the oldest connection that had not proven the key" in log
        # Refusals are logged at most once per kind every 10 s, not once per connection.
        assert log.count("connection refused") == 1, log.count("connection refused")
        for s in flood:
            s.close()


# -- replays across a restart ------------------------------------------------------------------


def test_a_replayed_admin_frame_is_refused_after_a_restart(tmp_path: Path) -> None:
    with Cluster(tmp_path, ["n1"]) as c:
        conf = c.conf_path.read_text()
        c.conf_path.write_text(conf.replace("MessageTimeout=3", "MessageTimeout=10"))
        c.start()
        drain = encode_frame(m.UpdateNodes("n1", "DRAIN", "captured", "alice"), c.key,
                             request_id=5)
        # A frame from a clock 8 s ahead of rctld's (MessageTimeout is 10), accepted before
        # the restart and replayed after it, but still dated after the new start: only the
        # mark in the state directory refuses it.
        ahead_ts = time.time() + 8
        ahead = encode_frame(m.UpdateNodes("n1", "DRAIN", "ahead", "alice"), c.key,
                             request_id=6, now=ahead_ts)
        for frame in (drain, ahead):
            with _connect(c) as s:
                s.sendall(frame)
                reply = _reply(s, c.key)
            assert isinstance(reply, m.UpdateResult) and reply.ok
        assert c.request(m.UpdateNodes("n1", "RESUME", "", "alice")).ok
        assert (Path(c.state_dir) / "replay_mark").exists()
        c.stop_ctld()
        c.start_ctld(wait=False)
        wait_for(lambda: socket.create_connection(c.addr, timeout=1).close() or True,
                 what="rctld listening")
        assert time.time() < ahead_ts, "the restart took too long to test the mark"
        for frame in (ahead, drain):
            with _connect(c) as s:
                s.sendall(frame)
                reply = _reply(s, c.key)
            assert isinstance(reply, m.Error) and reply.code == "stale", reply
            assert "a frame from before a restart is never accepted" in reply.message
        # Until the mark passes, fresh frames are refused too (the price of a clock ahead).
        assert "refusing frames signed before the replay mark" in c.log("rctld")
        c.wait_for(lambda: isinstance(c.request(m.Ping()), m.Pong), what="the mark passed")
        c.wait_for(lambda: c.state("n1") == "IDLE", what="n1 idle")
        assert c.snapshot()["n1"]["state"]["reason"] is None


# -- bounded input -----------------------------------------------------------------------------


def test_absurd_input_is_refused_naming_the_field_and_the_limit(tmp_path: Path) -> None:
    with Cluster(tmp_path, ["n1", "n2"]) as c:
        c.start()
        script = tmp_path / "big.sh"
        script.write_text("#!/bin/sh\n" + "#" * (10 << 20) + "\n")
        r = c.run_cli("ranch.cli.rbatch", str(script))
        assert r.returncode == 1
        assert "batch script is 10,485,771 bytes; the limit is 4,194,304" in r.stderr
        r = c.run_cli("ranch.cli.rbatch", "-t", "99999999999", "--wrap", "true")
        assert r.returncode == 255
        assert "--time 99999999999" in r.stderr and "4,294,967,293 minutes" in r.stderr
        r = c.run_cli("ranch.cli.rcontrol", "update", "NodeName=n1", "State=DRAIN",
                      "Reason=" + "x" * 5000)
        assert r.returncode == 1 and "Reason is 5,000 characters; the limit is 1,024" in r.stderr
        # The same refusals from rctld itself, for a client that does not check first.
        user = dict(user="alice", uid=os.getuid(), gid=os.getgid(), workdir="/tmp")
        reply = c.request(m.SubmitJob("#!/bin/sh\n" + "#" * (5 << 20), **user), timeout=20)
        assert reply.field == "script" and "5,242,890 bytes; the limit is 4,194,304" in (
            reply.message)
        reply = c.request(m.SubmitJob("#!/bin/sh\ntrue\n", time_limit=99999999999, **user))
        assert reply.field == "time_limit" and "4,294,967,293" in reply.message
        reply = c.request(m.UpdateNodes("n1", "DRAIN", "y" * (1 << 20), "alice"))
        assert not reply.ok and "Reason is 1,048,576 characters" in reply.errors[0]
        # A 1,048,576-name hostlist is refused at once; the nodes never notice.
        names = ",".join(f"n{i}x[0-65535]" for i in range(16))
        started = time.monotonic()
        reply = c.request(m.UpdateNodes(names, "DRAIN", "z", "alice"))
        refused_in = time.monotonic() - started
        assert not reply.ok and "more than 131,072 hosts" in reply.errors[0]
        assert len(reply.errors[0]) < 300
        assert refused_in < 2.0, refused_in  # generous: it takes milliseconds
        assert c.state("n1") == "IDLE" and c.state("n2") == "IDLE"


def test_a_key_path_that_is_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    with Cluster(tmp_path, ["n1"]) as c:
        keydir = tmp_path / "keys"
        keydir.mkdir()
        env = c._env({"RANCH_KEY_FILE": str(keydir), "RANCH_SERVER": f"127.0.0.1:{c.port}"})
        want = f"key file {keydir} is a directory"
        commands = (
            ["-m", "ranch.ctld", "-f", str(c.conf_path), "--state-dir", str(tmp_path / "st")],
            ["-m", "ranch.noded", "--server", f"127.0.0.1:{c.port}", "--name", "n1"],
            ["-m", "ranch.cli.rinfo"],
        )
        c.start_ctld()  # with the right key, so that the commands get as far as the key
        for argv in commands:
            r = subprocess.run([sys.executable, *argv], cwd=REPO, env=env, capture_output=True,
                               text=True, timeout=30)
            assert r.returncode != 0 and want in r.stderr, (argv, r.stderr)
            assert "Traceback" not in r.stderr, r.stderr


def test_refused_connections_never_reach_the_descriptor_limit(tmp_path: Path) -> None:
    with Cluster(tmp_path, ["n1"], ctld_fd_limit=FD_LIMIT) as c:
        c.start()
        # Far more connections than descriptors, from many sources: rctld keeps answering,
        # never hits EMFILE, and the state is still saved.
        socks: list[socket.socket] = []
        for i in range(600):
            try:
                socks.append(_connect(c, f"127.0.2.{i % 50 + 1}"))
            except OSError:
                pass
        # the burst queues in front of commands for a moment (rctld makes room as its unproven
        # connections fall idle), then they get through while it is still held
        c.wait_for(lambda: c.run_cli("ranch.cli.rinfo", "-h").returncode == 0, timeout=20,
                   what="rinfo during the burst")
        c.wait_for(lambda: getattr(c.request(m.UpdateNodes("n1", "DRAIN", "during the flood",
                                                           "alice")), "ok", False),
                   what="an update")
        for s in socks:
            s.close()
        wait_for(lambda: "during the flood" in (Path(c.state_dir) / "node_state.json")
                 .read_text(), what="state saved")
        log = c.log("rctld")
        assert "Too many open files" not in log and "EMFILE" not in log
