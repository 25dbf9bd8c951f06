"""Membership with real rctld/rnoded processes and the real CLIs: the approval flow, rejection
across controller and node restarts, pre-approved names, dynamic nodes (join, run, delete,
rejoin), and the event log with a reading and a stalled follower."""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import time

from ranch.protocol import messages as m
from ranch.protocol.framing import FrameDecoder, encode_frame
from tests.deadline import scaled

from .cluster import REPO, Cluster

MANUAL = "NodeApproval=manual\nNodeApprovalAuto=n3"


def cli(c: Cluster, prog: str, *args: str, timeout: float = 20.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"ranch.cli.{prog}", "--server", f"127.0.0.1:{c.port}",
         "--key-file", c.key_file, *args],
        cwd=REPO, env=c._env(), capture_output=True, text=True, timeout=timeout)


def start_dynamic(c: Cluster, name: str, conf: str = "") -> subprocess.Popen:
    argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{c.port}", "--name", name,
            "--spool-dir", str(c.dir / "spool" / name), "--dynamic"]
    if conf:
        argv += ["--conf", conf]
    c.nodes[name] = c._spawn(name, argv)
    return c.nodes[name]


def kinds(c: Cluster, node: str) -> list[str]:
    reply = c.request(m.GetEvents(nodes=node))
    assert isinstance(reply, m.Events), reply
    return [e["kind"] for e in reply.events]


def test_approval_flow_end_to_end(tmp_path) -> None:
    with Cluster(tmp_path, ["n1", "n2", "n3"], extra=MANUAL) as c:
        c.start_ctld()
        for name in c.node_names:
            c.start_node(name)
        c.wait_for(lambda: c.state("n1") == "IDLE+PENDING" and c.state("n3") == "IDLE",
                   what="n1 pending, n3 (pre-approved) idle")
        # Heartbeats are taken while it waits: its last heartbeat moves.
        first = c.snapshot()["n1"]["last_heartbeat"]
        c.wait_for(lambda: c.snapshot()["n1"]["last_heartbeat"] != first, what="n1 heartbeat")
        out = cli(c, "rinfo", "-N", "-n", "n1", "-h", "-o", "%N %t").stdout
        assert out.split() == ["n1", "pend"]
        shown = cli(c, "rcontrol", "show", "node", "n1").stdout
        assert "Approval=PENDING" in shown and "LastChange=20" in shown
        doc = json.loads(cli(c, "rcontrol", "--json", "show", "node", "n1").stdout)
        assert doc["nodes"][0]["approval"] == "PENDING" and doc["nodes"][0]["last_change"]
        r = cli(c, "rcontrol", "approve", "NodeName=n[1-2]")
        assert r.returncode == 0, r.stderr
        c.wait_for(lambda: c.state("n1") == "IDLE" and c.state("n2") == "IDLE",
                   what="approved nodes idle")
        assert "Approval=" not in cli(c, "rcontrol", "show", "node", "n1").stdout
        text = cli(c, "rcontrol", "events", "-n", "n1").stdout
        assert "Event=approved" in text and "State=IDLE+PENDING->IDLE" in text
        doc = json.loads(cli(c, "rcontrol", "events", "-n", "n1", "--json").stdout)
        assert any(e["kind"] == "approved" and e["user"] for e in doc["events"])
        # Drain history: who drained and why, who resumed and the RESUME's note.
        assert cli(c, "rcontrol", "update", "NodeName=n1", "State=DRAIN",
                   "Reason=bad fan").returncode == 0
        assert cli(c, "rcontrol", "update", "NodeName=n1", "State=RESUME",
                   "Reason=fan replaced").returncode == 0
        drains = cli(c, "rcontrol", "events", "--drains", "-n", "n1").stdout.splitlines()
        assert drains[0].split()[0] == "NODELIST" and len(drains) == 2
        assert "bad fan" in drains[1] and drains[1].endswith("fan replaced")
        doc = json.loads(cli(c, "rcontrol", "events", "--drains", "--json").stdout)
        assert doc["drains"][0]["note"] == "fan replaced"


