"""How a job ends, as a table a reviewer can read as a specification: each scenario runs under
real rctld and rnoded processes, with and without a time limit, and ends in the JobState,
ExitCode (code:signal), Restarts and rqueue state letter that Slurm 22.05 gives for it
(tests/conformance/ runs the same scenarios on a real Slurm).

The bug this guards against: every job with a time limit ended TIMEOUT, also one that exited 0
at once; 1,317 tests passed around it because none compared a whole ending with Slurm's.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from .cluster import wait_for
from .test_jobs_e2e import cli, job, jobs_cluster, start, start_node, submit

# (name, script, how it is ended, final JobState, ExitCode, Restarts, squeue's letter at the end)
# "how": "" it ends by itself; "cancel-pending" (held, then rcancel); "cancel-running";
# "cancel-completing" (a job that ignores SIGTERM: cancelled twice while COMPLETING).
SCENARIOS = [
    ("exit0", "true", "", "COMPLETED", "0:0", 0, "CD"),
    ("exit3", "exit 3", "", "FAILED", "3:0", 0, "F"),
    ("sigkill", "kill -9 $$", "", "FAILED", "0:9", 0, "F"),
    ("slow-exit0", "sleep 1; true", "", "COMPLETED", "0:0", 0, "CD"),
    ("cancel-pending", "true", "cancel-pending", "CANCELLED", "0:0", 0, "CA"),
    ("cancel-running", "echo up; sleep 60", "cancel-running", "CANCELLED", "0:15", 0, "CA"),
    ("cancel-completing", "trap '' TERM; echo up; sleep 60", "cancel-completing", "CANCELLED",
     "0:9", 0, "CA"),
]
LIMIT = "5:00"  # far above any scenario's run: it must never be what ends them


def _letter(c, job_id: int) -> str:
    out = cli(c, "rqueue", "-h", "-t", "all", "-o", "%t", "-j", str(job_id)).stdout.split()
    return out[0] if out else ""


def _elapsed(c, job_id: int) -> str:
    return cli(c, "rqueue", "-h", "-o", "%M", "-j", str(job_id)).stdout.strip()


def _show(c, job_id: int) -> dict[str, str]:
    line = cli(c, "rcontrol", "show", "job", "-o", str(job_id)).stdout
    out = {}
    for word in line.split():
        key, eq, value = word.partition("=")
        if eq:
            out.setdefault(key, value)
    return out


def _up(c, job_id: int) -> bool:
    out = c.dir / f"slurm-{job_id}.out"
    return out.exists() and "up" in out.read_text()


@pytest.mark.parametrize("limit", ["", LIMIT], ids=["no-limit", "limit"])
def test_end_states_match_slurm(tmp_path: Path, limit: str) -> None:
    with jobs_cluster(tmp_path, ["n1", "n2", "n3"], cpus=2) as c:
        start(c)
        opts = ["-t", limit] if limit else []
        ids: dict[str, int] = {}
        for name, script, how, *_ in SCENARIOS:
            hold = ["-H"] if how == "cancel-pending" else []
            ids[name] = submit(c, *opts, *hold, "-J", name, "--wrap", script)
        for name, _, how, *_ in SCENARIOS:
            j = ids[name]
            if how == "cancel-pending":
                assert job(c, j)["job_state"] == ["PENDING"]
                cli(c, "rcancel", str(j))
            elif how == "cancel-running":
                wait_for(lambda j=j: _up(c, j), what=f"{name} running")
                assert _letter(c, j) == "R"
                cli(c, "rcancel", str(j))
            elif how == "cancel-completing":
                wait_for(lambda j=j: _up(c, j), what=f"{name} running")
                cli(c, "rcancel", str(j))
                assert _letter(c, j) == "CG"
                # scancel is silent about a job already done (ESLURM_ALREADY_DONE) and exits 0
                # for SIGKILL, its default; -v says it (scancel.c, _cancel_job_id)
                again = cli(c, "rcancel", "-v", str(j), check=False)
                assert again.returncode == 0, again.stderr
                assert "already completing or completed" in again.stderr
        results = {}
        for name, *_ in SCENARIOS:
            c.wait_for(lambda j=ids[name]: job(c, j)["job_state"][0] not in (
                "PENDING", "RUNNING", "CONFIGURING", "COMPLETING"), timeout=30,
                what=f"{name} ended")
            shown = _show(c, ids[name])
            results[name] = (shown["JobState"], shown["ExitCode"], int(shown["Restarts"]),
                             _letter(c, ids[name]))
        expected = {name: (state, code, restarts, letter)
                    for name, _, _, state, code, restarts, letter in SCENARIOS}
        assert results == expected


def test_time_limit_ends_timeout_and_only_then(tmp_path: Path) -> None:
    """TIMEOUT is for a job its limit ended (SIGTERM, then SIGKILL after KillWait); a job with
    a limit that ends first keeps its own ending."""
    with jobs_cluster(tmp_path, ["n1", "n2"], cpus=2) as c:
        start(c)
        over = submit(c, "-t", "0:04", "--wrap", "sleep 60")
        quick = submit(c, "-t", "0:30", "--wrap", "exit 0")
        failing = submit(c, "-t", "0:30", "--wrap", "exit 4")
        # rqueue's TIME advances while nothing else happens (no job changes meanwhile)
        seen = {_elapsed(c, over)}
        c.wait_for(lambda: seen.add(_elapsed(c, over)) or {"0:01", "0:02"} <= seen,
                   timeout=10, what=f"TIME to count 0:01, 0:02 (saw {seen})")
        for j in (over, quick, failing):
            c.wait_for(lambda j=j: job(c, j)["job_state"][0] not in (
                "PENDING", "RUNNING", "COMPLETING"), timeout=30, what=f"job {j} ended")
        got = {j: (_show(c, j)["JobState"], _show(c, j)["ExitCode"], _letter(c, j))
               for j in (over, quick, failing)}
        assert got == {over: ("TIMEOUT", "0:15", "TO"), quick: ("COMPLETED", "0:0", "CD"),
                       failing: ("FAILED", "4:0", "F")}


@pytest.mark.parametrize("requeue", [True, False], ids=["requeue", "no-requeue"])
def test_node_lost_requeues_or_ends_node_fail(tmp_path: Path, requeue: bool) -> None:
    with jobs_cluster(tmp_path, ["n1", "n2"], timeout=3) as c:
        start(c)
        flag = "--requeue" if requeue else "--no-requeue"
        j = submit(c, flag, "-w", "n2", "-t", LIMIT, "--wrap",
                   "run=${SLURM_RESTART_COUNT:-0}; echo $$ > run.$run; echo up $run; sleep 60")
        wait_for(lambda: _up(c, j), what="job up on n2")
        proc = c.nodes["n2"]
        os.kill(proc.pid, signal.SIGKILL)  # the node daemon dies; n2 goes DOWN at SlurmdTimeout
        proc.wait()
        c.wait_for(lambda: c.state("n2").startswith("DOWN"), timeout=30, what="n2 DOWN")
        shown = _show(c, j)
        if requeue:  # back to PENDING for its next run, which waits for n2 (-w)
            assert (shown["JobState"], shown["Restarts"]) == ("PENDING", "1")
            assert _letter(c, j) == "PD"
        else:
            assert (shown["JobState"], shown["ExitCode"], shown["Restarts"]) == (
                "NODE_FAIL", "0:0", "0")
            assert _letter(c, j) == "NF"
        # The node comes back still running the old run (jobs outlive rnoded): that run is
        # killed, never taken for the job's end; with --requeue, run 1 then runs there.
        old = int((tmp_path / "run.0").read_text())
        start_node(c, "n2")
        wait_for(lambda: not _alive(old), timeout=30, what="the old run killed")
        if requeue:
            out = tmp_path / f"slurm-{j}.out"
            c.wait_for(lambda: "up 1" in out.read_text(), timeout=30, what="run 1 running")
            shown = _show(c, j)
            assert (shown["JobState"], shown["Restarts"]) == ("RUNNING", "1")
            assert out.read_text().count("up") == 2  # one line per run: nothing ran twice
        else:
            assert _show(c, j)["JobState"] == "NODE_FAIL"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _memory_cgroup_writable() -> bool:
    from ranch.noded import jobcgroup

    if os.geteuid() != 0:
        return False
    made = jobcgroup.create("ranch-probe", 64)
    if made is None:
        return False
    jobcgroup.remove(made[0])
    return True


@pytest.mark.parametrize("limit", ["", LIMIT], ids=["no-limit", "limit"])
def test_out_of_memory_where_a_cgroup_is_writable(tmp_path: Path, limit: str) -> None:
    """A job over its --mem is killed by its cgroup's OOM killer and ends OUT_OF_MEMORY, as
    Slurm 22.05's task/cgroup ends it (JobState, ExitCode 0:125, Reason, squeue's OOM)."""
    if not _memory_cgroup_writable():
        pytest.skip("needs root and a writable memory cgroup (v1 or v2) for the job's limit")
    with jobs_cluster(tmp_path, ["n1"], cpus=2) as c:
        start(c)
        opts = ["-t", limit] if limit else []
        j = submit(c, *opts, "--mem", "40M", "--wrap",
                   "python3 -c 'b = bytearray(400 * 2**20); print(len(b))'")
        c.wait_for(lambda: job(c, j)["job_state"][0] not in (
            "PENDING", "RUNNING", "CONFIGURING", "COMPLETING"), timeout=30, what="job ended")
        shown = _show(c, j)
        assert (shown["JobState"], shown["Reason"], shown["ExitCode"], _letter(c, j)) == (
            "OUT_OF_MEMORY", "OutOfMemory", "0:125", "OOM")
