"""snakemake's Slurm executor (snakemake-executor-plugin-slurm), run unchanged against a real
test cluster through Slurm's names (`ranch-slurm-shims`), with the accounting store on
(issue 43): a 2-rule workflow whose rules name their account; the plugin checks it with
`sacctmgr -n -s list user $USER format=account%256` (racctmgr) before each submission, submits
with sbatch -A, follows its jobs with sacct and runs each rule's command as a step (srun). A
workflow naming an account the tree does not give the user is refused by the plugin before
anything is submitted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .cluster import REPO, Cluster, free_port

pytest.importorskip("snakemake_executor_plugin_slurm")

CONF = """\
ClusterName=snake
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=10
MessageTimeout=3
KillWait=1
MinJobAge=600
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageEnforce=associations
NodeName=n[1-2] CPUs=2 RealMemory=2000
PartitionName=main Nodes=n[1-2] Default=YES
"""
SNAKEFILE = """\
rule all:
    input: "b.txt"

rule a:
    output: "a.txt"
    resources: slurm_account="{account}", runtime=5
    shell: "echo hello > {{output}}"

rule b:
    input: "a.txt"
    output: "b.txt"
    resources: slurm_account="{account}", runtime=5
    shell: "tr a-z A-Z < {{input}} > {{output}}"
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A cluster whose tree gives the caller account `proj`, and the environment a user has
    after `export PATH=SHIMS:$PATH`."""
    work = tmp_path_factory.mktemp("snake")
    port = free_port()
    cluster = Cluster(work, ["n1", "n2"], conf_text=CONF.format(port=port))
    cluster.port, cluster.addr = port, ("127.0.0.1", port)
    bindir = work / "shims"
    subprocess.run([sys.executable, "-m", "ranch.cli.shims", str(bindir)], cwd=REPO, check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
           "RANCH_SERVER": f"127.0.0.1:{port}", "RANCH_KEY_FILE": cluster.key_file}
    env.pop("PYTHONPATH", None)
    with cluster:
        cluster.start_ctld()
        for name in cluster.node_names:
            argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{port}", "--name", name,
                    "--spool-dir", str(work / "spool" / name)]
            cluster.nodes[name] = cluster._spawn(name, argv)
        cluster.wait_for(lambda: all(cluster.state(n) == "IDLE" for n in ("n1", "n2")), 30,
                         what="nodes IDLE")
        me = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        for line in ("-i add account proj", "-i add account other",
                     f"-i add user {me} account=proj"):
            done = subprocess.run(["sacctmgr", *line.split()], env=env, capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 0, (line, done.stdout, done.stderr)
        yield cluster, env, work


def snakemake(slurm, folder: str, account: str) -> subprocess.CompletedProcess:
    _, env, work = slurm
    where = work / folder
    where.mkdir()
    (where / "Snakefile").write_text(SNAKEFILE.format(account=account))
    return subprocess.run([sys.executable, "-m", "snakemake", "--executor", "slurm", "--jobs",
                           "2", "--latency-wait", "10",
                           # its first look after 1 s, not 40 (an option a user may give)
                           "--slurm-init-seconds-before-status-checks", "1",
                           "--seconds-between-status-checks", "1",
                           "--default-resources", "slurm_partition=main", "mem_mb=100"],
                          cwd=where, env=env, capture_output=True, text=True, timeout=300)


def test_a_two_rule_workflow_runs_under_its_account(slurm) -> None:
    _, env, work = slurm
    done = snakemake(slurm, "good", "proj")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "good" / "b.txt").read_text() == "HELLO\n"
    # the plugin's own jobs, as sacct lists them: each ran under the account it checked
    acct = subprocess.run(["sacct", "-a", "-X", "--json"], env=env, capture_output=True,
                          text=True, timeout=60)
    jobs = json.loads(acct.stdout)["jobs"]
    assert len(jobs) == 2
    assert {j["account"] for j in jobs} == {"proj"}
    assert [j["state"]["current"] for j in jobs] == [["COMPLETED"], ["COMPLETED"]]
    assert sorted(j["comment"]["job"] for j in jobs) == ["rule_a", "rule_b"]


def test_an_account_the_tree_does_not_give_the_user_is_refused(slurm) -> None:
    done = snakemake(slurm, "bad", "other")
    assert done.returncode != 0
    assert "The given account other appears to be invalid" in done.stdout + done.stderr
    assert "proj" in done.stdout + done.stderr  # the accounts it found, through racctmgr
    assert not (Path(slurm[2]) / "bad" / "a.txt").exists()