def test_rejection_sticks_across_controller_and_node_restarts(tmp_path) -> None:
    with Cluster(tmp_path, ["n1", "n2"], extra=MANUAL) as c:
        c.start_ctld()
        c.start_node("n2")
        c.wait_for(lambda: c.state("n2") == "IDLE+PENDING", what="n2 pending")
        r = cli(c, "rcontrol", "reject", "NodeName=n2")
        assert r.returncode == 1 and "Reason" in r.stderr
        r = cli(c, "rcontrol", "reject", "NodeName=n2", "Reason=unknown machine")
        assert r.returncode == 0, r.stderr
        c.wait_for(lambda: c.state("n2") == "DOWN+REJECTED", what="n2 rejected")

        def refusals() -> int:
            return c.log("n2").count("rejected by")

        c.wait_for(lambda: refusals() >= 1, what="refusal in the node's log")
        assert "unknown machine" in c.log("n2")
        # Controller restart (SIGTERM, then SIGKILL): still rejected, still refused.
        c.stop_ctld()
        c.start_ctld()
        assert c.state("n2") == "DOWN+REJECTED"
        seen = refusals()
        c.wait_for(lambda: refusals() > seen, what="refused after the controller restart")
        c.kill_ctld()
        c.start_ctld()
        assert c.state("n2") == "DOWN+REJECTED"
        # Node restart: refused again.
        c.kill_node("n2")
        seen = refusals()
        c.start_node("n2")
        c.wait_for(lambda: refusals() > seen, what="refused after the node restart")
        assert c.state("n2") == "DOWN+REJECTED"
        assert "refused" in kinds(c, "n2")


def test_pre_approved_node_joins_by_itself(tmp_path) -> None:
    with Cluster(tmp_path, ["n3"], extra=MANUAL) as c:
        c.start()  # waits for IDLE: no approval needed for NodeApprovalAuto names
        assert "approved" not in kinds(c, "n3")


DYNAMIC_CONF = """\
ClusterName=itest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=3
MessageTimeout=3
MaxNodeCount=4
NodeName=n1 CPUs=1 RealMemory=64
PartitionName=main Nodes=ALL Default=YES
PartitionName=fast Nodes=dyn1
"""


def test_dynamic_node_joins_runs_is_deleted_and_rejoins(tmp_path) -> None:
    from .cluster import free_port

    port = free_port()
    with Cluster(tmp_path, ["n1"], conf_text=DYNAMIC_CONF.format(port=port)) as c:
        c.port, c.addr = port, ("127.0.0.1", port)
        c.start_ctld()
        start_dynamic(c, "dyn1", "Features=fast,ib Weight=5")
        c.wait_for(lambda: c.state("dyn1") == "IDLE", what="dyn1 joined")
        rec = c.snapshot()["dyn1"]
        assert rec["features"] == ["fast", "ib"] and rec["partitions"] == ["main", "fast"]
        assert "dyn1" in cli(c, "rinfo", "-p", "fast", "-h", "-o", "%N").stdout
        # It runs work; delete is refused meanwhile.
        out = cli(c, "rbatch", "-w", "dyn1", "-D", str(c.dir), "--wrap", "sleep 300").stdout
        job_id = int(out.split()[-1])
        c.wait_for(lambda: c.snapshot()["dyn1"]["cpus_alloc"] == 1, what="dyn1 runs the job")
        r = cli(c, "rcontrol", "delete", "NodeName=dyn1")
        assert r.returncode == 1 and f"runs job(s) {job_id}" in r.stderr, r.stderr
        assert cli(c, "rcancel", str(job_id)).returncode == 0
        c.wait_for(lambda: c.state("dyn1") == "IDLE", what="dyn1 idle after the cancel")
        # Saved with the state: a restarted controller knows it before it reconnects.
        c.stop_ctld()
        c.start_ctld()
        assert "dyn1" in c.snapshot()
        c.wait_for(lambda: c.state("dyn1") == "IDLE", what="dyn1 back after restart")
        r = cli(c, "rcontrol", "delete", "NodeName=dyn1")
        assert r.returncode == 0, r.stderr
        assert cli(c, "rcontrol", "delete", "NodeName=n1").returncode == 1
        # rnoded reconnects by itself and joins again.
        c.wait_for(lambda: kinds(c, "dyn1").count("joined") >= 2, what="dyn1 rejoined")
        c.wait_for(lambda: c.state("dyn1") == "IDLE", what="dyn1 idle again")
        assert "deleted" in kinds(c, "dyn1")


