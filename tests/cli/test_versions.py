"""`--version` on every program says `ranch X.Y.Z` from the package metadata; rctld finds its
config without -f through RANCH_CONF (as slurmctld through SLURM_CONF)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULES = ["ranch.ctld", "ranch.noded", "ranch.healthcheck", "ranch.cli.shims",
           "ranch.cli.rinfo", "ranch.cli.rcontrol", "ranch.cli.rqueue", "ranch.cli.rbatch",
           "ranch.cli.rcancel", "ranch.cli.racct", "ranch.cli.rrun", "ranch.cli.ralloc"]


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("module", MODULES)
def test_version(module: str) -> None:
    done = run(module, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ranch {version('ranch')}"), done.stdout


def test_rcontrol_help_both_ways() -> None:
    by_flag, by_word = run("ranch.cli.rcontrol", "-h"), run("ranch.cli.rcontrol", "help")
    assert by_flag.returncode == by_word.returncode == 0
    assert by_flag.stdout == by_word.stdout and by_flag.stdout.startswith("usage: rcontrol")


def test_rctld_reads_ranch_conf(tmp_path: Path) -> None:
    conf = tmp_path / "cluster.conf"
    conf.write_text("ClusterName=c\nSlurmctldHost=h\nNodeName=n1 CPUs=1\n"
                    "PartitionName=p Nodes=n1 Default=YES\n")
    assert run("ranch.ctld", "--check", env={"RANCH_CONF": str(conf)}).returncode == 0
    done = run("ranch.ctld", env={"RANCH_CONF": str(tmp_path / "none.conf")})
    assert done.returncode == 1
    assert f"{tmp_path / 'none.conf'} is the config $RANCH_CONF names" in done.stderr
