"""rrun (srun) steps end to end: real rctld, three real rnoded, real rrun processes and tasks.
Labelled output from every node, srun's exit code, Ctrl-C twice, a cancelled job or a killed rrun
taking the tasks on every node with them, rcancel N.S, and a step across an rctld SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ranch.protocol import messages as m

from .cluster import Cluster, wait_for
from .test_jobs_e2e import cli, job_state, jobs_cluster, start, submit

NODES = ["n1", "n2", "n3"]
RRUN = f"{sys.executable} -m ranch.cli.rrun"


@pytest.fixture
def c(tmp_path: Path):
    cluster = jobs_cluster(tmp_path, NODES, cpus=2)
    try:
        start(cluster)
        yield cluster
    finally:
        cluster.stop()


def steps(c: Cluster, job_id: int) -> list[dict]:
    reply = c.request(m.GetJobs((job_id,)))
    [rec] = [j for j in reply.jobs if j["job_id"] == job_id]
    return rec.get("steps", [])


def rrun(c: Cluster, *argv: str) -> subprocess.Popen:
    """rrun started from outside the job (--jobid), as an admin attaches a step to a job."""
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
    return subprocess.Popen([sys.executable, "-m", "ranch.cli.rrun", *argv], cwd=c.dir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)


def holding_job(c: Cluster) -> int:
    jid = submit(c, "-N3", "-o", "/dev/null", "--wrap", "sleep 300")
    c.wait_for(lambda: job_state(c, jid) == "RUNNING", 30, what="job running")
    return jid


def pids_started(c: Cluster, n: int) -> list[int]:
    files = [c.dir / f"pid.{i}" for i in range(n)]
    wait_for(lambda: all(f.exists() and f.read_text().strip() for f in files), 30,
             what="every task started")
    return [int(f.read_text()) for f in files]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


TASK = "echo $$ > pid.$SLURM_PROCID; exec sleep 300"


def test_a_three_node_step_prints_three_labelled_lines(c: Cluster) -> None:
    out = c.dir / "out.txt"
    jid = submit(c, "-N3", "-o", str(out), "--wrap",
                 f"{RRUN} -N3 --label printenv SLURMD_NODENAME; echo rc=$?")
    c.wait_for(lambda: job_state(c, jid) == "COMPLETED", 60, what="job COMPLETED")
    lines = out.read_text().splitlines()
    assert sorted(lines[:3]) == ["0: n1", "1: n2", "2: n3"], lines
    assert lines[3] == "rc=0"
    [step] = steps(c, jid)
    assert (step["id"], step["state"], step["exit_code"], step["nodes"], step["ntasks"]) == (
        0, "COMPLETED", 0, "n[1-3]", 3)
    assert step["name"] == "printenv"


def test_a_task_exiting_3_makes_rrun_exit_3(c: Cluster) -> None:
    out = c.dir / "out.txt"
    jid = submit(c, "-N2", "-o", str(out), "--wrap",
                 f"{RRUN} -N2 sh -c 'echo task $SLURM_PROCID of $SLURM_NTASKS on "
                 f"$SLURMD_NODENAME; exit $((SLURM_PROCID * 3))'; echo rc=$?")
    c.wait_for(lambda: job_state(c, jid) == "COMPLETED", 60, what="job COMPLETED")
    text = out.read_text()
    assert "task 0 of 2 on n1" in text and "task 1 of 2 on n2" in text
    assert "error: n2: task 1: Exited with exit code 3" in text
    assert text.splitlines()[-1] == "rc=3"
    [step] = steps(c, jid)
    assert (step["state"], step["exit_code"]) == ("FAILED", 3)


def test_ctrl_c_twice_interrupts_the_tasks_on_every_node(c: Cluster) -> None:
    jid = holding_job(c)
    p = rrun(c, "--jobid", str(jid), "-N3", "--overlap", "sh", "-c", TASK)
    pids = pids_started(c, 3)
    p.send_signal(signal.SIGINT)
    assert p.stderr is not None  # the second Ctrl-C comes once the first was seen, as a user's
    first = p.stderr.readline()
    assert "interrupt (one more within 1 sec to abort)" in first
    p.send_signal(signal.SIGINT)  # srun 22.05: SIGINT to the tasks (tests/conformance)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGINT, err
    assert f"sending Ctrl-C to StepId={jid}.0" in err
    assert "forcing job termination" in err
    wait_for(lambda: not any(alive(pid) for pid in pids), 10, what="every task gone")
    c.wait_for(lambda: steps(c, jid)[0]["state"] == "CANCELLED", 15, what="step CANCELLED")
    assert job_state(c, jid) == "RUNNING"  # the job itself goes on


def test_one_ctrl_c_only_reports(c: Cluster) -> None:
    jid = holding_job(c)
    p = rrun(c, "--jobid", str(jid), "-N1", "--overlap", "sh", "-c",
             "echo $$ > pid.0; trap '' INT; sleep 2")
    pids_started(c, 1)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert f"StepId={jid}.0 tasks 0: running" in err


def test_cancelling_the_job_ends_its_steps_tasks(c: Cluster) -> None:
    jid = holding_job(c)
    p = rrun(c, "--jobid", str(jid), "-N3", "--overlap", "sh", "-c", TASK)
    pids = pids_started(c, 3)
    cli(c, "rcancel", str(jid))
    p.communicate(timeout=30)
    assert p.returncode != 0
    wait_for(lambda: not any(alive(pid) for pid in pids), 15, what="every task gone")
    c.wait_for(lambda: job_state(c, jid) == "CANCELLED", 15, what="job CANCELLED")
    assert steps(c, jid)[0]["state"] == "CANCELLED"


def test_a_killed_rrun_takes_its_tasks_with_it(c: Cluster) -> None:
    jid = holding_job(c)
    p = rrun(c, "--jobid", str(jid), "-N3", "--overlap", "sh", "-c", TASK)
    pids = pids_started(c, 3)
    p.kill()
    p.wait()
    wait_for(lambda: not any(alive(pid) for pid in pids), 15, what="every task gone")
    c.wait_for(lambda: steps(c, jid)[0]["state"] == "CANCELLED", 15, what="step CANCELLED")


def test_cancelling_one_step_leaves_the_other(c: Cluster) -> None:
    jid = holding_job(c)
    first = rrun(c, "--jobid", str(jid), "-N1", "-w", "n1", "sh", "-c",
                 "echo $$ > pid.0; exec sleep 300")
    pids_started(c, 1)
    second = rrun(c, "--jobid", str(jid), "-N1", "-w", "n2", "sh", "-c",
                  "echo $$ > pid.1; exec sleep 300")
    [_, keep] = pids_started(c, 2)
    reply = c.request(m.CancelJobs(steps=((jid, 0),), user="root", uid=0))
    assert reply.ok, reply
    first.communicate(timeout=30)
    assert first.returncode == 128 + signal.SIGTERM
    assert alive(keep) and second.poll() is None
    # rrun ends on its tasks' signal, which may reach it before the node's step end reaches the
    # controller: the listing is waited for, not read once
    c.wait_for(lambda: {s["id"]: s["state"] for s in steps(c, jid)} == {
        0: "CANCELLED", 1: "RUNNING"}, 15, what="step 0 CANCELLED, step 1 RUNNING")
    again = c.request(m.CancelJobs(steps=((jid, 0),), user="root", uid=0))
    # slurmctld forgets an ended step: scancel's words for a step it does not have (22.05)
    assert again.errors == (f"Kill job error on job step id {jid}: Invalid job id specified",)
    second.kill()


def test_a_step_the_cpus_cannot_hold_waits_or_is_refused(c: Cluster) -> None:
    jid = holding_job(c)  # 1 CPU of each 2-CPU node: the job holds what -N3 asked
    p = rrun(c, "--jobid", str(jid), "-n", "9", "true")
    _, err = p.communicate(timeout=30)
    assert p.returncode == 1
    assert f"Unable to create step for job {jid}: More processors requested than permitted" \
        in err
    p = rrun(c, "--jobid", str(jid), "-N4", "true")
    _, err = p.communicate(timeout=30)
    assert p.returncode == 1 and "Requested node configuration is not available" in err


def test_a_step_outlives_an_rctld_sigkill_and_ends_once(c: Cluster) -> None:
    jid = holding_job(c)
    gate = c.dir / "go"
    p = rrun(c, "--jobid", str(jid), "-N2", "sh", "-c",
             f"echo $$ > pid.$SLURM_PROCID; while [ ! -e {gate} ]; do sleep 0.05; done; "
             "echo done $SLURM_PROCID")
    pids_started(c, 2)
    c.kill_ctld()  # the step was granted, so it is on disk
    c.start_ctld()
    assert [s["state"] for s in steps(c, jid)] == ["RUNNING"]
    gate.write_text("")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert sorted(out.split("\n")[:2]) == ["done 0", "done 1"]
    c.wait_for(lambda: steps(c, jid)[0]["state"] == "COMPLETED", 30, what="step COMPLETED")
    c.kill_ctld()
    c.start_ctld()
    # the listing showed the end before its journal record was on disk (a reader is told
    # nothing it confirmed); a node whose StepEnd was not acknowledged sends it again, and
    # the step ends once, with its one run
    c.wait_for(lambda: [(s["id"], s["state"]) for s in steps(c, jid)] == [(0, "COMPLETED")],
               30, what="the step COMPLETED after the second kill")
    assert os.path.exists(gate)


def test_gpus_per_task_gives_each_task_its_own_gpu(tmp_path: Path) -> None:
    c = jobs_cluster(tmp_path, ["g1"], cpus=2, gpus=2)  # fake GPUs: no hardware here
    try:
        start(c)
        out = c.dir / "out.txt"
        jid = submit(c, "-N1", "-n2", "--gpus=2", "-o", str(out), "--wrap",
                     f"echo job $CUDA_VISIBLE_DEVICES; {RRUN} -n2 --gpus-per-task=1 --label "
                     "sh -c 'echo $CUDA_VISIBLE_DEVICES'; "
                     f"{RRUN} -n1 --gpus-per-task=3 true; echo rc=$?")
        c.wait_for(lambda: job_state(c, jid) == "COMPLETED", 60, what="job COMPLETED")
        lines = out.read_text().splitlines()
        assert lines[0] == "job 0,1"
        assert sorted(lines[1:3]) == ["0: 0", "1: 1"], lines
        assert any("Invalid generic resource (gres) specification" in x for x in lines), lines
        assert lines[-1] == "rc=1"
    finally:
        c.stop()


def test_rrun_outside_a_job_allocates_runs_and_releases(c: Cluster) -> None:
    env = {k: v for k, v in c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"}).items()
           if not k.startswith("SLURM_")}
    done = subprocess.run([sys.executable, "-m", "ranch.cli.rrun", "-N2", "--label", "sh", "-c",
                           "echo $SLURMD_NODENAME; exit $SLURM_PROCID"], cwd=c.dir, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert sorted(done.stdout.splitlines()) == ["0: n1", "1: n2"]
    # the allocation made for it, released with its code (COMPLETING until its node reports)
    c.wait_for(lambda: c.request(m.GetJobs()).jobs[0]["state"] != "COMPLETING", 20,
               what="the allocation ended")
    [rec] = c.request(m.GetJobs()).jobs
    assert (rec["state"], rec["exit_code"]) == ("FAILED", 1)
    assert [(s["id"], s["state"], s["exit_code"]) for s in rec["steps"]] == [(0, "FAILED", 1)]


def test_sigterm_to_rrun_ends_the_step_as_it_ends_sruns(c: Cluster) -> None:
    jid = holding_job(c)
    p = rrun(c, "--jobid", str(jid), "-N2", "--overlap", "sh", "-c",
             "trap '' TERM; " + TASK)  # the tasks ignore SIGTERM: srun does not pass it on
    pids = pids_started(c, 2)
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGKILL
    wait_for(lambda: not any(alive(pid) for pid in pids), 15, what="every task gone")
