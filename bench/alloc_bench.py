"""ralloc against salloc 22.05: how long from typing `salloc -N1 CMD` until CMD runs, and until
salloc has released the allocation and exited, on idle clusters of the same shape.

    .venv/bin/python bench/alloc_bench.py [--runs 30]

Slurm is the conformance suite's private one (tests/conformance/slurm_cluster.py: own munged,
slurmctld, a slurmd per node on loopback; root and Slurm 22.05 needed, else Ranch runs alone and
the reason is printed); Ranch is a real rctld with one rnoded per node. Both are called as
`salloc` (Ranch's through the ranch-slurm-shims script, as a user with the shims on PATH calls
it), one run each in turn. The command is `date +%s.%N`: the time it prints, less the time just
before salloc was started, is "until the command runs". CPU: what the salloc process and its
children used (getrusage), per run. Prints p50 and p99; asserts nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conformance.alloc_runner import Side, ranch_side, slurm_side  # noqa: E402
from tests.conformance.ranch_cluster import RanchCluster  # noqa: E402
from tests.conformance.shape import SHAPE  # noqa: E402
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable  # noqa: E402


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def one(side: Side) -> tuple[float, float, float]:
    """(ms until the command ran, ms until salloc exited, CPU ms of salloc and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    done = subprocess.run(["salloc", "-N1", "date", "+%s.%N"], cwd=side.workdir, env=side.env,
                          capture_output=True, text=True, timeout=60)
    t1 = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{side.name}: salloc failed ({done.returncode}): {done.stderr}")
    ran = float(done.stdout.split()[0])
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return (ran - t0) * 1000, (t1 - t0) * 1000, cpu


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    opts = ap.parse_args()
    slurm: SlurmCluster | None = SlurmCluster(SHAPE)
    try:
        slurm.start()
    except SlurmUnavailable as exc:
        print(f"Slurm not measured: {str(exc).splitlines()[0]}")
        slurm.stop()
        slurm = None
    try:
        with RanchCluster(SHAPE) as ranch:
            sides = ([slurm_side(slurm)] if slurm else []) + [ranch_side(ranch)]
            for side in sides:  # warm both (first munge credential, page cache)
                one(side)
            figures: dict[str, list[tuple[float, float, float]]] = {s.name: [] for s in sides}
            for _ in range(opts.runs):
                for side in sides:  # interleaved: the same machine load for both
                    figures[side.name].append(one(side))
    finally:
        if slurm:
            slurm.stop()
    print(f"salloc -N1 date, {opts.runs} runs each, interleaved; load "
          f"{os.getloadavg()[0]:.2f}")
    for name, rows in figures.items():
        ran, ended, cpu = ([r[i] for r in rows] for i in range(3))
        label = "salloc (Slurm 22.05)" if name == "slurm" else "ralloc (as salloc)  "
        print(f"{label}: until the command runs p50 {pct(ran, 0.5):.0f} ms, p99 "
              f"{pct(ran, 0.99):.0f} ms; until it exits p50 {pct(ended, 0.5):.0f} ms, p99 "
              f"{pct(ended, 0.99):.0f} ms; CPU p50 {pct(cpu, 0.5):.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
