"""sacct 22.05's -A/--accounts and -q/--qos beside racct's (issue 43): the same tree made by
sacctmgr on a private Slurm with slurmdbd and MariaDB and by racctmgr on rctld, the same three
jobs (accounts physics and chem, QOS normal and high) run to the end on each, then sacct's lines
compared: -A in any case and as a list, -q by name in any case, with a `+` in front, as a list,
a name the QOS table does not hold (sacct's error, then fatal, exit 1), and `+`/plain mixed.

Needs slurmdbd and MariaDB (tests/conformance/slurmdbd.py); without them it skips and says why.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conformance.dbd_side import on_slurm_with_slurmdbd
from tests.conformance.slurm_cluster import SlurmCluster

ENFORCE = "AccountingStorageEnforce=associations,qos\n"
TREE = (
    "-i add qos high",
    "-i add account physics",
    "-i add account chem",
    "-i add user root account=physics,chem qos=normal,high",
)
JOBS = (("-A", "physics", "-q", "high", "-J", "ja"), ("-A", "chem", "-J", "jb"),
        ("-A", "physics", "-J", "jc"))
SHOW = "-a -X -n -P -o JobName,Account,QOS"
ASKS = (
    "-q high", "-q HIGH", "-q +high", "-q normal,high", "-q normal", "-A physics",
    "-A PHYSICS,chem", "-A chem -q high", "-A physics -q high", "-q nosuch",
    "-q high,-normal", "-A nosuch",
)
Run = Callable[..., tuple[int, str, str]]


def _scenario(run: Run) -> list[tuple[int, str, str]]:
    """TREE, JOBS to their end, then each of ASKS (code, stdout, stderr)."""
    for line in TREE:
        got = run("sacctmgr", *shlex.split(line))
        assert got[0] == 0, (line, got)
    for options in JOBS:
        deadline = time.monotonic() + 60
        # slurmctld learns of a new association from slurmdbd a moment after sacctmgr returns
        while (got := run("sbatch", *options, "-o", "/dev/null", "--wrap", "true"))[0]:
            assert time.monotonic() < deadline, (options, got)
            time.sleep(1)
    deadline = time.monotonic() + 120
    while (states := run("sacct", "-a", "-X", "-n", "-P", "-o", "State")[1].split()) != [
            "COMPLETED"] * len(JOBS):
        assert time.monotonic() < deadline, f"jobs not COMPLETED in 120 s: {states}"
        time.sleep(1)
    return [run("sacct", *shlex.split(f"{SHOW} {ask}")) for ask in ASKS]


@pytest.fixture(scope="module")
def slurm_side() -> list[tuple[int, str, str]]:
    def on(slurm: SlurmCluster) -> list[tuple[int, str, str]]:
        def run(command: str, *args: str) -> tuple[int, str, str]:
            p = slurm.run(command, *args, timeout=60)
            return p.returncode, p.stdout, p.stderr

        return _scenario(run)

    return on_slurm_with_slurmdbd(ENFORCE, on, timeout=90)


def test_racct_filters_match_sacct(slurm_side, tmp_path: Path) -> None:
    from tests.integration.cluster import Cluster

    with Cluster(tmp_path / "c", ("n1",), extra="AccountingStorageType=accounting_storage/"
                 "slurmdbd\n" + ENFORCE) as c:
        c.start()
        env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
        code = "import sys; from ranch.cli.slurm_names import main; sys.exit(main())"

        def run(command: str, *args: str) -> tuple[int, str, str]:
            p = subprocess.run([sys.executable, "-c", code, command, *args], env=env,
                               cwd=tmp_path, capture_output=True, text=True, timeout=60)
            return p.returncode, p.stdout, p.stderr

        ranch_side = _scenario(run)
    for ask, want, got in zip(ASKS, slurm_side, ranch_side, strict=True):
        assert got == want, f"sacct {SHOW} {ask}\n{got}\n---- Slurm's:\n{want}"
