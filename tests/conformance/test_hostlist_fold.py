"""Node lists folded as Slurm 22.05 folds them. Two ways: `scontrol show hostlistsorted` and
`scontrol show hostlist` (which need no daemon, only a slurm.conf) beside ranch.conf.hostlist's
fold over a few hundred random name sets, and rcontrol's own `show hostlist[sorted]`; then a
pair of clusters whose nodes are zero-padded (n001-n003), where a two-node job's NodeList reads
the same in squeue, sinfo and scontrol show job on both."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ranch.conf.hostlist import expand, fold
from tests.conformance.conftest import start_slurm
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import _find, slurm_missing

REPO = Path(__file__).resolve().parents[2]
PADDED = type(SHAPE)(nodes=("n001", "n002", "n003"), cpus=SHAPE.cpus)
PIECES = ["n", "n", "gpu", "rack9-n", "rack10-n", "rack010-n", "a.b", "x", "c-ib"]


def _number(rng: random.Random) -> str:
    value = rng.choice([rng.randint(0, 12), rng.randint(0, 120), rng.randint(95, 1005)])
    return rng.choice([str(value), str(value).zfill(2), str(value).zfill(3)])


def _name(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.08:
        return rng.choice(["login", "alpha", "n", "a"])
    if roll < 0.85:
        return rng.choice(PIECES) + _number(rng)
    if roll < 0.95:
        return rng.choice(PIECES) + _number(rng) + rng.choice(["-ib", "a"])
    return _number(rng)  # a name that is all digits


def name_sets(count: int, seed: int = 22058) -> list[list[str]]:
    rng = random.Random(seed)
    return [list(dict.fromkeys(_name(rng) for _ in range(rng.randint(1, 20))))
            for _ in range(count)]


@pytest.fixture(scope="module")
def scontrol(tmp_path_factory) -> list[str]:
    if slurm_missing() or not _find("scontrol"):
        pytest.skip(f"needs Slurm's scontrol: {slurm_missing()}")
    conf = tmp_path_factory.mktemp("hostlist") / "slurm.conf"
    conf.write_text("ClusterName=h\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\n"
                    "PartitionName=p Nodes=n1\n")
    return [_find("scontrol") or "scontrol", str(conf)]


def _slurm_fold(scontrol: list[str], how: str, names: list[str]) -> str:
    binary, conf = scontrol
    done = subprocess.run([binary, "show", how, ",".join(names)], capture_output=True, text=True,
                          env={"SLURM_CONF": conf, "PATH": "/usr/bin:/bin"}, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_fold_writes_what_scontrol_writes(scontrol: list[str]) -> None:
    wrong = []
    for names in name_sets(250):
        for how, sort in (("hostlistsorted", True), ("hostlist", False)):
            slurm, ours = _slurm_fold(scontrol, how, names), fold(names, sort=sort)
            if ours != slurm:
                wrong.append(f"{how} {','.join(names)}: slurm {slurm}, ranch {ours}")
            assert sorted(expand(ours)) == sorted(names)
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.parametrize("names", [["n001", "n002"], ["n1", "n2"], ["n9", "n10"],
                                   ["n8", "n09", "n10"], ["gpu02", "gpu01", "cpu1"]])
def test_rcontrol_show_hostlist_as_scontrol(scontrol: list[str], names: list[str]) -> None:
    for how in ("hostlist", "hostlistsorted"):
        done = subprocess.run([sys.executable, "-m", "ranch.cli.rcontrol", "show", how,
                               ",".join(names)], cwd=REPO, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == _slurm_fold(scontrol, how, names)


def _job_views(system, jid: int) -> dict[str, str]:
    def out(command: str, *args: str) -> str:
        done = system.run(command, *args)
        assert done.returncode == 0, (system.name, command, args, done.stderr)
        return done.stdout

    show = out("scontrol", "show", "job", str(jid))
    return {
        "squeue %N": out("squeue", "-h", "-j", str(jid), "-o", "%N"),
        "squeue": re.sub(r"\b\d+:\d\d\b", "<t>", out("squeue", "-j", str(jid))).replace(
            str(jid), "<jobid>"),
        "sinfo": out("sinfo"),
        "sinfo -N": out("sinfo", "-N", "-h", "-o", "%N %t"),
        "sinfo %N by state": out("sinfo", "-h", "-o", "%t %N"),
        "scontrol NodeList": " ".join(re.findall(r"\b(?:Req|Exc)?NodeList=\S*", show)),
        "scontrol BatchHost": re.search(r"BatchHost=\S*", show).group(),
    }


def test_zero_padded_node_lists_read_as_slurms() -> None:
    slurm = start_slurm(PADDED)
    try:
        with RanchCluster(PADDED) as ranch:
            views = {}
            for system in (slurm, ranch):
                done = system.run("sbatch", "-N2", "-w", "n001,n002", "-o", "/dev/null",
                                  "--wrap", "sleep 120")
                assert done.returncode == 0, (system.name, done.stderr)
                jid = int(done.stdout.split()[-1])
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and system.run(
                        "squeue", "-h", "-j", str(jid), "-o", "%t").stdout.strip() != "R":
                    time.sleep(0.2)
                views[system.name] = _job_views(system, jid)
                system.run("scancel", str(jid))
            assert views["slurm"]["squeue %N"] == "n[001-002]\n"  # the oracle, as expected
            assert views["ranch"] == views["slurm"]
    finally:
        slurm.stop()
