"""Jobs end to end: real rctld and rnoded processes, real rbatch/rqueue/rcancel/rinfo commands,
real job processes. The node states an admin sees (idle -> mix -> alloc -> idle, drng ->
drain), time limits, cancel, node loss with requeue, rctld SIGKILL, and the stale copy a
returning node still runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .cluster import Cluster, free_port, wait_for

CONF = """\
ClusterName=jobs
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout={timeout}
MessageTimeout=3
ReturnToService=1
KillWait=1
NodeName={nodes} CPUs={cpus} RealMemory=64{gres}
PartitionName=main Nodes={nodes} Default=YES
"""


def jobs_cluster(tmp: Path, nodes: list[str], *, cpus: int = 1, timeout: int = 10,
                 gpus: int = 0) -> Cluster:
    """SlurmdTimeout `timeout` (10 s: a loaded machine can miss 3 one-second heartbeats; only
    the node-loss test asks for 3)."""
    port = free_port()
    gres = f" Gres=gpu:{gpus}" if gpus else ""
    c = Cluster(tmp, nodes, conf_text=CONF.format(port=port, nodes=",".join(nodes), cpus=cpus,
                                                  timeout=timeout, gres=gres))
    c.fake_gpus = gpus  # type: ignore[attr-defined]
    c.port, c.addr = port, ("127.0.0.1", port)
    return c


def start_node(c: Cluster, name: str) -> subprocess.Popen:
    argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{c.port}", "--name", name,
            "--spool-dir", str(c.dir / "spool" / name)]
    if getattr(c, "fake_gpus", 0):
        argv += ["--fake-gpus", str(c.fake_gpus)]
    c.nodes[name] = c._spawn(name, argv)
    return c.nodes[name]


def start(c: Cluster) -> None:
    c.start_ctld()
    for name in c.node_names:
        start_node(c, name)
    c.wait_for(lambda: all(c.state(n) == "IDLE" for n in c.node_names), 30, what="nodes IDLE")


def cli(c: Cluster, command: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = c.run_cli(f"ranch.cli.{command}", *argv)
    if check:
        assert done.returncode == 0, f"{command} {argv}: {done.stderr}"
    return done


def submit(c: Cluster, *argv: str) -> int:
    out = cli(c, "rbatch", "-D", str(c.dir), *argv).stdout
    assert out.startswith("Submitted batch job "), out
    return int(out.split()[-1])


def job(c: Cluster, job_id: int) -> dict:
    doc = json.loads(cli(c, "rqueue", "--json", "-j", str(job_id)).stdout)
    [j] = [j for j in doc["jobs"] if j["job_id"] == job_id]  # -j of an array: all its tasks
    return j


def job_state(c: Cluster, job_id: int) -> str:
    return job(c, job_id)["job_state"][0]


def compact(c: Cluster, name: str) -> str:
    return c.snapshot()[name]["compact"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def test_idle_mix_alloc_idle_and_output(tmp_path: Path) -> None:
    with jobs_cluster(tmp_path, ["n1"], cpus=2) as c:
        start(c)
        seen = [compact(c, "n1")]
        a = submit(c, "--wrap", "sleep 0.5; echo ok")
        c.wait_for(lambda: compact(c, "n1") in ("mix", "idle"), what="n1 mix")
        seen.append(compact(c, "n1"))
        b = submit(c, "--wrap", "sleep 0.5; echo ok")
        seen.append(compact(c, "n1"))
        c.wait_for(lambda: job_state(c, a) == "COMPLETED" and job_state(c, b) == "COMPLETED",
                   what="both jobs COMPLETED")
        c.wait_for(lambda: compact(c, "n1") == "idle", what="n1 idle again")
        seen.append(compact(c, "n1"))
        assert seen == ["idle", "mix", "alloc", "idle"], seen
        for j in (a, b):
            assert (tmp_path / f"slurm-{j}.out").read_text() == "ok\n"
        assert job(c, a)["exit_code"]["return_code"]["number"] == 0


def test_drain_lets_the_job_finish(tmp_path: Path) -> None:
    with jobs_cluster(tmp_path, ["n1", "n2"]) as c:
        start(c)
        j = submit(c, "-w", "n1", "--wrap", "sleep 1.5; echo ok")
        c.wait_for(lambda: compact(c, "n1") == "alloc", what="n1 alloc")
        cli(c, "rcontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=maint")
        assert compact(c, "n1") == "drng"
        k = submit(c, "--wrap", "echo second")
        c.wait_for(lambda: job_state(c, k) == "COMPLETED", what="second job elsewhere")
        assert job(c, k)["nodes"] == "n2"
        c.wait_for(lambda: compact(c, "n1") == "drain", what="n1 drained")
        assert job_state(c, j) == "COMPLETED"
        assert (tmp_path / f"slurm-{j}.out").read_text() == "ok\n"


def test_time_limit_and_cancel_kill_the_whole_tree(tmp_path: Path) -> None:
    with jobs_cluster(tmp_path, ["n1", "n2"]) as c:
        start(c)
        t = submit(c, "-t", "0:01", "--wrap", "sleep 30")
        c.wait_for(lambda: job_state(c, t) == "TIMEOUT", timeout=20, what="TIMEOUT")
        script = tmp_path / "tree.sh"
        script.write_text("#!/bin/sh\nsleep 60 &\necho $! > child.pid\nwait\n")
        j = submit(c, str(script))
        pid_file = tmp_path / "child.pid"
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="child pid")
        child = int(pid_file.read_text())
        assert alive(child)
        cli(c, "rcancel", str(j))
        c.wait_for(lambda: job_state(c, j) == "CANCELLED", what="CANCELLED")
        wait_for(lambda: not alive(child), what="the job's child killed")
        c.wait_for(lambda: all(compact(c, n) == "idle" for n in ("n1", "n2")), what="idle")
        # a job that ignores SIGTERM: COMPLETING until SIGKILL comes, KillWait (1 s) later
        s = submit(c, "-w", "n1", "--wrap", "trap '' TERM; echo up; sleep 30")
        out = tmp_path / f"slurm-{s}.out"
        wait_for(lambda: out.exists() and "up" in out.read_text(), what="job up")
        cli(c, "rcancel", str(s))
        assert job_state(c, s) == "COMPLETING"
        assert "COMPLETING" in c.state("n1")
        c.wait_for(lambda: job_state(c, s) == "CANCELLED", what="killed after KillWait")
        assert c.state("n1") == "IDLE"


def test_node_loss_requeues_elsewhere_and_the_returning_stale_copy_is_killed(
        tmp_path: Path) -> None:
    with jobs_cluster(tmp_path, ["n1", "n2"], timeout=3) as c:
        start(c)
        script = tmp_path / "job.sh"
        # the first run hangs and records its pid; the requeued run finishes at once
        script.write_text('#!/bin/sh\nif [ -z "$SLURM_RESTART_COUNT" ]; then\n'
                          '  echo $$ > first.pid; sleep 120\nfi\n'
                          'echo "ran $SLURM_RESTART_COUNT on $SLURM_JOB_NODELIST"\n')
        j = submit(c, str(script))
        pid_file = tmp_path / "first.pid"
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="first run")
        first = int(pid_file.read_text())
        assert job(c, j)["nodes"] == "n1"  # first fit: config order
        c.kill_node("n1")  # SIGKILL rnoded: the node goes silent, its job keeps running
        c.wait_for(lambda: c.state("n1").startswith("DOWN"), timeout=20, what="n1 DOWN")
        c.wait_for(lambda: job_state(c, j) == "COMPLETED", timeout=20, what="rerun on n2")
        assert job(c, j)["nodes"] == "n2" and job(c, j)["restart_cnt"] == 1
        assert (tmp_path / f"slurm-{j}.out").read_text() == "ran 1 on n2\n"
        # n1's rnoded comes back and reports the first copy, still running: it is killed
        assert alive(first)
        start_node(c, "n1")
        wait_for(lambda: not alive(first), timeout=20, what="stale copy killed")
        c.wait_for(lambda: c.state("n1") == "IDLE", timeout=20, what="n1 back")
        assert job_state(c, j) == "COMPLETED"


def test_rctld_sigkill_loses_nothing(tmp_path: Path) -> None:
    with jobs_cluster(tmp_path, ["n1", "n2"]) as c:
        start(c)
        running = [submit(c, "--wrap", "sleep 2; echo ok") for _ in range(2)]
        pending = [submit(c, "--wrap", "echo later") for _ in range(3)]
        c.wait_for(lambda: all(job_state(c, j) == "RUNNING" for j in running), what="running")
        c.kill_ctld()  # SIGKILL right after the last acknowledged submission
        c.start_ctld()
        states = {j: job_state(c, j) for j in running + pending}
        assert all(states[j] in ("RUNNING", "COMPLETED") for j in running), states
        c.wait_for(lambda: all(job_state(c, j) == "COMPLETED" for j in running + pending),
                   timeout=30, what="every job COMPLETED after the restart")
        for j in running:
            assert (tmp_path / f"slurm-{j}.out").read_text() == "ok\n"
            assert job(c, j)["restart_cnt"] == 0  # kept, not rerun


def test_gpus_arrays_and_signals(tmp_path: Path) -> None:
    with jobs_cluster(tmp_path, ["n1"], cpus=2, gpus=2) as c:
        start(c)
        a = submit(c, "--gpus", "2", "--wrap", "echo $CUDA_VISIBLE_DEVICES; sleep 1")
        c.wait_for(lambda: c.snapshot()["n1"]["gres_used"] == "gpu:2(IDX:0-1)",
                   what="both GPUs in use")
        b = submit(c, "--gres", "gpu:1", "--wrap", "echo $CUDA_VISIBLE_DEVICES")
        assert job(c, b)["state_reason"] == "Resources"  # a CPU is free, no GPU is
        assert compact(c, "n1") == "mix"
        c.wait_for(lambda: all(job_state(c, j) == "COMPLETED" for j in (a, b)),
                   what="GPU jobs done")
        got = [(tmp_path / f"slurm-{j}.out").read_text().strip() for j in (a, b)]
        assert got == ["0,1", "0"], got
        arr = submit(c, "--array=1-3", "-o", "arr-%A_%a.out", "--wrap",
                     "echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID")
        ids = [j["job_id"] for j in json.loads(cli(c, "rqueue", "--json", "-t", "all", "-j",
                                                      str(arr)).stdout)["jobs"]]
        assert sorted(ids) == [arr, arr + 1, arr + 2]
        c.wait_for(lambda: all(job_state(c, j) == "COMPLETED" for j in ids), what="array")
        for task in (1, 2, 3):
            assert (tmp_path / f"arr-{arr}_{task}.out").read_text() == f"task {task} of {arr}\n"
        script = tmp_path / "trap.sh"
        script.write_text("#!/bin/sh\ntrap 'echo got USR1; exit 3' USR1\necho ready\n"
                          "while true; do sleep 0.1; done\n")
        t = submit(c, str(script))
        out = tmp_path / f"slurm-{t}.out"
        wait_for(lambda: out.exists() and "ready" in out.read_text(), what="trap ready")
        cli(c, "rcancel", "--signal=USR1", str(t))
        c.wait_for(lambda: job_state(c, t) == "FAILED", what="signalled job ends")
        assert "got USR1" in out.read_text()
        assert job(c, t)["exit_code"]["return_code"]["number"] == 3


def test_state_fail_kills_the_tree_and_requeues_elsewhere(tmp_path: Path) -> None:
    """Issue 12: rcontrol update State=FAIL kills the node's jobs (their whole process tree)
    and requeues them; the node ends `fail`."""
    with jobs_cluster(tmp_path, ["n1", "n2"]) as c:
        start(c)
        script = tmp_path / "fail.sh"
        script.write_text('#!/bin/sh\nif [ -z "$SLURM_RESTART_COUNT" ]; then\n'
                          '  sleep 120 &\n  echo $! > child.pid\n  wait\nfi\n'
                          'echo "ran $SLURM_RESTART_COUNT on $SLURM_JOB_NODELIST"\n')
        j = submit(c, str(script))
        pid_file = tmp_path / "child.pid"
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="child pid")
        child = int(pid_file.read_text())
        assert job(c, j)["nodes"] == "n1"
        cli(c, "rcontrol", "update", "NodeName=n1", "State=FAIL", "Reason=bad dimm")
        wait_for(lambda: not alive(child), what="the job's child killed")
        c.wait_for(lambda: job_state(c, j) == "COMPLETED", timeout=20, what="rerun on n2")
        assert job(c, j)["nodes"] == "n2" and job(c, j)["restart_cnt"] == 1
        assert (tmp_path / f"slurm-{j}.out").read_text() == "ran 1 on n2\n"
        c.wait_for(lambda: compact(c, "n1") == "fail", what="n1 fail")


def test_tasks_without_nodes_spread_over_several_nodes(tmp_path: Path) -> None:
    """sbatch's -n without -N: three 1-CPU tasks on 1-CPU nodes take three nodes."""
    with jobs_cluster(tmp_path, ["n1", "n2", "n3"]) as c:
        start(c)
        j = submit(c, "-n", "3", "--wrap",
                   'echo "$SLURM_NNODES $SLURM_JOB_NODELIST $SLURM_NTASKS"; '
                   'while [ ! -e go ]; do sleep 0.05; done')
        c.wait_for(lambda: all(compact(c, n) == "alloc" for n in ("n1", "n2", "n3")),
                   what="every node alloc")
        assert job(c, j)["nodes"] == "n[1-3]" and job(c, j)["node_count"]["number"] == 3
        (tmp_path / "go").touch()
        c.wait_for(lambda: job_state(c, j) == "COMPLETED", what="COMPLETED")
        assert (tmp_path / f"slurm-{j}.out").read_text() == "3 n[1-3] 3\n"
        # more tasks than the partition's CPUs: it waits (EnforcePartLimits=NO, as Slurm's)
        k = submit(c, "-n", "4", "--wrap", "true")
        c.wait_for(lambda: job(c, k)["state_reason"] == "PartitionConfig", what="it waits")
        assert job(c, k)["node_count"]["number"] == 4


