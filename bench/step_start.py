"""rrun and ralloc against srun and salloc 22.05: what starting them costs (issue 35).

    nice .venv/bin/python bench/step_start.py [--rounds 8] [--each 3] [--before TREE]

- `srun --jobid=N -N1 true` into an allocation held by `salloc --no-shell -N1` (a step in an
  allocation, as `srun true` inside salloc runs one): wall time until it exited, and its CPU.
- `salloc -N1 date +%s.%N`: until the command runs (the time `date` prints, less the time
  just before salloc was started), and salloc's CPU with its children's (date's is nothing).

Slurm is the conformance suite's private one (tests/conformance/slurm_cluster.py; root and
Slurm 22.05 needed, else Ranch runs alone and the reason is printed); Ranch is a real rctld
with one rnoded per node, its commands started by their launchers (bin/rrun, bin/ralloc: the
regular install's path). Rounds are interleaved (each round runs both systems in turn, `each`
calls of each command per system, their median kept), so both see the same machine load;
ratios (Ranch / Slurm) are per round, then their median. CPU is getrusage of the children.
"floor" is `python -c pass` in the same rounds: Python's own start, under either command.
--before TREE adds a third side: the commands of another checkout (say the commit before a
change, `git worktree add` or `git archive | tar -x`; bytecode compiled) against the same
cluster, so before and after come from one run.
Prints its figures; asserts nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conformance.ranch_cluster import RanchCluster  # noqa: E402
from tests.conformance.shape import SHAPE  # noqa: E402
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable  # noqa: E402

GOALS = {"step wall": 1.5, "step cpu": 3.0, "alloc until run": 2.0}


class Side:
    def __init__(self, name: str, env: dict[str, str], workdir: Path,
                 srun: list[str], salloc: list[str]) -> None:
        self.name = name
        self.env = {k: v for k, v in env.items() if not k.startswith(("SLURM_JOB", "SLURM_NNODES"))}
        self.workdir = workdir
        self.srun = srun
        self.salloc = salloc
        self.job_id = 0

    def run(self, argv: list[str]) -> tuple[subprocess.CompletedProcess, float, float, float]:
        """(the process, its start time, wall ms, CPU ms)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        done = subprocess.run(argv, cwd=self.workdir, env=self.env, capture_output=True,
                              text=True, timeout=60)
        wall = (time.time() - t0) * 1000
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
        if done.returncode != 0:
            raise SystemExit(f"{self.name}: {argv} failed ({done.returncode}): {done.stderr}")
        return done, t0, wall, cpu

    def hold(self) -> None:
        """An allocation of one node for the steps, held until the end."""
        done, *_ = self.run([*self.salloc, "--no-shell", "-N1"])
        for word in done.stderr.split():
            if word.isdigit():
                self.job_id = int(word)
                return
        raise SystemExit(f"{self.name}: no job id in {done.stderr!r}")

    def step(self) -> tuple[float, float]:
        _, _, wall, cpu = self.run([*self.srun, f"--jobid={self.job_id}", "-N1", "true"])
        return wall, cpu

    def alloc(self) -> tuple[float, float]:
        done, t0, _, cpu = self.run([*self.salloc, "-N1", "date", "+%s.%N"])
        return (float(done.stdout.split()[0]) - t0) * 1000, cpu


def median_of(calls: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(c[0] for c in calls), statistics.median(c[1] for c in calls)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--each", type=int, default=3, help="calls per command, system and round")
    ap.add_argument("--before", type=Path, help="another checkout's commands as a third side")
    opts = ap.parse_args()
    shape = SHAPE
    slurm: SlurmCluster | None = SlurmCluster(shape)
    try:
        slurm.start()
    except SlurmUnavailable as exc:
        print(f"Slurm not measured: {str(exc).splitlines()[0]}")
        slurm.stop()
        slurm = None
    py = sys.executable
    rows: list[dict[str, dict[str, float]]] = []
    try:
        with RanchCluster(shape) as ranch:
            sides = []
            if slurm is not None:
                sides.append(Side("slurm", slurm.env(), slurm.workdir, ["srun"], ["salloc"]))
            renv = ranch.env()
            renv.pop("SLURM_CONF", None)
            sides.append(Side("ranch", renv, ranch.workdir, [py, str(ROOT / "bin" / "rrun")],
                              [py, str(ROOT / "bin" / "ralloc")]))
            if opts.before is not None:
                tree = opts.before.resolve()
                benv = {**renv, "PYTHONPATH": str(tree)}
                sides.append(Side("before", benv, ranch.workdir, [py, str(tree / "bin" / "rrun")],
                                  [py, str(tree / "bin" / "ralloc")]))
            for side in sides:
                side.hold()
                side.step()  # warm: page cache, the first credential
                side.alloc()
            for _ in range(opts.rounds):
                row: dict[str, dict[str, float]] = {}
                for side in sides:  # interleaved: the same load for both
                    step = median_of([side.step() for _ in range(opts.each)])
                    alloc = median_of([side.alloc() for _ in range(opts.each)])
                    row[side.name] = {"step wall": step[0], "step cpu": step[1],
                                      "alloc until run": alloc[0], "alloc cpu": alloc[1]}
                # Python's own start, the floor under both commands (same figure both ways)
                floor = median_of([sides[-1].run([py, "-c", "pass"])[2:] for _ in range(opts.each)])
                row["floor"] = {"step wall": floor[0], "step cpu": floor[1],
                                "alloc until run": floor[0], "alloc cpu": floor[1]}
                rows.append(row)
    finally:
        if slurm is not None:
            slurm.stop()
    print(f"{opts.rounds} interleaved rounds, median of {opts.each} calls each; load "
          f"{os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs); ms")
    keys = ("step wall", "step cpu", "alloc until run", "alloc cpu")
    names = [n for n in rows[0] if n != "slurm"] if rows else []
    for name in names:
        print(f"{name} / slurm per round:" if "slurm" in rows[0] else f"{name}:")
        print("round  " + "  ".join(f"{k:>26}" for k in keys))
        for i, row in enumerate(rows, 1):
            cells = []
            for k in keys:
                r = row[name][k]
                if "slurm" in row:
                    s = row["slurm"][k]
                    cells.append(f"{r:7.1f} / {s:6.1f} = {r / s:4.2f}x")
                else:
                    cells.append(f"{r:7.1f}")
            print(f"{i:5}  " + "  ".join(f"{c:>26}" for c in cells))
    for k in keys:
        line = f"{k:16}"
        for name in ("slurm", *names):
            if rows and name in rows[0]:
                line += f"  {name} p50 {statistics.median(r[name][k] for r in rows):6.1f}"
        if rows and "slurm" in rows[0]:
            for name in names:
                ratio = statistics.median(r[name][k] / r["slurm"][k] for r in rows)
                line += f"  {name}/slurm {ratio:4.2f}x"
            if k in GOALS:
                line += f" (goal <= {GOALS[k]}x)"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
