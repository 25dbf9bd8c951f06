"""Job steps as users see them, Slurm 22.05 beside Ranch: `squeue -s` (default, -o, -O, a step
list, -u), `scontrol show step` (keys in order, -o, an unknown step) and `scancel N.S` (its
words and exit codes: a running job's unknown step, a malformed id, -v, a step already ended,
a step of a held job, two steps at once, a step of an ended job), over one scenario run on
both: a 2-node batch job whose script starts `srun -n1` in the background, then a 2-node `srun`
beside it.

Ranch's commands run through ranch-slurm-shims (cli/shims.py) under Slurm's names, so the job's
`srun` is rrun and the error lines begin `scancel:`. sacct's step lines need slurmdbd:
test_step_acct.py compares them over a private one.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conformance.conftest import start_slurm
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE

SCRIPT = """#!/bin/sh
srun -n1 -c1 sh -c 'touch started.0; exec sleep 120' &
while [ ! -e started.0 ]; do sleep 0.1; done
srun -N2 -n2 -c1 sleep 120
wait
"""


class Side:
    """One system's commands, run in its own directory (Ranch's through the shims)."""

    def __init__(self, system, shims: Path | None) -> None:
        self.system, self.shims = system, shims
        self.dir = Path(system.workdir) / "steps"
        self.dir.mkdir(exist_ok=True)

    def run(self, command: str, *args: str) -> subprocess.CompletedProcess:
        env = self.system.env()
        argv = self.system.argv(command, *args)
        if self.shims is not None:
            env["PATH"] = f"{self.shims}{os.pathsep}{env.get('PATH', '')}"
            argv = [str(self.shims / command), *args]
        return subprocess.run(argv, cwd=self.dir, env=env, capture_output=True, text=True,
                              timeout=60)


def _both_running(sides: dict[str, Side], jobs: dict[str, int]) -> bool:
    return all(len(s.run("squeue", "-s", "-h", "-j", str(jobs[n])).stdout.splitlines()) == 3
               for n, s in sides.items())


def scenario(side: Side, jid: int, held: int) -> dict[str, tuple[int, str, str]]:
    """Every command compared, with (exit code, stdout, stderr)."""
    out: dict[str, tuple[int, str, str]] = {}

    def note(key: str, command: str, *args: str) -> None:
        p = side.run(command, *args)
        err = "".join(line + "\n" for line in p.stderr.splitlines() if "select/" not in line)
        out[key] = (p.returncode, p.stdout, err)

    note("squeue -s", "squeue", "-s", "-j", str(jid))
    note("squeue -s -o", "squeue", "-s", "-h", "-j", str(jid), "-o",
         "%i|%j|%P|%u|%N|%A|%l|%b|%U|%L")
    note("squeue -s -O", "squeue", "-s", "-j", str(jid), "-O",
         "StepID,StepName:.8,StepState:5,Nodes,NumTasks,JobID,ArrayTaskID,Name")
    note("squeue -s N.1", "squeue", "-s", f"{jid}.1")
    note("squeue -s -u nobody", "squeue", "-s", "-u", "nobody")
    note("scontrol show step N", "scontrol", "show", "step", str(jid))
    note("scontrol -o show step N.0", "scontrol", "-o", "show", "step", f"{jid}.0")
    note("scontrol show step N.7", "scontrol", "show", "step", f"{jid}.7")
    note("scancel N.7", "scancel", f"{jid}.7")
    note("scancel N.x", "scancel", f"{jid}.x")
    note("scancel -v N.1", "scancel", "-v", f"{jid}.1")
    note("scancel N.0 of a pending job", "scancel", f"{held}.0")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and f"{jid}.1 " in side.run(
            "squeue", "-s", "-h", "-o", "%i ").stdout:
        time.sleep(0.2)
    note("squeue -s after", "squeue", "-s", "-h", "-j", str(jid), "-o", "%i %j")
    note("scontrol show step N.1 after", "scontrol", "show", "step", f"{jid}.1")
    note("scancel N.1 again", "scancel", f"{jid}.1")
    note("scancel N.0 N.9", "scancel", f"{jid}.0", f"{jid}.9")  # the script ends with N.0
    side.run("scancel", str(jid))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and side.run("squeue", "-h", "-j", str(jid), "-o",
                                                   "%t").stdout.strip() in ("R", "CG"):
        time.sleep(0.2)
    note("scancel N.0 of an ended job", "scancel", f"{jid}.0")
    return out


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, dict[str, tuple[int, str, str]]]:
    from ranch.cli.shims import write

    shims = tmp_path_factory.mktemp("shims")
    write(shims)
    slurm = start_slurm()
    try:
        with RanchCluster(SHAPE) as ranch:
            sides = {"slurm": Side(slurm, None), "ranch": Side(ranch, shims)}
            jobs, held = {}, {}
            for name, side in sides.items():
                done = side.run("sbatch", "-H", "-o", "/dev/null", "--wrap", "true")
                held[name] = int(done.stdout.split()[-1])
                (side.dir / "job.sh").write_text(SCRIPT)
                done = side.run("sbatch", "-N2", "--ntasks-per-node=2", "-J", "stepjob", "-o",
                                "out.txt", "job.sh")
                assert done.returncode == 0, (name, done.stderr)
                jobs[name] = int(done.stdout.split()[-1])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not _both_running(sides, jobs):
                time.sleep(0.2)
            assert _both_running(sides, jobs), {
                n: (s.run("squeue", "-s").stdout, (s.dir / "out.txt").read_text()
                    if (s.dir / "out.txt").exists() else "") for n, s in sides.items()}
            return {n: {**scenario(s, jobs[n], held[n]), "_jid": (jobs[n], "", "")}
                    for n, s in sides.items()}
    finally:
        slurm.stop()


def normal(text: str, jid: int) -> str:
    """Job ids and times written alike on both systems (node lists are compared as written)."""
    text = re.sub(rf"(?<![.\w]){jid}(?=\.(?:\d+|batch|x)\b|:| |\n|$)", "<jobid>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", "<time>", text)
    text = re.sub(r"(?<=[ |])\d+:\d\d(?=[ |\n])", "<t>", text)  # squeue's TIME
    return re.sub(r"SrunHost:Pid=\S+", "SrunHost:Pid=<host>", text)


def pair(outcomes, key: str) -> tuple[tuple, tuple]:
    s, r = outcomes["slurm"], outcomes["ranch"]
    sj, rj = s["_jid"][0], r["_jid"][0]
    return (tuple(normal(x, sj) if isinstance(x, str) else x for x in s[key]),
            tuple(normal(x, rj) if isinstance(x, str) else x for x in r[key]))


def _ends(line: str) -> list[int]:
    return [m.end() for m in re.finditer(r"\S+", line)]


@pytest.mark.parametrize("key", ["squeue -s -o", "squeue -s N.1", "squeue -s -u nobody",
                                 "scontrol show step N.7", "scancel N.7", "scancel N.x",
                                 "scancel -v N.1", "scancel N.0 of a pending job",
                                 "squeue -s after",
                                 "scontrol show step N.1 after", "scancel N.1 again",
                                 "scancel N.0 N.9",
                                 "scancel N.0 of an ended job"])
def test_same_output_and_exit_code(outcomes, key: str) -> None:
    slurm, ranch = pair(outcomes, key)
    assert ranch == slurm


def test_squeue_s_default_columns_line_up(outcomes) -> None:
    slurm, ranch = pair(outcomes, "squeue -s")
    assert ranch == slurm
    for s_line, r_line in zip(outcomes["slurm"]["squeue -s"][1].splitlines(),
                              outcomes["ranch"]["squeue -s"][1].splitlines(), strict=True):
        assert _ends(r_line)[:-1] == _ends(s_line)[:-1]  # right-justified columns, same widths


def test_squeue_s_long_fields_and_their_errors(outcomes) -> None:
    slurm, ranch = pair(outcomes, "squeue -s -O")
    assert ranch[0] == slurm[0] and ranch[2] == slurm[2]
    assert [line.split() for line in ranch[1].splitlines()] == [
        line.split() for line in slurm[1].splitlines()]
    # 20 wide unless given: the columns start at the same places
    assert [_starts(line) for line in outcomes["ranch"]["squeue -s -O"][1].splitlines()] == [
        _starts(line) for line in outcomes["slurm"]["squeue -s -O"][1].splitlines()]


def _starts(line: str) -> list[int]:
    return [m.start() for m in re.finditer(r"\S+", line)]


def _records(text: str) -> list[list[tuple[str, str]]]:
    out = []
    for block in text.strip().split("\n\n"):
        out.append(re.findall(r"(\S+?)=(\S*)", block))
    return out


def test_scontrol_show_step_keys_in_order_and_values(outcomes) -> None:
    for key in ("scontrol show step N", "scontrol -o show step N.0"):
        slurm, ranch = pair(outcomes, key)
        assert ranch[0] == slurm[0] == 0
        assert _records(ranch[1]) == _records(slurm[1])
        if key.startswith("scontrol -o"):
            assert len(ranch[1].splitlines()) == len(slurm[1].splitlines()) == 1
        else:  # the same keys on the same lines
            assert [len(line.split()) for line in ranch[1].splitlines()] == [
                len(line.split()) for line in slurm[1].splitlines()]
