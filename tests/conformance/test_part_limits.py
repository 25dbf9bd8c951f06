"""Partition limits and partition lists against real Slurm 22.05 (issue 48): under each
EnforcePartLimits (NO, the default; ALL; ANY) jobs over a partition's MaxTime, node count or
CPUs, and `-p debug,main` lists (also from SBATCH_PARTITION), submitted to a private Slurm and
to Ranch of the same shape. Compared: whether sbatch takes each job (its refusal's words), and
where and why an accepted one runs or waits."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from tests.conformance.conftest import start_slurm
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.reboot_lab import wait
from tests.conformance.shape import SHAPE

# a second partition of one node (2 CPUs) with a 5-minute MaxTime
PARTS = "PartitionName=debug Nodes=c1 MaxTime=5 State=UP\n"
CASES = (
    ("-p", "debug,main", "-t", "10"),  # over debug's MaxTime, not main's
    ("-p", "debug", "-t", "10"),  # over MaxTime
    ("-p", "debug", "-N", "2"),  # more nodes than the partition has
    ("-p", "debug", "-c", "4"),  # more CPUs than its nodes hold
    ("-p", "main", "-N", "3"),
    ("-p", "main", "-c", "3"),  # more CPUs than any one node: never placeable
    ("-p", "main", "-n", "5"),  # more tasks than the partition's CPUs: as many nodes as they need
    ("-p", "main,debug", "-N", "2"),  # only main has two nodes
    ("-p", "debug,main", "-c", "3"),
    ("-p", "debug,main"),  # both could: the first that can start it
    ("-p", "debug,main", "--begin=now+3600"),  # waiting: squeue shows the list
    ("SBATCH_PARTITION=debug,main", "-t", "10"),
)


def _refusal(stderr: str) -> str:
    """sbatch's last line, its cause without Ranch's added detail (after a colon)."""
    lines = stderr.strip().splitlines()
    if not lines:
        return ""
    return re.sub(r"^.*failed: ", "", lines[-1]).split(":")[0]


def _submit(cluster, case: tuple[str, ...]) -> tuple:
    env = dict(w.split("=", 1) for w in case if w.startswith("SBATCH_"))
    argv = [w for w in case if not w.startswith("SBATCH_")]
    r = subprocess.run(cluster.argv("sbatch", "--parsable", "-o", "/dev/null", *argv, "--wrap",
                                    "sleep 60"),
                       cwd=cluster.workdir, env={**cluster.env(), **env}, capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        return ("refused", r.returncode, _refusal(r.stderr))
    jid = r.stdout.strip().split(";")[0]

    def settled() -> str | None:  # running, or waiting with the pass's reason
        out = cluster.run("squeue", "-h", "-j", jid, "-o", "%P|%t|%r").stdout.strip()
        return out if "|R|" in out or (out and not out.endswith("|None")) else None

    got = str(wait(settled, 30, f"job {jid} placed or waiting on {cluster.name}"))
    if "|PD|" in got:  # slurmctld's submission says one reason, its next pass the lasting one
        time.sleep(2.5)
        got = settled() or got
    # the order of a waiting job's partitions: see docs/slurm-compat.md
    where, _, rest = got.partition("|")
    got = ",".join(sorted(where.split(","))) + "|" + rest
    cluster.run("scancel", jid)
    wait(lambda: not cluster.run("squeue", "-h", "-j", jid).stdout.strip(), 30,
         f"job {jid} gone on {cluster.name}")
    return ("accepted", got)


def _session(enforce: str) -> dict[str, list]:
    extra = (f"EnforcePartLimits={enforce}\n" if enforce else "") + PARTS
    out: dict[str, list] = {}
    slurm = start_slurm(SHAPE, extra_conf=extra)
    try:
        out["slurm"] = [_submit(slurm, c) for c in CASES]
    finally:
        slurm.stop()
    with RanchCluster(SHAPE, extra_conf=extra) as ranch:
        out["ranch"] = [_submit(ranch, c) for c in CASES]
    return out


@pytest.mark.parametrize("enforce", ["", "ALL", "ANY"])
def test_partition_limits_and_lists_match_slurm(enforce: str) -> None:
    began = time.monotonic()
    got = _session(enforce)
    wrong = [f"sbatch {' '.join(case)}:\n  Slurm {want}\n  Ranch {have}"
             for case, want, have in zip(CASES, got["slurm"], got["ranch"], strict=True)
             if want != have]
    assert not wrong, f"EnforcePartLimits={enforce or '(default)'} " \
                      f"({time.monotonic() - began:.0f} s):\n" + "\n".join(wrong)
