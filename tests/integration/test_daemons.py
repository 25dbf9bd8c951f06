"""rctld and rnoded as real processes on loopback: registration, failure detection, restarts,
hostile frames, protocol versions, clean shutdown and reconfigure."""

from __future__ import annotations

import socket
import struct
import time

from ranch.ctld.state import statefile
from ranch.protocol import messages as m
from ranch.protocol.framing import FrameDecoder, encode_frame
from ranch.protocol.rawframe import pack_frame
from tests.deadline import scaled

from .cluster import Cluster


def test_register_fail_and_return_to_service(tmp_path) -> None:
    with Cluster(tmp_path, ["n1", "n2", "n3"], rts=1) as c:
        c.start()
        c.kill_node("n3")
        c.wait_for(lambda: c.state("n3") == "IDLE+NOT_RESPONDING", what="n3 not responding")
        c.wait_for(lambda: c.state("n3") == "DOWN+NOT_RESPONDING", what="n3 down")
        rec = c.snapshot()["n3"]
        assert rec["state"]["reason"]["text"] == "Not responding"
        assert rec["compact"] == "down*"
        assert c.state("n1") == "IDLE" and c.state("n2") == "IDLE"
        c.start_node("n3")  # ReturnToService=1: back on a valid registration
        c.wait_for(lambda: c.state("n3") == "IDLE", what="n3 back in service")
        # A stopped daemon (SIGTERM: a restart) is not a node going away: n2 stays in service
        # and is back on its next registration.
        assert c.stop_node("n2") == 0
        assert not c.state("n2").startswith("DOWN")
        c.start_node("n2")
        c.wait_for(lambda: c.log("n2").count("registered n2 with the controller") == 2,
                   what="n2 registered again")
        assert c.state("n2") == "IDLE"
        # A node that leaves says so (SIGUSR1): DOWN at once, a reason naming it.
        assert c.leave_node("n2") == 0
        c.wait_for(lambda: c.snapshot()["n2"]["state"]["reason"]["text"] == "rnoded shut down",
                   what="n2 left")
        assert c.state("n2").startswith("DOWN")


def test_drains_survive_a_controller_sigkill(tmp_path) -> None:
    with Cluster(tmp_path, ["n1", "n2"], rts=1) as c:
        c.start()
        r = c.request(m.UpdateNodes("n1", "DRAIN", "bad fan", "alice"))
        assert r.ok, r.errors
        # The reply came once the drain was journalled: a SIGKILL right after it loses nothing.
        c.kill_ctld()
        c.start_ctld()
        rec = c.snapshot()["n1"]
        assert rec["complete"].startswith("IDLE+DRAIN")
        assert (rec["state"]["reason"]["text"], rec["state"]["reason"]["user"]) == (
            "bad fan", "alice")
        # The nodes reconnect by themselves; n1 stays drained, n2 is idle.
        c.wait_for(lambda: c.state("n2") == "IDLE" and c.state("n1") == "IDLE+DRAIN",
                   what="nodes back after controller restart")


def _exchange(addr, data: bytes, key: bytes, timeout: float = 5.0) -> list:
    """Send raw bytes, return every frame the controller sends before it closes."""
    frames = []
    dec = FrameDecoder(key, max_size=16 << 20)
    with socket.create_connection(addr, timeout=timeout) as s:
        s.sendall(data)
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            dec.feed(chunk)
            frames.extend(f.msg for f in dec)
            if frames and isinstance(frames[-1], m.Pong):
                break
    return frames


