"""The controller's own faults, end to end (issue 18): real rctld and rnoded processes, real jobs,
real rcontrol and rinfo commands.

- rctld stopped (SIGSTOP) for 2 x SlurmdTimeout, then continued: no node DOWN, no job requeued;
- half the nodes stopped at once: the DownGuard holds them `*` instead of DOWN, nothing is
  requeued, and `rcontrol confirm down` sets them DOWN and requeues their jobs;
- one node stopped alone still goes DOWN on time and its job is requeued (no regression);
- health checks that drain too many nodes trip the DrainGuard; confirm and reset work.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from ranch.protocol import messages as m
from tests.deadline import scaled

from .cluster import REPO, Cluster, free_port

CONF = """\
ClusterName=live
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout={timeout}
MessageTimeout=3
ReturnToService=1
KillWait=1
{extra}
NodeName={nodes} CPUs=1 RealMemory=64
PartitionName=main Nodes={nodes} Default=YES
"""


def live_cluster(tmp: Path, nodes: list[str], *, timeout: int = 3, extra: str = "") -> Cluster:
    port = free_port()
    c = Cluster(tmp, nodes, conf_text=CONF.format(port=port, nodes=",".join(nodes),
                                                  timeout=timeout, extra=extra))
    c.port, c.addr = port, ("127.0.0.1", port)
    return c


def start(c: Cluster, env: dict[str, str] | None = None) -> None:
    c.start_ctld()
    for name in c.node_names:
        argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{c.port}", "--name", name,
                "--spool-dir", str(c.dir / "spool" / name)]
        c.nodes[name] = c._spawn(name, argv, env)
    c.wait_for(lambda: all(c.state(n) == "IDLE" for n in c.node_names), 30, what="nodes IDLE")


def cli(c: Cluster, command: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = c.run_cli(f"ranch.cli.{command}", *argv)
    if check:
        assert done.returncode == 0, f"{command} {argv}: {done.stderr}"
    return done


def submit(c: Cluster, node: str) -> int:
    out = cli(c, "rbatch", "-D", str(c.dir), "-w", node, "--wrap", "sleep 300").stdout
    assert out.startswith("Submitted batch job "), out
    return int(out.split()[-1])


def job(c: Cluster, job_id: int) -> dict:
    doc = json.loads(cli(c, "rqueue", "--json", "-t", "all", "-j", str(job_id)).stdout)
    [j] = [j for j in doc["jobs"] if j["job_id"] == job_id]
    return j


def running_on(c: Cluster, job_id: int, node: str) -> bool:
    j = job(c, job_id)
    return j["job_state"][0] == "RUNNING" and j["nodes"] == node


def events(c: Cluster) -> list[dict]:
    reply = c.request(m.GetEvents())
    assert isinstance(reply, m.Events), reply
    return list(reply.events)


def downs(c: Cluster) -> list[dict]:
    return [e for e in events(c) if e["kind"] == "state" and e.get("new", "").startswith("DOWN")]


def guards(c: Cluster) -> dict[str, dict]:
    reply = c.request(m.GuardRequest("show"))
    assert isinstance(reply, m.GuardStatus), reply
    return {g["guard"]: g for g in reply.guards}


def heard_since(c: Cluster, names: list[str], wall: float) -> bool:
    snap = c.snapshot()
    return all((snap[n]["last_heartbeat"] or 0) > wall for n in names)


def test_controller_stopped_for_twice_slurmd_timeout_downs_nothing(tmp_path: Path) -> None:
    nodes = ["n1", "n2", "n3"]
    with live_cluster(tmp_path, nodes) as c:
        start(c)
        jobs = {submit(c, "n1"): "n1", submit(c, "n2"): "n2"}
        c.wait_for(lambda: all(running_on(c, j, n) for j, n in jobs.items()), what="jobs run")
        assert c.ctld is not None
        os.kill(c.ctld.pid, signal.SIGSTOP)  # a VM migration, a GC pause, a hung NFS write...
        try:
            time.sleep(2 * 3)  # the fault itself: 2 x SlurmdTimeout with the controller away
        finally:
            os.kill(c.ctld.pid, signal.SIGCONT)
        back = time.time()
        # Every node heard twice more after the controller came back: had any been judged on
        # the controller's silence, it would have been by now.
        c.wait_for(lambda: heard_since(c, nodes, back + 2), timeout=20,
                   what="every node heard after the stall")
        assert downs(c) == []
        assert {n: c.state(n) for n in nodes} == {
            "n1": "ALLOCATED", "n2": "ALLOCATED", "n3": "IDLE"}
        for j, n in jobs.items():
            got = job(c, j)
            assert got["job_state"] == ["RUNNING"] and got["nodes"] == n, got
            assert got["restart_cnt"] == 0
        stalls = [e for e in events(c) if e["kind"] == "controller_stall"]
        assert stalls and stalls[0]["seconds"] >= 5, stalls
        assert "controller stalled; nodes are not judged" in c.log("rctld")


def test_half_the_nodes_silent_at_once_are_held_until_an_admin_confirms(tmp_path: Path) -> None:
    nodes = ["n1", "n2", "n3", "n4"]
    with live_cluster(tmp_path, nodes) as c:
        start(c)
        lost, kept = submit(c, "n1"), submit(c, "n3")
        c.wait_for(lambda: running_on(c, lost, "n1") and running_on(c, kept, "n3"),
                   what="jobs run")
        stopped = [c.nodes["n1"], c.nodes["n2"]]
        for proc in stopped:  # a switch, a rack PDU, a partition: half the fleet goes quiet
            proc.send_signal(signal.SIGSTOP)
        try:
            c.wait_for(lambda: guards(c)["DownGuard"]["state"] == "TRIPPED", timeout=20,
                       what="the DownGuard trips")
            c.wait_for(lambda: guards(c)["DownGuard"]["nodes"] == "n[1-2]", timeout=20,
                       what="both silent nodes held")
            snap = c.snapshot()
            for n in ("n1", "n2"):
                assert "NO_RESPOND" in snap[n]["state"]["flags"]
                assert snap[n]["state"]["base"] != "DOWN"
                assert snap[n]["state"]["reason"]["text"] == "Not responding, held by DownGuard"
            assert downs(c) == []
            got = job(c, lost)
            assert got["job_state"] == ["RUNNING"] and got["restart_cnt"] == 0, got
            # Said loudly: rinfo -R, rcontrol show guards, the event log, the log.
            reasons = cli(c, "rinfo", "-R", "-h", "-o", "%50E %N").stdout
            assert "Not responding, held by DownGuard" in reasons and "n[1-2]" in reasons
            shown = cli(c, "rcontrol", "show", "guards").stdout
            assert "GuardName=DownGuard State=TRIPPED" in shown and "Held=n[1-2]" in shown
            assert "2 of 4 nodes in service went silent" in shown
            assert any(e["kind"] == "guard_tripped" for e in events(c))
            assert "DownGuard tripped" in c.log("rctld")
            # One command confirms: DOWN as SlurmdTimeout would have done, the job requeued.
            done = cli(c, "rcontrol", "confirm", "down")
            assert "confirmed: n[1-2]" in done.stdout
            c.wait_for(lambda: all(c.state(n).startswith("DOWN") for n in ("n1", "n2")),
                       what="held nodes DOWN")
            c.wait_for(lambda: job(c, lost)["restart_cnt"] == 1, what="the lost job requeued")
            assert guards(c)["DownGuard"]["state"] == "ARMED"
            downed = {e["node"]: e for e in downs(c)}
            assert set(downed) == {"n1", "n2"}
            assert downed["n1"]["cause"].startswith("admin:")
            assert job(c, kept)["restart_cnt"] == 0
        finally:
            for proc in stopped:
                proc.send_signal(signal.SIGCONT)


def test_a_node_stopped_alone_still_goes_down_on_time(tmp_path: Path) -> None:
    nodes = ["n1", "n2", "n3", "n4", "n5", "n6"]
    with live_cluster(tmp_path, nodes) as c:
        start(c)
        j = submit(c, "n1")
        c.wait_for(lambda: running_on(c, j, "n1"), what="job runs")
        proc = c.nodes["n1"]
        proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            c.wait_for(lambda: c.state("n1").startswith("DOWN"), timeout=20, what="n1 DOWN")
            took = time.monotonic() - stopped
            assert took < 3 + scaled(3), f"DOWN after {took:.1f} s, SlurmdTimeout is 3 s"
            c.wait_for(lambda: job(c, j)["restart_cnt"] == 1, what="its job requeued")
            assert c.snapshot()["n1"]["state"]["reason"]["text"] == "Not responding"
            assert guards(c)["DownGuard"]["state"] == "ARMED"
        finally:
            proc.send_signal(signal.SIGCONT)


def test_drain_guard_pauses_mass_health_drains_until_confirmed_or_reset(tmp_path: Path) -> None:
    verdicts = tmp_path / "verdicts"  # examples/healthcheck.sh reads verdicts/<node>
    verdicts.mkdir()
    extra = (f"HealthCheckProgram={REPO / 'examples' / 'healthcheck.sh'}\n"
             "HealthCheckInterval=1\nHealthCheckTimeout=5\n"
             "DrainGuardPercent=25\nDrainGuardWindow=600\nDrainGuardMinNodes=4")
    nodes = ["n1", "n2", "n3", "n4"]
    with live_cluster(tmp_path, nodes, timeout=30, extra=extra) as c:
        start(c, env={"RANCH_HC_VERDICT_FILE": str(verdicts)})
        # A bad check rolled out to three nodes: the first drain is within 25 % of 4 nodes,
        # the second trips the guard, and it and the third are paused.
        (verdicts / "n1").write_text("drain bad rollout\n")
        c.wait_for(lambda: c.state("n1") == "IDLE+DRAIN", what="n1 drained")
        for n in ("n2", "n3"):
            (verdicts / n).write_text("drain bad rollout\n")
        c.wait_for(lambda: guards(c)["DrainGuard"]["nodes"] == "n[2-3]", what="drains paused")
        snap = c.snapshot()
        for n in ("n2", "n3"):
            assert snap[n]["complete"] == "IDLE", snap[n]["complete"]
            assert snap[n]["state"]["reason"]["text"] == (
                "HC: bad rollout [drain paused by DrainGuard]")
        assert guards(c)["DrainGuard"]["state"] == "TRIPPED"
        reasons = cli(c, "rinfo", "-R", "-h", "-o", "%50E %N").stdout
        assert "HC: bad rollout [drain paused by DrainGuard]" in reasons
        assert any(e["kind"] == "guard_tripped" and e.get("guard") == "DrainGuard"
                   for e in events(c))
        # The admin confirms one of them; the guard stays tripped.
        done = cli(c, "rcontrol", "confirm", "drain", "NodeName=n2")
        assert "confirmed: n2" in done.stdout and "DrainGuard is TRIPPED" in done.stdout
        assert c.state("n2") == "IDLE+DRAIN"
        # n3 is fixed: its next check passes and its paused reason goes by itself.
        (verdicts / "n3").write_text("ok\n")
        c.wait_for(lambda: c.snapshot()["n3"]["state"]["reason"] is None, what="n3 clean")
        cli(c, "rcontrol", "reset", "guard", "drain")
        assert guards(c)["DrainGuard"]["state"] == "ARMED"
        # Automatic drains work again.
        (verdicts / "n4").write_text("fail gpu gone\n")
        c.wait_for(lambda: c.state("n4") == "IDLE+FAIL", what="n4 failed by its check")
        refused = cli(c, "rcontrol", "confirm", "drain", check=False)
        assert refused.returncode == 1 and "nothing to confirm" in refused.stderr
