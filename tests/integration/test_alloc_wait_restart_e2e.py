"""ralloc and rrun waiting for resources across an rctld restart (issue 46): SIGTERM (systemctl
restart) or SIGKILL while they wait; both keep asking for their pending job until the
controller is back, are granted it afterwards, run their command and release it COMPLETED,
never "allocation unclaimed"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .cluster import Cluster, wait_for
from .test_jobs_e2e import cli, job_state, jobs_cluster, start, submit


@pytest.fixture
def c(tmp_path: Path):
    cluster = jobs_cluster(tmp_path, ["n1"])
    cluster.clients = []  # type: ignore[attr-defined]
    try:
        start(cluster)
        yield cluster
    finally:
        for p in cluster.clients:  # type: ignore[attr-defined]
            if p.poll() is None:  # a failed test's command: never left behind
                p.kill()
                p.communicate()
        cluster.stop()


def spawn(c: Cluster, name: str, module: str, *argv: str) -> subprocess.Popen:
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
    env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    with open(c.dir / f"{name}.err", "wb") as err:
        p = subprocess.Popen([sys.executable, "-m", module, *argv], cwd=c.dir, env=env,
                             stdout=subprocess.PIPE, stderr=err, text=True)
    c.clients.append(p)  # type: ignore[attr-defined]
    return p


def err(c: Cluster, name: str) -> str:
    return (c.dir / f"{name}.err").read_text(errors="replace")


def final_state(c: Cluster, jid: int) -> list[str]:
    out = cli(c, "racct", "-X", "-n", "-P", "-o", "State,ExitCode", "-j", str(jid)).stdout
    return out.strip().split("|")


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_waiting_allocations_outlive_a_controller_restart(c: Cluster, kill: bool) -> None:
    holder = submit(c, "-N1", "-o", "/dev/null", "--wrap", "sleep 300")
    c.wait_for(lambda: job_state(c, holder) == "RUNNING", 30, what="the node taken")
    ralloc = spawn(c, "ralloc", "ranch.cli.ralloc", "-N1", "sh", "-c",
                   "echo granted $SLURM_JOB_ID")
    rrun = spawn(c, "rrun", "ranch.cli.rrun", "-N1", "sh", "-c", "echo ran $SLURM_JOB_ID")
    for name in ("ralloc", "rrun"):
        wait_for(lambda n=name: "queued and waiting for resources" in err(c, n), 30,
                 what=f"{name} waiting")
    if kill:
        c.kill_ctld()
    else:
        assert c.stop_ctld() == 0
    for name in ("ralloc", "rrun"):
        wait_for(lambda n=name: "still waiting for job" in err(c, n), 30,
                 what=f"{name} noticing the controller away")
    assert ralloc.poll() is None and rrun.poll() is None
    c.start_ctld()
    cli(c, "rcancel", str(holder))
    out, _ = ralloc.communicate(timeout=60)
    assert ralloc.returncode == 0, err(c, "ralloc")
    [granted] = [int(w) for w in out.split() if w.isdigit()]
    assert out.split() == ["granted", str(granted)]
    assert f"Granted job allocation {granted}" in err(c, "ralloc")
    out, _ = rrun.communicate(timeout=60)
    assert rrun.returncode == 0, err(c, "rrun")
    ran = int(out.split()[-1])
    assert out.split() == ["ran", str(ran)] and ran != granted
    for jid in (granted, ran):
        c.wait_for(lambda j=jid: final_state(c, j) == ["COMPLETED", "0:0"], 30,
                   what=f"allocation {jid} COMPLETED by its holder")
    assert "allocation unclaimed" not in c.log("rctld")
