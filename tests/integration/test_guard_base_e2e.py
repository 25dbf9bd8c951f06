"""The DrainGuard's base is the nodes in service, with real daemons (issue 33): n[1-3] in service
and f[1-3] FUTURE, two failing health checks out of three both drain (DrainGuardMinNodes=4
keeps the guard out of a cluster of three)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.cluster import REPO, Cluster


def test_two_failing_checks_of_three_nodes_in_service_both_drain(tmp_path: Path) -> None:
    verdicts = tmp_path / "verdicts"
    verdicts.mkdir()
    c = Cluster(tmp_path / "c", ("n1", "n2", "n3"), conf_text="")
    c.conf_path.write_text(f"""\
ClusterName=guards
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={c.port}
HeartbeatInterval=1
SlurmdTimeout=30
HealthCheckProgram={REPO / "examples" / "healthcheck.sh"}
HealthCheckInterval=1
NodeName=n[1-3] CPUs=1 RealMemory=64
NodeName=f[1-3] CPUs=1 RealMemory=64 State=FUTURE
PartitionName=main Nodes=n[1-3],f[1-3] Default=YES State=UP
""")
    env = {"RANCH_HC_VERDICT_FILE": str(verdicts)}
    with c:
        c.start_ctld()
        for n in c.node_names:
            c.start_node(n, env=env)
        c.wait_for(lambda: all(c.state(n) == "IDLE" for n in c.node_names), 30,
                   what="n[1-3] IDLE")
        (verdicts / "n1").write_text("drain bad rollout\n")
        (verdicts / "n2").write_text("fail gpu gone\n")
        c.wait_for(lambda: (c.state("n1"), c.state("n2")) == ("IDLE+DRAIN", "IDLE+FAIL"), 30,
                   what="n1 and n2 out of service")
        assert c.state("n3") == "IDLE"
        shown = c.run_cli("ranch.cli.rcontrol", "show", "guards", "-o")
        assert shown.returncode == 0, shown.stderr
        drain = next(line for line in shown.stdout.splitlines() if "DrainGuard" in line)
        assert "State=ARMED" in drain, drain
