"""InactiveLimit with a real rctld and rnoded: an allocation whose ralloc (salloc) was SIGKILLed
ends TIMEOUT, Reason InactiveLimit, ExitCode 0:0, and one whose rrun (srun outside a job) was
ends CANCELLED with its step, as slurmctld 22.05 ends them (tests/conformance/test_alloc.py);
one whose command runs longer than the limit under a live ralloc/rrun is kept by their
"alive" words."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from .cluster import Cluster, free_port
from .test_jobs_e2e import CONF, cli, start

LIMIT = 8  # seconds: InactiveLimit (above the orphan grace: MessageTimeout=3, so 5 s)


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    port = free_port()
    conf = CONF.format(port=port, nodes="n1,n2", cpus=2, timeout=10, gres="")
    cluster = Cluster(tmp_path_factory.mktemp("inactive"), ["n1", "n2"],
                      conf_text=conf + f"InactiveLimit={LIMIT}\n")
    cluster.port, cluster.addr = port, ("127.0.0.1", port)
    with cluster:
        start(cluster)
        yield cluster


def spawn(c: Cluster, module: str, *argv: str) -> subprocess.Popen:
    """The command in its own process group (so the test can end what it leaves running)."""
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
    return subprocess.Popen([sys.executable, "-m", module, *argv], cwd=c.dir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def show(c: Cluster, job_id: int) -> dict[str, str]:
    line = cli(c, "rcontrol", "show", "job", "-o", str(job_id)).stdout.strip()
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


def running_job(c: Cluster, known: set[int]) -> int:
    """The id of the running job not in `known`, once there is one."""
    found: list[int] = []

    def look() -> bool:
        running = cli(c, "rqueue", "-h", "-t", "R", "-o", "%i").stdout.split()
        found[:] = [int(w) for w in running if int(w) not in known]
        return len(found) == 1

    c.wait_for(look, 20, what="the allocation running")
    return found[0]


def ended(c: Cluster, job_id: int, timeout: float) -> dict[str, str]:
    done = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
    c.wait_for(lambda: show(c, job_id)["JobState"] in done, timeout, what=f"job {job_id} ended")
    return show(c, job_id)


def kill_group(p: subprocess.Popen) -> None:
    """Everything left of the command's session (ralloc's command has a group of its own)."""
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                session = int(f.read().rsplit(")", 1)[1].split()[3])
        except (OSError, ValueError, IndexError):
            continue
        if session == p.pid:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
    p.wait(10)


def test_a_killed_command_s_allocation_ends(c: Cluster) -> None:
    """ralloc's at the InactiveLimit (TIMEOUT); rrun's at once, with its step (CANCELLED), as
    slurmctld cancels a killed srun's job; --no-shell's, held by nobody, stays."""
    procs = {}
    try:
        done = c.run_cli("ranch.cli.ralloc", "--no-shell", "-N1")
        assert done.returncode == 0, done.stderr
        jobs = {"--no-shell": running_job(c, set())}
        for module in ("ranch.cli.ralloc", "ranch.cli.rrun"):
            before = set(jobs.values())
            procs[module] = spawn(c, module, "-N1", "sleep", "300")
            jobs[module] = running_job(c, before)
        # rrun is killed once its step runs (its allocation shows RUNNING before it asks for the
        # step: killed sooner, the allocation is one nobody claimed, ctld/jobs/inactive.py)
        step = f"{jobs['ranch.cli.rrun']}.0"
        c.wait_for(lambda: step in cli(c, "rqueue", "-h", "-s", "-o", "%i").stdout.split(), 20,
                   what="rrun's step running")
        for p in procs.values():
            p.send_signal(signal.SIGKILL)  # ralloc/rrun alone: ralloc's sleep goes on here
            p.wait(10)
        rrun = ended(c, jobs["ranch.cli.rrun"], LIMIT - 1)
        ralloc = ended(c, jobs["ranch.cli.ralloc"], LIMIT + 15)
        no_shell = show(c, jobs["--no-shell"])["JobState"]  # older than the limit, and silent
        cli(c, "rcancel", str(jobs["--no-shell"]))
    finally:
        for p in procs.values():
            kill_group(p)
    assert (ralloc["JobState"], ralloc["Reason"], ralloc["ExitCode"]) == (
        "TIMEOUT", "InactiveLimit", "0:0")
    assert (rrun["JobState"], rrun["Reason"], rrun["ExitCode"]) == ("CANCELLED", "None", "0:0")
    assert no_shell == "RUNNING"


def test_a_live_command_keeps_its_allocation_past_the_limit(c: Cluster) -> None:
    """ralloc's and rrun's "alive" words keep their allocations while their commands run."""
    procs, jobs = {}, {}
    try:
        for module in ("ranch.cli.ralloc", "ranch.cli.rrun"):
            procs[module] = spawn(c, module, "-N1", "sleep", str(LIMIT + 3))
            jobs[module] = running_job(c, set(jobs.values()))
        for module, p in procs.items():
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, f"{module}: {err}"
            rec = ended(c, jobs[module], 20)
            assert (rec["JobState"], rec["Reason"], rec["ExitCode"]) == (
                "COMPLETED", "None", "0:0"), module
    finally:
        for p in procs.values():
            kill_group(p)