def test_begin_time_waits_survives_rctld_sigkill_then_runs(tmp_path: Path) -> None:
    """rbatch --begin: PENDING (BeginTime) in rqueue and show job until then, kept across a
    SIGKILL of rctld, started by the restarted controller when the time comes."""
    with jobs_cluster(tmp_path, ["n1"]) as c:
        start(c)
        j = submit(c, "--begin=now+6", "--wrap", "echo began")
        out = cli(c, "rqueue", "-h", "-j", str(j), "-o", "%i %T %r").stdout.split()
        assert out == [str(j), "PENDING", "BeginTime"], out
        shown = cli(c, "rcontrol", "-o", "show", "job", str(j)).stdout
        fields = dict(w.split("=", 1) for w in shown.split() if "=" in w)
        assert fields["Reason"] == "BeginTime" and fields["EligibleTime"] > fields["SubmitTime"]
        c.kill_ctld()
        c.start_ctld()
        assert job(c, j)["state_reason"] == "BeginTime"
        c.wait_for(lambda: job_state(c, j) == "COMPLETED", timeout=20, what="began")
        rec = job(c, j)
        assert rec["start_time"]["number"] >= rec["eligible_time"]["number"]
        assert (tmp_path / f"slurm-{j}.out").read_text() == "began\n"
        # rcontrol update JobId=N StartTime=...: tomorrow's job moved to now
        k = submit(c, "--begin=tomorrow", "--wrap", "echo moved")
        assert job(c, k)["state_reason"] == "BeginTime"
        done = cli(c, "rcontrol", "update", f"JobId={k}", "StartTime=noon+", check=False)
        assert done.returncode == 1 and "StartTime=noon+" in done.stderr
        cli(c, "rcontrol", "update", f"JobId={k}", "StartTime=now")
        c.wait_for(lambda: job_state(c, k) == "COMPLETED", what="moved job ran")
        done = cli(c, "rcontrol", "update", f"JobId={k}", "StartTime=now+60", check=False)
        assert done.returncode == 1 and "no longer pending" in done.stderr
