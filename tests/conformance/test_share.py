"""sshare 22.05 beside rshare (issue 43): the same association tree made by sacctmgr on a private
Slurm with slurmdbd and MariaDB (PriorityType=priority/multifactor, which sshare's figures need,
and PriorityDecayHalfLife=0, which Slurm takes only with a
PriorityUsageResetPeriod) and by racctmgr on rctld, then sshare's and rshare's lines compared
with -a, -l, -P, -p, -n, -U, -u, -A and -o. No job has run on either side, so every figure is
deterministic (usage 0: EffectvUsage 0, LevelFS inf, FairShare by rank).

Needs slurmdbd and MariaDB (tests/conformance/slurmdbd.py); without them it skips and says why.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conformance.dbd_side import on_slurm_with_slurmdbd
from tests.conformance.slurm_cluster import SlurmCluster

PRIORITY = ("PriorityType=priority/multifactor\nPriorityDecayHalfLife=0\n"
            "PriorityUsageResetPeriod=MONTHLY\nPriorityCalcPeriod=1\n")
TREE = (
    "-i add account physics Fairshare=2",
    "-i add account theory parent=physics Fairshare=3",
    "-i add account chem",
    "-i add user alice account=physics,theory",
    "-i add user bob account=chem,physics Fairshare=4",
    "-i add user root account=chem",
)
RUN_ZERO = "cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0"
ASKS = (
    "-a -l -P", "-a -P", "-a -p", "-P", "-a", "-a -l", "-a -n -P", "-a -P -U", "-P -u alice",
    "-a -P -A physics", "-a -P -o account,user,rawshares,normshares,levelfs,fairshare",
    "-a -o Account%12,User%-8,FairShare",
)


@pytest.fixture(scope="module")
def slurm_side() -> list[tuple[int, str, str]]:
    return on_slurm_with_slurmdbd(PRIORITY, _shares_on_slurm, timeout=90)


def _shares_on_slurm(slurm: SlurmCluster) -> list[tuple[int, str, str]]:
    for line in TREE:
        p = subprocess.run(slurm.argv("sacctmgr", *shlex.split(line)), env=slurm.env(),
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, (line, p.stdout, p.stderr)
    # slurmctld computes a new association's LevelFS and FairShare at its next calc period
    # (0 until then): wait for it (PriorityCalcPeriod=1: within a minute)
    deadline = time.monotonic() + 120
    while "physics|alice|" not in (got := _run(slurm.argv("sshare", "-a", "-P", "-l"),
                                               slurm.env())[1]) or any(
            line.endswith("|0.000000||" + RUN_ZERO) for line in got.splitlines()):
        assert time.monotonic() < deadline, f"no calc period in 120 s:\n{got}"
        time.sleep(2)
    return [_run(slurm.argv("sshare", *shlex.split(a)), slurm.env()) for a in ASKS]


def _run(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def test_rshare_matches_sshare(slurm_side, tmp_path: Path) -> None:
    from tests.integration.cluster import Cluster

    with Cluster(tmp_path / "c", ("n1",), extra="AccountingStorageType=accounting_storage/"
                 "slurmdbd\n" + PRIORITY) as c:
        c.start_ctld()
        env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
        for line in TREE:
            p = subprocess.run([sys.executable, "-m", "ranch.cli.racctmgr", *shlex.split(line)],
                               env=env, capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, (line, p.stdout, p.stderr)
        code = "import sys; from ranch.cli.slurm_names import main; sys.exit(main())"
        for ask, want in zip(ASKS, slurm_side, strict=True):
            got = _run([sys.executable, "-c", code, "sshare", *shlex.split(ask)], env)
            assert got == want, f"sshare {ask}\n{got[1]}\n---- Slurm's:\n{want[1]}"
