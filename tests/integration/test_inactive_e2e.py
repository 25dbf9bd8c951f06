"""InactiveLimit with a real rctld and rnoded: an allocation whose ralloc (salloc) or rrun
(srun outside a job) was SIGKILLed ends TIMEOUT, Reason InactiveLimit, ExitCode 0:0 (as
slurmctld 22.05 ends salloc's, measured: tests/conformance/README.md), while one whose command
runs longer than the limit under a live ralloc/rrun is kept by their "alive" words."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from .cluster import Cluster, free_port
from .test_jobs_e2e import CONF, cli, start

LIMIT = 2  # seconds: InactiveLimit


@pytest.fixture(scope="module")
def c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    port = free_port()
    conf = CONF.format(port=port, nodes="n1,n2", cpus=1, timeout=10, gres="")
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


def running_job(c: Cluster) -> int:
    """The one running job's id, once there is one."""
    found: list[int] = []

    def look() -> bool:
        found[:] = [int(w) for w in cli(c, "rqueue", "-h", "-t", "R", "-o", "%i").stdout.split()]
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


@pytest.mark.parametrize("module", ["cli.ralloc", "cli.rrun"])
def test_a_killed_command_s_allocation_ends_at_the_inactive_limit(c: Cluster,
                                                                   module: str) -> None:
    p = spawn(c, module, "-N1", "sleep", "300")
    try:
        job = running_job(c)
        p.send_signal(signal.SIGKILL)  # ralloc/rrun alone: its sleep goes on without it
        p.wait(10)
        rec = ended(c, job, LIMIT + 15)
    finally:
        kill_group(p)
    assert (rec["JobState"], rec["Reason"], rec["ExitCode"]) == ("TIMEOUT", "InactiveLimit",
                                                                 "0:0")


@pytest.mark.parametrize("module", ["cli.ralloc", "cli.rrun"])
def test_a_live_command_keeps_its_allocation_past_the_limit(c: Cluster, module: str) -> None:
    p = spawn(c, module, "-N1", "sleep", str(LIMIT + 3))
    try:
        job = running_job(c)
        _, err = p.communicate(timeout=60)
        rec = ended(c, job, 20)
    finally:
        kill_group(p)
    assert p.returncode == 0, err
    assert (rec["JobState"], rec["Reason"], rec["ExitCode"]) == ("COMPLETED", "None", "0:0")
