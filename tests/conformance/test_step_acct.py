"""sacct's step lines, Slurm 22.05 over its own slurmdbd beside racct: one 2-node batch job whose
script runs three steps (`srun -n1 true`, `srun -N2 -n2 sh -c 'exit 3'`, `srun -n1 -J named
sleep 1`) and exits 0. Compared: `sacct -j N -P` (the job line, `N.batch`, `N.0`-`N.2`: names,
states, exit codes, DerivedExitCode, nodes, tasks, CPUs, and what steps leave empty),
`-j N.1` and `-j N.batch` (those lines alone), `-X` and the fixed-width table. Not compared:
Account (slurmdbd gives root's association's account, `root`; Ranch has no associations).

Needs slurmdbd and MariaDB besides Slurm (tests/conformance/slurmdbd.py starts private ones in
about 5 s); without them it skips and says why (`apt-get install slurmdbd mariadb-server`).
"""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_missing
from tests.conformance.slurmdbd import accounting_missing
from tests.conformance.test_step_listings import Side

SCRIPT = """#!/bin/sh
srun -n1 true
srun -N2 -n2 sh -c 'exit 3'
srun -n1 -J named sleep 1
exit 0
"""
FIELDS = ("JobID,JobName,Partition,AllocCPUS,State,ExitCode,DerivedExitCode,NodeList,NNodes,"
          "NTasks,User,Timelimit,Start,End,Elapsed")
QUERIES = {
    "all": ("-P", "-o", FIELDS),
    "one step": ("-P", "-o", "JobID,JobName,State,ExitCode", "-j", "{jid}.1"),
    "batch": ("-P", "-o", "JobID,State", "-j", "{jid}.batch"),
    "-X": ("-X", "-P", "-o", "JobID,JobName,State,ExitCode"),
    "table": ("-o", "JobID,JobName,State,ExitCode,NTasks,NodeList"),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, dict[str, tuple[int, str, str]]]:
    from ranch.cli.shims import write

    reason = slurm_missing() or accounting_missing()
    if reason:
        if os.environ.get("RANCH_REQUIRE_SLURMDBD") == "1":
            pytest.fail(f"RANCH_REQUIRE_SLURMDBD=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    shims = tmp_path_factory.mktemp("shims")
    write(shims)
    slurm = SlurmCluster(SHAPE, accounting=True)
    try:
        try:
            slurm.start()
        except SlurmUnavailable as exc:
            pytest.fail(f"a private Slurm with slurmdbd could not start: {exc}", pytrace=False)
        with RanchCluster(SHAPE) as ranch:
            sides = {"slurm": Side(slurm, None), "ranch": Side(ranch, shims)}
            jobs = {}
            for name, side in sides.items():
                (side.dir / "job.sh").write_text(SCRIPT)
                done = side.run("sbatch", "-N2", "-J", "stepjob", "-o", "out.txt", "job.sh")
                assert done.returncode == 0, (name, done.stderr)
                jobs[name] = int(done.stdout.split()[-1])
            out: dict[str, dict[str, tuple[int, str, str]]] = {}
            for name, side in sides.items():
                jid = jobs[name]
                deadline = time.monotonic() + 90
                # until the job's own record is in: under load slurmdbd may take the steps
                # first and show the job as a placeholder named "allocation" meanwhile
                while time.monotonic() < deadline and side.run(
                        "sacct", "-n", "-X", "-P", "-o", "State,JobName,Partition", "-j", str(jid)
                ).stdout.strip() != "COMPLETED|stepjob|main":
                    time.sleep(0.3)
                # slurmdbd records the last step's end a moment after the job's
                while time.monotonic() < deadline and "RUNNING" in side.run(
                        "sacct", "-n", "-P", "-o", "State", "-j", str(jid)).stdout:
                    time.sleep(0.3)
                out[name] = {"_jid": (jid, "", "")}
                for key, args in QUERIES.items():
                    argv = [a.format(jid=jid) for a in args]
                    if "-j" not in argv:
                        argv += ["-j", str(jid)]
                    p = side.run("sacct", *argv)
                    out[name][key] = (p.returncode, p.stdout, p.stderr)
            return out
    finally:
        slurm.stop()


def normal(text: str, jid: int) -> str:
    text = re.sub(rf"(?<![.\w]){jid}(?=[.|\s]|$)", "<jobid>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", "<time>", text)
    return re.sub(r"\d\d:\d\d:\d\d", "<elapsed>", text)


def pair(outcomes, key: str):
    s, r = outcomes["slurm"], outcomes["ranch"]
    return ([normal(x, s["_jid"][0]) if isinstance(x, str) else x for x in s[key]],
            [normal(x, r["_jid"][0]) if isinstance(x, str) else x for x in r[key]])


def _parsable(text: str) -> list[list[str]]:
    return [[v.strip() for v in line.split("|")] for line in text.splitlines()]


@pytest.mark.parametrize("key", ["all", "one step", "batch", "-X"])
def test_parsable_lines(outcomes, key: str) -> None:
    slurm, ranch = pair(outcomes, key)
    assert ranch[0] == slurm[0] == 0, (ranch[2], slurm[2])
    assert _parsable(ranch[1]) == _parsable(slurm[1])


def test_table_line_by_line(outcomes) -> None:
    slurm, ranch = pair(outcomes, "table")
    assert ranch[1].splitlines() == slurm[1].splitlines()
