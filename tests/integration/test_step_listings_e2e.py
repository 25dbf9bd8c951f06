"""Where a user sees rrun's steps, against real daemons: rqueue -s, rcontrol show step, rcancel N.S
(with scancel's words and exit codes), and racct's step lines, which outlive the job's purge
and an rctld restart (the finished-job history keeps them)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from ranch.protocol import messages as m

from .cluster import Cluster
from .test_jobs_e2e import cli, job_state, jobs_cluster, start, submit
from .test_racct_e2e import acct_cluster, held, history_lines
from .test_steps_e2e import RRUN, holding_job, pids_started, rrun, steps

NODES = ["n1", "n2", "n3"]


@pytest.fixture
def c(tmp_path: Path):
    cluster = jobs_cluster(tmp_path, NODES, cpus=2)
    try:
        start(cluster)
        yield cluster
    finally:
        cluster.stop()


def run(c: Cluster, command: str, *argv: str) -> subprocess.CompletedProcess:
    return cli(c, command, *argv, check=False)


def test_running_steps_in_rqueue_show_step_and_rcancel(c: Cluster) -> None:
    jid = holding_job(c)
    procs = [rrun(c, "--jobid", str(jid), "-N2", "-w", "n[1-2]", "sh", "-c",
                  "echo $$ > pid.$SLURM_PROCID; exec sleep 300")]
    try:
        c.wait_for(lambda: len(steps(c, jid)) == 1, 15, what="step 0 recorded")
        procs.append(rrun(c, "--jobid", str(jid), "-N1", "-w", "n3", "-J", "third", "sh", "-c",
                          "echo $$ > pid.2; exec sleep 300"))
        pids_started(c, 3)
        c.wait_for(lambda: len(steps(c, jid)) == 2, 15, what="two steps recorded")
        out = cli(c, "rqueue", "-s").stdout.splitlines()
        assert out[0] == "         STEPID     NAME PARTITION     USER      TIME NODELIST"
        rows = [line.split() for line in out[1:]]
        assert [(r[0], r[1], r[2], r[5]) for r in rows] == [
            (f"{jid}.0", "sh", "main", "n[1-2]"), (f"{jid}.1", "third", "main", "n3"),
            (f"{jid}.batch", "batch", "main", "n1")]
        assert cli(c, "rqueue", "-s", f"{jid}.1", "-h", "-o", "%i %A %N").stdout == \
            f"{jid}.1 1 n3\n"
        assert cli(c, "rqueue", "-s", "-h", "-u", "nobody").stdout == ""
        custom = cli(c, "rqueue", "-s", "-j", str(jid), "-h", "-O", "StepID:10,NumTasks:4,"
                     "StepState:8,Name")
        assert custom.stdout.splitlines()[0] == f"{jid}.0".ljust(10) + "2   RUNNING"
        assert "Invalid job step format specification: Name" in custom.stderr

        shown = cli(c, "rcontrol", "show", "step", f"{jid}.0").stdout.splitlines()
        assert shown[0].startswith(f"StepId={jid}.0 UserId=")
        assert shown[1].strip() == "State=RUNNING Partition=main NodeList=n[1-2]"
        assert shown[2].strip() == "Nodes=2 CPUs=2 Tasks=2 Name=sh Network=(null)"
        one = cli(c, "rcontrol", "-o", "show", "step", str(jid)).stdout.splitlines()
        assert [line.split()[0] for line in one] == [f"StepId={jid}.batch", f"StepId={jid}.0",
                                                     f"StepId={jid}.1"]
        doc = json.loads(cli(c, "rcontrol", "--json", "show", "step", str(jid)).stdout)
        assert [s["step_id"] for s in doc["steps"]] == [f"{jid}.batch", f"{jid}.0", f"{jid}.1"]
        missing = run(c, "rcontrol", "show", "step", f"{jid}.7")
        assert (missing.returncode, missing.stdout) == (1, f"Job step {jid}.7 not found\n")

        gone = run(c, "rcancel", f"{jid}.7")
        assert (gone.returncode, gone.stderr) == (
            225, f"rcancel: error: Kill job error on job step id {jid}: Invalid job id specified\n")
        bad = run(c, "rcancel", f"{jid}.x")
        assert (bad.returncode, bad.stderr) == (1, f"rcancel: error: Invalid job id {jid}.x\n")
        nojob = run(c, "rcancel", "99999.0")
        assert nojob.returncode == 1
        assert "Kill job error on job step id 99999.0: Invalid job id specified" in nojob.stderr

        # somebody else's step: scancel's words (exit 218 through rcancel, step_error_code)
        theirs = c.request(m.CancelJobs(steps=((jid, 0),), user="bob", uid=1001))
        assert theirs.errors == (f"Kill job error on job step id {jid}: Invalid user id",)
        ok = run(c, "rcancel", "-v", f"{jid}.1")
        assert (ok.returncode, ok.stderr) == (0, f"rcancel: Terminating step {jid}.1\n")
        procs[1].communicate(timeout=30)
        c.wait_for(lambda: [s["state"] for s in steps(c, jid)] == ["RUNNING", "CANCELLED"], 15,
                   what="step 1 CANCELLED")
        assert f"{jid}.1" not in cli(c, "rqueue", "-s").stdout  # an ended step is not listed
        again = run(c, "rcancel", f"{jid}.1")  # ... and is gone for rcancel, as in Slurm
        assert again.returncode == 225, again.stderr
        assert procs[0].poll() is None and job_state(c, jid) == "RUNNING"
    finally:
        for p in procs:
            p.kill()
            p.communicate()


def test_racct_step_lines_outlive_the_purge_and_a_restart(tmp_path: Path) -> None:
    c = acct_cluster(tmp_path, min_job_age=2)
    with c:
        start(c)
        jid = submit(c, "-J", "stepped", "-o", "/dev/null", "--wrap",
                     f"{RRUN} -n1 true; {RRUN} -n1 -J three sh -c 'exit 3'; true")
        c.wait_for(lambda: job_state(c, jid) == "COMPLETED", 60, what="job COMPLETED")
        fields = "JobID,JobName,State,ExitCode,NodeList,NTasks"
        want = ["JobID|JobName|State|ExitCode|NodeList|NTasks",
                f"{jid}|stepped|COMPLETED|0:0|n1|", f"{jid}.batch|batch|COMPLETED|0:0|n1|1",
                f"{jid}.0|true|COMPLETED|0:0|n1|1", f"{jid}.1|three|FAILED|3:0|n1|1"]

        def lines(*extra: str) -> list[str]:
            return cli(c, "racct", "-j", str(jid), "-P", "-o", fields, *extra).stdout.splitlines()

        assert lines() == want
        c.wait_for(lambda: history_lines(c, jid), 20, what="the job's history record")
        deadline = time.monotonic() + 30  # past MinJobAge another job's change purges it
        while held(c, jid) and time.monotonic() < deadline:
            submit(c, "-o", "/dev/null", "--wrap", "true")
            c.wait_for(lambda: not cli(c, "rqueue", "-h").stdout.strip(), 20, what="queue empty")
        assert not held(c, jid), "the finished job was never purged"
        c.stop_ctld()
        c.start_ctld()
        assert lines() == want  # from the history file now
        assert cli(c, "racct", "-j", f"{jid}.1", "-n", "-P", "-o", fields).stdout == \
            want[-1] + "\n"
        assert lines("-X") == want[:2]
        doc = json.loads(cli(c, "racct", "-j", str(jid), "--json").stdout)
        [job] = doc["jobs"]
        assert [(s["step"]["id"], s["state"]) for s in job["steps"]] == [
            (f"{jid}.batch", "COMPLETED"), (f"{jid}.0", "COMPLETED"), (f"{jid}.1", "FAILED")]
        assert cli(c, "racct", "-j", str(jid), "-n", "-X", "-P", "-o",
                   "DerivedExitCode").stdout == "3:0\n"
