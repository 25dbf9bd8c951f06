"""AccountingStorageEnforce=associations,limits,qos at submission, Slurm 22.05 with slurmdbd
beside Ranch's rctld with its own tree: the same sacctmgr lines build both trees, then each
refused sbatch (an account without association, a QOS unknown or not allowed, MaxSubmitJobs
reached, --test-only) gives the same stderr and exit code; an accepted one keeps the account and
the QOS filled in. Needs slurmdbd and MariaDB besides Slurm; skips and says why without them."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.conformance.dbd_side import on_slurm_with_slurmdbd
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import SlurmCluster

ENFORCE = "AccountingStorageEnforce=associations,limits,qos\n"
TREE = (
    ("-i", "add", "qos", "low"),
    ("-i", "add", "account", "physics", "Description=phys", "Organization=sci"),
    ("-i", "add", "user", "root", "Account=physics"),
    ("-i", "modify", "user", "root", "where", "account=physics", "set", "MaxSubmitJobs=1"),
)
# (sbatch's options, whether it is accepted)
CASES = (
    (("-A", "nosuch"), False),
    (("-q", "nosuch"), False),
    (("-q", "low"), False),
    (("--test-only", "-A", "nosuch"), False),
    (("-A", "physics", "-H"), True),
    (("-A", "physics", "-H"), False),  # MaxSubmitJobs=1: the held one counts
    (("-H",), True),  # root's DefaultAccount (root), MaxSubmitJobs unset there
)


def _sbatch(system, options: tuple[str, ...]) -> subprocess.CompletedProcess:
    return _run(system, "sbatch", (*options, "-o", "/dev/null", "--wrap", "true"))


def _run(system, command: str, args: tuple[str, ...]) -> subprocess.CompletedProcess:
    """Slurm's command, or Ranch's under Slurm's name (its shim)."""
    argv = ([str(system.bin / command), *args] if isinstance(system, RanchCluster)
            else system.argv(command, *args))
    return subprocess.run(argv, cwd=system.workdir, env=system.env(), capture_output=True,
                          text=True, timeout=60)


def _seen_by_slurmctld(slurm: SlurmCluster) -> bool:
    """slurmdbd pushes the tree to slurmctld after the commit: wait until it holds the limit."""
    out = slurm.run("scontrol", "show", "assoc_mgr", "users=root", "accounts=physics",
                    "flags=assoc").stdout
    return "MaxSubmitJobs=1" in out


def outcomes(system) -> list[tuple[int, str, str]]:
    for words in TREE:
        done = _run(system, "sacctmgr", words)
        assert done.returncode == 0, (words, done.stdout, done.stderr)
    if isinstance(system, SlurmCluster):
        deadline = time.monotonic() + 30
        while not _seen_by_slurmctld(system):
            assert time.monotonic() < deadline, "slurmctld never saw the tree"
            time.sleep(0.2)
    out = []
    for options, _ in CASES:
        done = _sbatch(system, options)
        out.append((done.returncode, done.stderr, "job" if done.stdout.startswith(
            "Submitted batch job") else done.stdout))
    jobs = _run(system, "squeue", ("-h", "-t", "all", "-o", "%a|%q")).stdout.split()
    out.append((0, "", " ".join(sorted(jobs))))
    return out


@pytest.fixture(scope="module")
def slurm_side() -> list[tuple[int, str, str]]:
    return on_slurm_with_slurmdbd(ENFORCE, outcomes)


def test_submissions_are_refused_and_filled_in_as_slurmctld_does(slurm_side) -> None:
    with RanchCluster(SHAPE, extra_conf="AccountingStorageType=accounting_storage/slurmdbd\n"
                      + ENFORCE) as ranch:
        ranch_side = outcomes(ranch)
    cases = [*(" ".join(o) for o, _ in CASES), "squeue"]
    for case, want, got in zip(cases, slurm_side, ranch_side, strict=True):
        assert got == want, case
    accepted = [ok for _, ok in CASES]
    assert [rc == 0 for rc, _, _ in slurm_side[:-1]] == accepted
