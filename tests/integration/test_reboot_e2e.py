"""Reboot until healthy, with real daemons (issue 33): rnoded runs RebootProgram and stops
(shutdown_on_reboot); the lab starts it again with -b, a new boot time; its health check runs
before it registers, and only a passing check on the new boot puts the node back in service.
A reboot asked for on a busy node waits for its job."""

from __future__ import annotations

from pathlib import Path

import pytest

from ranch.protocol import messages as m
from tests.conformance.reboot_lab import RebootLab
from tests.integration.cluster import REPO, Cluster

NODES = ("n1", "n2")


def conf(port: int, lab: RebootLab) -> str:
    return f"""\
ClusterName=reboot
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=30
ReturnToService=1
HealthCheckProgram={REPO / "examples" / "healthcheck.sh"}
HealthCheckInterval=0
RebootUnhealthyMax=2
{lab.conf(resume_timeout=60)}NodeName=n[1-2] CPUs=1 RealMemory=64
PartitionName=main Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
"""


@pytest.fixture
def lab_cluster(tmp_path: Path):
    # over a second: rctld takes a boot time as new only past its 1 s jitter allowance
    lab = RebootLab(tmp_path / "lab", NODES, delay=1.5)
    verdicts = tmp_path / "verdicts"
    verdicts.mkdir()
    c = Cluster(tmp_path / "c", NODES, conf_text="")
    c.conf_path.write_text(conf(c.port, lab))

    def start_node(name: str) -> None:
        env = lab.env(name) | {"RANCH_HC_VERDICT_FILE": str(verdicts)}
        argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{c.port}", "--name", name,
                "--spool-dir", str(c.dir / "spool" / name), "-b"]
        c.nodes[name] = c._spawn(name, argv, env)

    try:
        c.start_ctld()
        for n in NODES:
            start_node(n)
        c.wait_for(lambda: all(c.state(n) == "IDLE" for n in NODES), 30, what="nodes IDLE")
        lab.supervise(lambda n: c.nodes[n].poll() is not None, start_node)
        yield c, lab, verdicts
    finally:
        lab.stop()
        c.stop()


def reason(c: Cluster, name: str) -> str | None:
    r = c.snapshot()[name]["state"]["reason"]
    return r["text"] if r else None


def rcontrol(c: Cluster, *argv: str) -> None:
    r = c.run_cli("ranch.cli.rcontrol", *argv)
    assert r.returncode == 0, r.stderr


def test_reboots_wait_for_the_job_and_end_in_service_only_when_healthy(lab_cluster) -> None:
    c, lab, verdicts = lab_cluster
    # a reboot asked for on a busy node waits for its job, which ends as it would have
    r = c.run_cli("ranch.cli.rbatch", "-w", "n1", "-o", "/dev/null", "--wrap", "sleep 3")
    assert r.returncode == 0, r.stderr
    job = int(r.stdout.split()[-1])
    c.wait_for(lambda: c.state("n1") == "ALLOCATED", 30, what="n1 busy")
    rcontrol(c, "reboot", "ASAP", "nextstate=RESUME", "reason=new driver", "n1")
    assert c.state("n1") == "ALLOCATED+DRAIN+REBOOT_REQUESTED"
    assert lab.reboots["n1"] == 0
    c.wait_for(lambda: lab.reboots["n1"] == 1, 60, what="n1's RebootProgram")
    # the program inherits rnoded's environment as rnoded was started, not the heap's choice
    # (ranch/protocol/heap.py): rnoded re-executed itself with PYTHONMALLOC and GLIBC_TUNABLES
    inherited = (lab.dir / "n1.env").read_text()
    assert "REBOOT_LAB_NODE=n1" in inherited
    assert not {"PYTHONMALLOC", "GLIBC_TUNABLES", "RANCH_HEAP"} & {
        line.partition("=")[0] for line in inherited.splitlines()}
    jobs = {j["job_id"]: j for j in c.request(m.GetJobs(), timeout=10).jobs}
    assert jobs[job]["state"] == "COMPLETED"
    # back on a new boot, its check passed: in service, the reboot's drain gone
    c.wait_for(lambda: c.state("n1") == "IDLE", 60, what="n1 back in service")
    assert reason(c, "n1") is None
    boots = c.snapshot()["n1"]["boot_time"]

    # n2's check fails from now on: two reboots that end unhealthy leave it FAIL
    (verdicts / "n2").write_text("drain nvidia-smi failed\n")
    rcontrol(c, "reboot", "ASAP", "n2")
    c.wait_for(lambda: c.state("n2") == "IDLE+DRAIN" and lab.reboots["n2"] == 1, 60,
               what="n2 back, drained by its check")
    assert reason(c, "n2") == "HC: nvidia-smi failed (unhealthy after reboot 1 of 2)"
    rcontrol(c, "reboot", "ASAP", "n2")
    c.wait_for(lambda: c.state("n2") == "IDLE+FAIL", 60, what="n2 FAIL")
    assert reason(c, "n2") == "HC: nvidia-smi failed (unhealthy after 2 reboots in a row)"
    assert lab.reboots == {"n1": 1, "n2": 2}
    assert c.snapshot()["n1"]["boot_time"] == boots  # n1 was left alone
    events = c.run_cli("ranch.cli.rcontrol", "events", "-n", "n2")
    assert events.returncode == 0 and "REBOOT_ISSUED" in events.stdout, events.stderr