def test_hostile_frames_are_refused_while_nodes_keep_beating(tmp_path) -> None:
    with Cluster(tmp_path, ["n1", "n2"]) as c:
        c.start()
        key = c.key
        before = c.snapshot()["n1"]["last_heartbeat"]
        garbage = _exchange(c.addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", key)
        assert [f.code for f in garbage] == ["too_large"]
        oversized = _exchange(c.addr, struct.pack(">I", 64 << 20) + b"x" * 100, key)
        assert [f.code for f in oversized] == ["too_large"]
        wrong_key = _exchange(c.addr, encode_frame(m.Ping(), b"w" * 32, request_id=3), key)
        assert [f.code for f in wrong_key] == ["bad_mac"]
        frame = encode_frame(m.Ping(), key, request_id=4)
        first = _exchange(c.addr, frame, key)
        assert isinstance(first[0], m.Pong)
        replayed = _exchange(c.addr, frame, key)
        assert [f.code for f in replayed] == ["replay"]
        # SetAllocation left the wire (only jobs allocate): an old peer's is refused by name and
        # allocates nothing.
        old = pack_frame("SetAllocation", b'{"node_names":"n1","cpus_alloc":4}', key,
                         request_id=6, version=4)
        (refused,) = _exchange(c.addr, old, key)
        assert (refused.code, "SetAllocation" in refused.message) == ("unknown_type", True)
        # Half a frame, then silence: cut off after MessageTimeout (3 s here).
        half = encode_frame(m.Ping(), key, request_id=5)[:12]
        t0 = time.monotonic()
        stalled = _exchange(c.addr, half, key, timeout=10)
        assert [f.code for f in stalled] == ["timeout"] and time.monotonic() - t0 < scaled(8)
        log = c.log("rctld")
        for code in ("too_large", "bad_mac", "replay", "unknown_type"):
            assert f"code={code}" in log and "peer=127.0.0.1:" in log
        # Nobody else noticed.
        c.wait_for(lambda: c.snapshot()["n1"]["last_heartbeat"] > before, what="n1 heartbeats")
        assert c.state("n1") == "IDLE" and c.state("n2") == "IDLE"
        assert c.snapshot()["n1"]["cpus_alloc"] == 0


def test_older_protocol_node_registers(tmp_path) -> None:
    with Cluster(tmp_path, ["n1", "old1"]) as c:
        c.start_ctld()
        c.start_node("n1")
        c.start_node("old1", env={"RANCH_PROTOCOL_VERSION": "2"})
        c.wait_for(lambda: c.state("old1") == "IDLE" and c.state("n1") == "IDLE",
                   what="old-protocol node idle")
        first = c.snapshot()["old1"]["last_heartbeat"]
        c.wait_for(lambda: c.snapshot()["old1"]["last_heartbeat"] > first, what="old1 beats")


def test_sigterm_saves_state_and_exits_zero(tmp_path) -> None:
    with Cluster(tmp_path, ["n1"]) as c:
        c.start()
        c.request(m.UpdateNodes("n1", "FAIL", "psu", "bob"))
        t0 = time.monotonic()
        assert c.stop_ctld() == 0
        assert time.monotonic() - t0 < scaled(2.0)
        saved = statefile.load(c.state_dir)["nodes"]["n1"]
        assert "FAIL" in saved["state"]["flags"] and saved["state"]["reason"]["text"] == "psu"


def test_reconfigure_with_broken_config_keeps_the_old(tmp_path) -> None:
    with Cluster(tmp_path, ["n1"]) as c:
        c.start_ctld()
        good = c.request(m.Ping())
        old_hash = c.request(m.GetConfig()).config_hash
        text = c.conf_path.read_text()
        c.conf_path.write_text(text + "SlurmdTimeout=soon\nNodeName=n9 CPUs=zero\n")
        r = c.request(m.Reconfigure(user="alice"))
        assert not r.ok and r.config_hash == old_hash
        assert r.errors and all(e.startswith(f"{c.conf_path}:") for e in r.errors)
        line, col = r.errors[0].split(":")[1:3]
        assert line.isdigit() and col.isdigit()
        # SIGHUP with the same broken file: still running on the old config.
        c.ctld.send_signal(1)
        c.wait_for(lambda: "reconfigure refused" in c.log("rctld").split("SIGHUP", 1)[-1],
                   what="SIGHUP reconfigure refused")
        assert isinstance(c.request(m.Ping()), m.Pong) and good.started_at > 0
        # Fixed: the new config applies, and a node added by it appears.
        c.conf_path.write_text(text.replace("SlurmdTimeout=3", "SlurmdTimeout=4")
                               .replace("NodeName=n1", "NodeName=n1,n2")
                               .replace("Nodes=n1", "Nodes=n1,n2"))
        r = c.request(m.Reconfigure(user="alice"))
        assert r.ok, r.errors
        assert dict(c.request(m.GetConfig()).items)["SlurmdTimeout"] == "4 sec"
        assert "n2" in c.snapshot()


def test_a_command_that_half_closes_is_answered_then_closed(tmp_path) -> None:
    # protocol/client.py shuts its sending side after its one request: rctld must still
    # answer (the submission on disk first) and then close its side, not wait for a timeout.
    with Cluster(tmp_path, ["n1"]) as c:
        c.start_ctld()
        job = m.SubmitJob(script="#!/bin/sh\ntrue\n", user="root", uid=0, gid=0,
                          workdir=str(tmp_path), hold=True)
        with socket.create_connection(c.addr, timeout=5) as s:
            s.sendall(encode_frame(job, c.key, request_id=7))
            s.shutdown(socket.SHUT_WR)
            dec, frames, data = FrameDecoder(c.key), [], b"-"
            while data:
                data = s.recv(65536)  # until rctld closes: b"" (a timeout would raise)
                dec.feed(data)
                frames += list(dec)
        assert [(f.request_id, type(f.msg)) for f in frames] == [(7, m.SubmitReply)]
        jid = frames[0].msg.job_id
        c.kill_ctld()  # SIGKILL: the reply promised the job is on disk
        c.start_ctld()
        jobs = c.request(m.GetJobs(job_ids=(jid,))).jobs
        assert [(j["job_id"], j["state"]) for j in jobs] == [(jid, "PENDING")]


def test_a_busy_port_is_named(tmp_path) -> None:
    """rctld names the address it could not listen on: the HTTP one, when only that is busy."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        http = f"127.0.0.1:{busy.getsockname()[1]}"
        with Cluster(tmp_path, ["n1"], extra=f"HttpListen={http}") as c:
            proc = c.start_ctld(wait=False)
            assert proc.wait(30) == 1
            line = [x for x in c.log("rctld").splitlines() if "cannot listen" in x][-1]
            assert f"on=HTTP addr={http}" in line, line
            assert f":{c.port}" not in line
