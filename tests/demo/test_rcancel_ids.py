"""`rcancel 12 13_2` as in the tour (docs/tour.md): as scancel 22.05 does, an id that names no job
is passed over in silence with exit 0 (with -v it is said, still 0; the value matrix of
tests/conformance compares this with Slurm), while the ids that do name jobs are cancelled."""

from __future__ import annotations

from pathlib import Path

from ranch.protocol import messages as m
from tests.integration.cluster import Cluster


def _states(c: Cluster) -> dict[str, str]:
    jobs = c.request(m.GetJobs()).jobs
    return {(f"{j['array_job_id']}_{j['array_task_id']}" if j.get("array_job_id")
             else str(j["job_id"])): j["state"] for j in jobs}


def test_unknown_ids_are_passed_over_and_the_rest_cancelled(tmp_path: Path) -> None:
    with Cluster(tmp_path, nodes=["n1"]) as c:
        c.start_ctld()  # no node: the jobs wait (and their BeginTime is an hour away anyway)
        for argv in (["--wrap", "true"], ["-a", "1-2", "--wrap", "true"]):
            done = c.run_cli("ranch.cli.rbatch", "-b", "now+3600", *argv)
            assert done.returncode == 0, done.stderr
        assert _states(c) == {"1": "PENDING", "2_1": "PENDING", "2_2": "PENDING"}

        done = c.run_cli("ranch.cli.rcancel", "12", "13_2")
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")

        done = c.run_cli("ranch.cli.rcancel", "-v", "12", "13_2")
        assert done.returncode == 0
        said = done.stderr.splitlines()
        assert any("12" in line and "Invalid job id" in line for line in said), said
        assert any("13_2" in line and "Invalid job id" in line for line in said), said

        done = c.run_cli("ranch.cli.rcancel", "12", "1", "13_2,2_2")
        assert (done.returncode, done.stderr) == (0, "")
        assert _states(c) == {"1": "CANCELLED", "2_1": "PENDING", "2_2": "CANCELLED"}

        done = c.run_cli("ranch.cli.rcancel", "2_2x")  # not an id at all: refused before asking
        assert done.returncode == 1 and "2_2x" in done.stderr
