"""Issue 6 end to end: real rctld and rnoded processes running real health-check programs, with the
verdicts read back through the real `rinfo` and `rcontrol` commands."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

import psutil

from tests.integration.cluster import REPO, Cluster, wait_for

EXAMPLE = REPO / "examples" / "healthcheck.sh"

CONF = """\
ClusterName=hc
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=60
MessageTimeout=5
ReturnToService=1
HealthCheckProgram={program}
HealthCheckInterval={interval}
HealthCheckTimeout={timeout}
HealthCheckNodeState={node_state}
NodeName={nodes} CPUs=1 RealMemory=64
PartitionName=main Nodes={nodes} Default=YES
"""

# Records every run (node, the state the controller told it, RANCH_NODE_IS_HEALTHY), then hands
# over to the shipped example script, whose verdict a test steers through RANCH_HC_VERDICT_FILE.
WRAPPER = """\
#!/bin/sh
echo "$SLURMD_NODENAME $RANCH_NODE_STATE ${{RANCH_NODE_IS_HEALTHY:-unset}}" >> {runs}
exec {example}
"""

# Hangs past HealthCheckTimeout with a grandchild in its process group; records both pids.
SLEEPER = """\
#!/bin/sh
sleep 300 &
echo "$$ $!" >> {pids}
echo "still checking"
sleep 300
"""


def _script(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _conf(c: Cluster, program: str, *, interval: int = 1, timeout: int = 2,
          node_state: str = "ANY") -> None:
    c.conf_path.write_text(CONF.format(
        port=c.port, program=program, interval=interval, timeout=timeout,
        node_state=node_state, nodes=",".join(c.node_names)))


def _start(c: Cluster, envs: dict[str, dict[str, str]] | None = None,
           ready: Iterable[str] = ()) -> None:
    """rctld, then every node with its own environment; waits until each node has registered
    (reached a state other than UNKNOWN/DOWN) or, for names in `ready`, shows IDLE."""
    c.start_ctld()
    for name in c.node_names:
        c.start_node(name, env=(envs or {}).get(name), run_jobs=True)
    ready = set(ready)

    def up() -> bool:
        snap = c.snapshot()
        return all(
            snap[n]["complete"] == "IDLE" if n in ready
            else snap[n]["last_heartbeat"] is not None and snap[n]["state"]["base"] != "DOWN"
            for n in c.node_names
        )

    c.wait_for(up, 20, what="every node registered")


def _cli(c: Cluster, module: str, *args: str) -> str:
    proc = c.run_cli(module, *args)
    assert proc.returncode == 0, f"{module} {args}: rc {proc.returncode}\n{proc.stderr}"
    return proc.stdout


def rinfo(c: Cluster, *args: str) -> str:
    return _cli(c, "ranch.cli.rinfo", *args)


def rcontrol(c: Cluster, *args: str) -> str:
    return _cli(c, "ranch.cli.rcontrol", *args)


def _reason(c: Cluster, name: str) -> dict | None:
    return c.snapshot()[name]["state"]["reason"]


def reasons(c: Cluster) -> dict[str, str]:
    """`rinfo -R` with the reason column at full width (the default format cuts it at 20), as
    {node: reason}; the default format must still list the node with an "HC:"-style start."""
    default = rinfo(c, "-R")
    full = rinfo(c, "-R", "-h", "-o", "%N|%E")
    out = {}
    for line in full.splitlines():
        nodes, reason = line.split("|", 1)
        for name in nodes.split(","):
            assert reason[:20].strip() in _line_of(default, name), default
            out[name] = reason.strip()
    return out


def _line_of(text: str, name: str) -> str:
    lines = [line for line in text.splitlines() if name in line.split()]
    assert lines, f"{name} not in:\n{text}"
    return lines[0]


def _runs(path: Path, name: str) -> list[str]:
    if not path.exists():
        return []
    return [line for line in path.read_text().splitlines() if line.split()[0] == name]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_verdict_file_drains_recovers_keeps_admin_drain_and_fails(tmp_path: Path) -> None:
    verdicts = tmp_path / "verdicts"
    verdicts.mkdir()
    runs = tmp_path / "runs.log"
    env = {"RANCH_HC_VERDICT_FILE": str(verdicts)}
    for n in ("n1", "n2"):
        (verdicts / n).write_text("ok\n")
    with Cluster(tmp_path / "c", ["n1", "n2"]) as c:
        wrapper = _script(tmp_path / "hc.sh", WRAPPER.format(runs=runs, example=EXAMPLE))
        _conf(c, wrapper)
        _start(c, {"n1": env, "n2": env}, ready=["n1", "n2"])
        # Periodic runs see the controller's view, with the Slurm-compatible variable set.
        c.wait_for(lambda: any(r.endswith("IDLE yes") for r in _runs(runs, "n1")),
                   what="a periodic run on n1 told it is IDLE and healthy")

        # Failing -> drained with the script's first line, shown by rinfo -R.
        (verdicts / "n1").write_text("drain /scratch is full\n")
        c.wait_for(lambda: c.state("n1") == "IDLE+DRAIN", timeout=8, what="n1 drained by HC")
        reason = _reason(c, "n1")
        assert reason["source"] == "health_check" and reason["text"] == "HC: /scratch is full"
        assert reasons(c) == {"n1": "HC: /scratch is full"}
        assert c.state("n2") == "IDLE"
        # The drained node is told it is unhealthy on its next runs.
        c.wait_for(lambda: any(r.endswith("IDLE+DRAIN no") for r in _runs(runs, "n1")),
                   what="n1's script told RANCH_NODE_IS_HEALTHY=no")

        # Passing again -> undrained by itself.
        (verdicts / "n1").write_text("ok\n")
        c.wait_for(lambda: c.state("n1") == "IDLE", timeout=8, what="n1 back by itself")
        assert _reason(c, "n1") is None
        assert reasons(c) == {}

        # An admin drain during a failure survives the recovery, even with an "HC:" text.
        (verdicts / "n1").write_text("drain fan 3 slow\n")
        c.wait_for(lambda: c.state("n1") == "IDLE+DRAIN", timeout=8, what="n1 drained again")
        rcontrol(c, "update", "NodeName=n1", "State=DRAIN", "Reason=HC: admin looks at it")
        reason = _reason(c, "n1")
        assert (reason["source"], reason["text"]) == ("admin", "HC: admin looks at it")
        before = len(_runs(runs, "n1"))
        (verdicts / "n1").write_text("ok\n")
        c.wait_for(lambda: len(_runs(runs, "n1")) >= before + 3 and
                   c.snapshot()["n1"]["health"]["verdict"] == "ok",
                   what="n1 passing its checks again")
        assert c.state("n1") == "IDLE+DRAIN"
        assert _reason(c, "n1")["source"] == "admin"
        assert reasons(c) == {"n1": "HC: admin looks at it"}
        rcontrol(c, "update", "NodeName=n1", "State=RESUME")
        c.wait_for(lambda: c.state("n1") == "IDLE", what="n1 resumed by the admin")

        # Exit 2 -> FAIL, shown as `fail` by rinfo; passing clears it too.
        (verdicts / "n2").write_text("fail GPU 1 double-bit ECC\n")
        c.wait_for(lambda: c.state("n2") == "IDLE+FAIL", timeout=8, what="n2 failed by HC")
        assert _reason(c, "n2")["text"] == "HC: GPU 1 double-bit ECC"
        assert _line_of(rinfo(c, "-N", "-o", "%N %t"), "n2").split() == ["n2", "fail"]
        assert reasons(c) == {"n2": "HC: GPU 1 double-bit ECC"}
        (verdicts / "n2").write_text("ok\n")
        c.wait_for(lambda: c.state("n2") == "IDLE", timeout=8, what="n2 back after fail")

        # A restarted rnoded (config cached) checks itself before it registers: a sick node
        # never shows IDLE, and that first run knows no controller state yet.
        assert c.leave_node("n2") == 0
        c.wait_for(lambda: c.snapshot()["n2"]["state"]["base"] == "DOWN", what="n2 down")
        (verdicts / "n2").write_text("drain no fabric link\n")
        before = len(_runs(runs, "n2"))
        c.start_node("n2", env=env)
        c.wait_for(lambda: c.snapshot()["n2"]["state"]["base"] != "DOWN", what="n2 registered")
        assert c.state("n2") == "IDLE+DRAIN"
        assert _reason(c, "n2")["text"] == "HC: no fabric link"
        assert _runs(runs, "n2")[before].split()[1:] == ["UNKNOWN", "unset"]


def test_timeout_kills_the_group_and_reconfigure_switches_program(tmp_path: Path) -> None:
    verdicts = tmp_path / "verdicts"
    verdicts.mkdir()
    runs, pids = tmp_path / "runs.log", tmp_path / "pids"
    with Cluster(tmp_path / "c", ["n1"]) as c:
        wrapper = _script(tmp_path / "hc.sh", WRAPPER.format(runs=runs, example=EXAMPLE))
        (verdicts / "n1").write_text("ok\n")
        _conf(c, wrapper, interval=1)
        _start(c, {"n1": {"RANCH_HC_VERDICT_FILE": str(verdicts)}}, ready=["n1"])
        node_pid = c.nodes["n1"].pid
        started = c.snapshot()["n1"]["slurmd_start_time"]

        # Reconfigure: a new program and timeout reach the running node.
        sleeper = _script(tmp_path / "sleeper.sh", SLEEPER.format(pids=pids))
        _conf(c, sleeper, interval=1, timeout=1)
        rcontrol(c, "reconfigure")
        c.wait_for(lambda: c.state("n1") == "IDLE+DRAIN", timeout=10,
                   what="n1 drained by the hung check")
        assert _reason(c, "n1")["text"] == "HC: timed out after 1 s"
        assert reasons(c) == {"n1": "HC: timed out after 1 s"}
        # The script and the grandchild it left in the background are both gone.
        script_pid, child_pid = map(int, pids.read_text().splitlines()[0].split())
        wait_for(lambda: _gone(script_pid) and _gone(child_pid), timeout=5,
                 what=f"health program {script_pid} and its child {child_pid} to be gone")
        assert c.nodes["n1"].pid == node_pid and c.nodes["n1"].poll() is None
        assert c.snapshot()["n1"]["slurmd_start_time"] == started  # never re-registered

        # And back: the old program passes, the node recovers without a restart.
        _conf(c, wrapper, interval=1)
        rcontrol(c, "reconfigure")
        c.wait_for(lambda: c.state("n1") == "IDLE", timeout=10, what="n1 recovered")
        for line in pids.read_text().splitlines():
            for pid in map(int, line.split()):
                wait_for(lambda pid=pid: _gone(pid), timeout=5, what=f"pid {pid} gone")


def test_node_state_idle_skips_an_allocated_node(tmp_path: Path) -> None:
    verdicts = tmp_path / "verdicts"
    verdicts.mkdir()
    runs = tmp_path / "runs.log"
    env = {"RANCH_HC_VERDICT_FILE": str(verdicts)}
    for n in ("n1", "n2"):
        (verdicts / n).write_text("ok\n")
    with Cluster(tmp_path / "c", ["n1", "n2"]) as c:
        wrapper = _script(tmp_path / "hc.sh", WRAPPER.format(runs=runs, example=EXAMPLE))
        _conf(c, wrapper, node_state="IDLE")
        _start(c, {"n1": env, "n2": env}, ready=["n1", "n2"])
        out = c.run_cli("ranch.cli.rbatch", "-D", str(tmp_path), "-w", "n1", "--wrap", "sleep 300")
        assert out.returncode == 0, out.stderr
        job_id = out.stdout.split()[-1]
        c.wait_for(lambda: "node state IDLE -> ALLOCATED" in c.log("n1"),
                   what="n1 told it is ALLOCATED")
        # A check that started while n1 was IDLE may still be running: let a cycle pass.
        n2_runs = len(_runs(runs, "n2"))
        c.wait_for(lambda: len(_runs(runs, "n2")) >= n2_runs + 2, what="a check cycle passes")
        runs_before = len(_runs(runs, "n1"))
        for n in ("n1", "n2"):
            (verdicts / n).write_text("drain bad DIMM\n")
        c.wait_for(lambda: c.state("n2") == "IDLE+DRAIN", timeout=8, what="idle n2 drained")
        n2_runs = len(_runs(runs, "n2"))
        c.wait_for(lambda: len(_runs(runs, "n2")) >= n2_runs + 2, what="two more runs on n2")
        assert c.state("n1") == "ALLOCATED"
        assert _reason(c, "n1") is None
        assert len(_runs(runs, "n1")) == runs_before, _runs(runs, "n1")
        # Freed, it is checked again and drains.
        assert c.run_cli("ranch.cli.rcancel", job_id).returncode == 0
        c.wait_for(lambda: c.state("n1") == "IDLE+DRAIN", timeout=8, what="freed n1 drained")


def test_fake_gpu_xid_fails_and_hot_gpu_only_warns(tmp_path: Path) -> None:
    faults = {"g1": {"xids": [{"gpu": 0, "xid": 79}]}, "g2": {"temps": {"2": 91}}}
    envs = {}
    for name, body in faults.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(body))
        envs[name] = {"RANCH_FAKE_GPU_FAULTS": str(path)}
    program = (f'"{sys.executable} -m ranch.healthcheck --fake-gpus 4 --gpus 4 --gpu-max-temp 85"')
    with Cluster(tmp_path / "c", ["g1", "g2"]) as c:
        _conf(c, program)
        _start(c, envs)
        c.wait_for(lambda: c.state("g1") == "IDLE+FAIL", timeout=10, what="g1 failed by XID")
        text = _reason(c, "g1")["text"]
        assert text.startswith("HC: GPU ") and "XID 79: GPU has fallen off the bus" in text, text
        assert reasons(c) == {"g1": text}

        c.wait_for(lambda: (c.snapshot()["g2"]["health"] or {}).get("warnings"),
                   what="g2's warning reported")
        assert c.state("g2") == "IDLE"
        health = c.snapshot()["g2"]["health"]
        assert health == {"verdict": "ok", "message": "", "warnings": ["gpu2 at 91C"]}, health
        show = rcontrol(c, "show", "node", "g2")
        assert [ln.strip() for ln in show.splitlines() if "Health=" in ln] == [
            "Health=WARNING: gpu2 at 91C"], show
        assert "State=IDLE " in show and "Reason=" not in show, show
        metrics = rinfo(c, "-N", "--metrics")
        header = metrics.splitlines()[0].split()
        row = _line_of(metrics, "g2")
        assert header[-1] == "HEALTH" and row.endswith("gpu2 at 91C"), metrics
        assert "XID 79" in _line_of(metrics, "g1"), metrics

        # The fault cleared: the failed GPU node comes back by itself.
        (tmp_path / "g1.json").write_text("{}")
        c.wait_for(lambda: c.state("g1") == "IDLE", timeout=10, what="g1 back")


def test_fresh_node_with_failing_check_is_never_idle(tmp_path: Path) -> None:
    # No cached config: the node learns HealthCheckProgram from the controller, which asks it to
    # run the check before it registers. The check takes a moment, so an IDLE window would show.
    with Cluster(tmp_path / "c", ["n1"]) as c:
        sick = "#!/bin/sh\nsleep 0.3\necho no fabric link\nexit 1\n"
        program = _script(tmp_path / "sick.sh", sick)
        _conf(c, program, interval=30)
        c.start_ctld()
        assert not (c.dir / "spool" / "n1").exists()
        c.start_node("n1")
        seen: list[str] = []

        def drained() -> bool:
            seen.append(c.state("n1"))
            return "DRAIN" in seen[-1].split("+")

        wait_for(drained, 20, what="the fresh n1 drained by its first health check")
        assert not [s for s in seen if s.split("+")[0] == "IDLE" and "DRAIN" not in s], seen
        assert seen[-1] == "IDLE+DRAIN" and _reason(c, "n1")["text"] == "HC: no fabric link"