def _stalled_follower(c: Cluster) -> socket.socket:
    """A GetEvents --follow client that never reads (tiny receive buffer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(c.addr)
    sock.sendall(encode_frame(m.GetEvents(follow=True), c.key, request_id=7))
    return sock


def test_followers_see_events_and_a_stalled_one_delays_nothing(tmp_path) -> None:
    # x1..x60 never start: only their events matter; the log keeps 500 of the ~5,000 events.
    extra = "EventLogMaxEvents=500\nNodeName=x[1-60] CPUs=1 RealMemory=64"
    with Cluster(tmp_path, ["n1", "n2"], extra=extra) as c:
        c.start()
        follower = subprocess.Popen(
            [sys.executable, "-m", "ranch.cli.rcontrol", "--server", f"127.0.0.1:{c.port}",
             "--key-file", c.key_file, "events", "--follow", "-n", "n1"],
            cwd=REPO, env=c._env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stalled = _stalled_follower(c)
        try:
            # both are connected once the backlog (their first reply) came
            assert follower.stdout is not None
            ready, _, _ = select.select([follower.stdout], [], [], 20)
            assert ready, "rcontrol events --follow printed no backlog"
            first_lines = [follower.stdout.readline()]
            stalled.settimeout(20)
            assert len(stalled.recv(4, socket.MSG_PEEK)) > 0  # its first frame is there
            # Far more events than a follower's queue holds, through the stalled socket.
            for i in range(80):
                state = "DRAIN" if i % 2 == 0 else "UNDRAIN"
                reply = c.request(m.UpdateNodes("x[1-60]", state, f"cycle {i}", "alice"))
                assert reply.ok, reply.errors
            t0 = time.monotonic()
            assert isinstance(c.request(m.Ping()), m.Pong)
            assert time.monotonic() - t0 < scaled(3.0)  # not held up by the stalled follower
            # Heartbeats went on: nobody was marked not responding.
            assert c.state("n1") == "IDLE"
            assert c.request(m.UpdateNodes("n1", "DRAIN", "follow me", "bob")).ok
            deadline = time.monotonic() + 10
            lines = first_lines
            while time.monotonic() < deadline:
                line = follower.stdout.readline()
                lines.append(line)
                if "IDLE+DRAIN" in line:
                    break
            assert any("Node=n1" in x and "Reason=\"follow me\"" in x for x in lines), lines
            assert not any("Node=x" in x for x in lines)
            # The stalled reader, read at last: it was told how many events it missed.
            stalled.setblocking(True)
            stalled.settimeout(5)
            decoder = FrameDecoder(c.key, message_timeout=3600)
            missed = 0
            got = 0
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not missed:
                decoder.feed(stalled.recv(1 << 16))
                for frame in decoder:
                    assert isinstance(frame.msg, m.Events)
                    missed += frame.msg.missed
                    got += len(frame.msg.events)
            assert missed > 0 and got > 0
            # The log stayed within its bounds, in memory and on disk.
            kept = c.request(m.GetEvents())
            assert isinstance(kept, m.Events) and len(kept.events) == 500
            path = c.dir / "state" / "events.jsonl"
            c.wait_for(lambda: path.exists() and path.read_bytes().count(b"\n") >= 500,
                       what="events on disk")
            assert path.read_bytes().count(b"\n") <= 1000
        finally:
            stalled.close()
            follower.kill()
            follower.wait()
