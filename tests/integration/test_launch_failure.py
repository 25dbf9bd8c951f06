"""A node that cannot launch jobs is drained with slurmctld's reason instead of failing every
job sent to it; an rnoded given a relative --spool-dir runs jobs (the path is made absolute)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .cluster import REPO
from .test_jobs_e2e import job, job_state, jobs_cluster, start, submit


def test_launch_failure_drains_the_node(tmp_path: Path) -> None:
    with jobs_cluster(tmp_path, ["n1", "n2"]) as c:
        start(c)
        jobs_dir = tmp_path / "spool" / "n1" / "jobs"
        shutil.rmtree(jobs_dir, ignore_errors=True)
        # n1 registered; it may not have written its spool yet (a loaded machine)
        jobs_dir.parent.mkdir(parents=True, exist_ok=True)
        jobs_dir.write_text("not a directory\n")  # the node's spool is broken, even for root
        first = submit(c, "-w", "n1", "--wrap", "echo one")
        c.wait_for(lambda: job_state(c, first) == "FAILED", what="first job FAILED")
        rec = c.snapshot()["n1"]
        assert rec["complete"].startswith("IDLE+DRAIN"), rec["complete"]
        assert rec["state"]["reason"]["text"] == "batch job complete failure"
        # the next job is not sent to the broken node to fail too
        second = submit(c, "--wrap", "echo two")
        c.wait_for(lambda: job_state(c, second) == "COMPLETED", what="second job COMPLETED")
        assert job(c, second)["nodes"] == "n2"
        assert "node cannot launch jobs; draining it" in c.log("rctld")


def test_relative_spool_dir(tmp_path: Path) -> None:
    with jobs_cluster(tmp_path, ["n1"]) as c:
        c.start_ctld()
        log = open(tmp_path / "n1.log", "ab")
        c.nodes["n1"] = subprocess.Popen(
            [sys.executable, "-m", "ranch.noded", "--server", f"127.0.0.1:{c.port}",
             "--name", "n1", "--spool-dir", "relspool"],
            cwd=tmp_path, env=c._env({"PYTHONPATH": str(REPO)}), stdout=log,
            stderr=subprocess.STDOUT)
        log.close()
        c.wait_for(lambda: c.state("n1") == "IDLE", what="n1 idle")
        done = submit(c, "--wrap", "echo ran")
        c.wait_for(lambda: job_state(c, done) == "COMPLETED", what="job COMPLETED")
        assert (tmp_path / f"slurm-{done}.out").read_text() == "ran\n"
        assert f"spool {tmp_path / 'relspool'}" in c.log("n1")
        assert c.state("n1") == "IDLE"
