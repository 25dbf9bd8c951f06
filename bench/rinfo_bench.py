"""rinfo with an empty queue and with 5,000 held jobs queued, beside sinfo on a private Slurm
22.05 with the same queue (issue 50: rinfo lists nodes, so the queue must not reach its cost).

    python bench/rinfo_bench.py                 # Slurm, then Ranch (this tree)
    python bench/rinfo_bench.py --no-slurm      # Ranch alone
    python bench/rinfo_bench.py --ranch before=/tmp/ranch-old --ranch after=.

The clusters are bench/vs_slurm.py's: 6 nodes of 2 CPUs on loopback; Ranch's an rctld and an
rnoded per node from each tree, Slurm's the conformance suite's fixture. Ranch runs two
controllers at once, one empty and one holding the queue, and their calls are interleaved (with
`python -c pass`, the floor), so the machine's load falls on both alike; Slurm is measured empty,
then with the queue. Per call, medians of `--runs`: the command's wall and CPU (rusage of the
child; bytecode cached, as installed) and the controller's CPU (rctld or slurmctld alone: its
CPU over the calls less as long idle, per call), once the controller is quiet after the queue
was filled (its state save is not a listing's cost). Ranch's queue is submitted over its own
protocol from this process (5,000 rbatch starts take minutes on two cores), Slurm's with
sbatch. Prints; asserts nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from vs_slurm import RanchSide, SlurmSide, parallel_submits, proc_cpu, timed  # noqa: E402

Figures = tuple[float, float, float]  # wall ms, command CPU ms, controller CPU ms per call


def interleaved(sides: dict[str, object], runs: int, floor: list[str] | None = None
                ) -> dict[str, Figures]:
    """Each side's rinfo/sinfo `runs` times, the sides (and `floor`) taking turns."""
    for side in sides.values():
        timed(side.argv("sinfo"), side.env, side.workdir)  # warm-up: page cache, bytecode
    got: dict[str, list[tuple[float, float]]] = {label: [] for label in sides}
    if floor:
        got["python -c pass"] = []
    c0 = {label: proc_cpu(side.ctld_pid) for label, side in sides.items()}
    t0 = time.perf_counter()
    for _ in range(runs):
        for label, side in sides.items():
            wall, cpu, rc = timed(side.argv("sinfo"), side.env, side.workdir)
            if rc:
                raise RuntimeError(f"{label}: {' '.join(side.argv('sinfo'))} exit {rc}")
            got[label].append((wall, cpu))
        if floor:
            wall, cpu, _ = timed(floor, os.environ.copy(), ROOT)
            got["python -c pass"].append((wall, cpu))
    took = time.perf_counter() - t0
    busy = {label: proc_cpu(side.ctld_pid) - c0[label] for label, side in sides.items()}
    c1 = {label: proc_cpu(side.ctld_pid) for label, side in sides.items()}
    time.sleep(took)  # as long idle: heartbeats and timers, which are not the calls' cost
    ctld = {label: max(0.0, busy[label] - (proc_cpu(side.ctld_pid) - c1[label])) / runs * 1000
            for label, side in sides.items()}
    return {label: (statistics.median(w for w, _ in runs_), statistics.median(c for _, c in runs_),
                    ctld.get(label, 0.0)) for label, runs_ in got.items()}


def fill_ranch(side: RanchSide, jobs: int) -> None:
    """`jobs` held jobs, submitted as rbatch submits them, from one client."""
    from ranch.cli.controller import find_target, request

    target = find_target(side.env["RANCH_SERVER"], side.env["RANCH_KEY_FILE"], None)
    body = {"script": "#!/bin/sh\ntrue\n", "user": "root", "uid": os.getuid(),
            "gid": os.getgid(), "workdir": str(side.workdir), "stdout": "/dev/null",
            "hold": True, "name": "wrap"}
    for _ in range(jobs):
        request(target, "SubmitJob", body, want="SubmitReply")


def settle(side, quiet_ms: float = 20.0, longest: float = 30.0) -> None:
    """Until the controller spent under `quiet_ms` of CPU in a second."""
    deadline = time.monotonic() + longest
    while time.monotonic() < deadline:
        c0 = proc_cpu(side.ctld_pid)
        time.sleep(1.0)
        if (proc_cpu(side.ctld_pid) - c0) * 1000 < quiet_ms:
            return


def queued(side) -> int:
    out = subprocess.run(side.argv("squeue", "-h", "-o", "%i"), env=side.env, cwd=side.workdir,
                         capture_output=True, text=True, check=True).stdout
    return len(out.split())


def show(label: str, fig: Figures) -> None:
    wall, cpu, ctld = fig
    print(f"  {label:<24} wall {wall:6.1f} ms   command CPU {cpu:6.1f} ms   "
          f"controller CPU {ctld:5.2f} ms per call", flush=True)


def ranch(label: str, tree: Path, args) -> dict[str, Figures]:
    sides = {f"{label}, 0 queued": RanchSide(label, tree, Path(tempfile.mkdtemp())),
             f"{label}, {args.queue:,} queued": RanchSide(label, tree, Path(tempfile.mkdtemp()))}
    try:
        for side in sides.values():
            side.start()
        full = list(sides.values())[1]
        fill_ranch(full, args.queue)
        assert queued(full) == args.queue
        for side in sides.values():
            settle(side)
        figs = interleaved(sides, args.runs, full.python_floor())
    finally:
        for side in sides.values():
            side.stop()
            shutil.rmtree(side.workdir, ignore_errors=True)
    for name, fig in figs.items():
        show(name, fig)
    return figs


def slurm(args) -> dict[str, Figures] | None:
    from tests.conformance.slurm_cluster import SlurmUnavailable

    side = SlurmSide(Path(tempfile.mkdtemp()))
    figs = {}
    try:
        try:
            side.start()
        except SlurmUnavailable as exc:
            print(f"  Slurm cannot run here: {exc}", flush=True)
            return None
        settle(side)
        figs["slurm, 0 queued"] = interleaved({"slurm, 0 queued": side}, args.runs)[
            "slurm, 0 queued"]
        parallel_submits(side, 8, -(-args.queue // 8))
        n = queued(side)
        settle(side)
        figs[f"slurm, {n:,} queued"] = interleaved({"s": side}, args.runs)["s"]
    finally:
        side.stop()
        shutil.rmtree(side.workdir, ignore_errors=True)
    for name, fig in figs.items():
        show(name, fig)
    return figs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--queue", type=int, default=5000)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--no-slurm", action="store_true")
    p.add_argument("--ranch", action="append", metavar="LABEL=TREE",
                   help="a Ranch source tree to run (repeatable; default ranch=this tree)")
    args = p.parse_args(argv)
    trees = [(lb, Path(t)) for lb, _, t in (r.partition("=") for r in args.ranch or [])] \
        or [("ranch", ROOT)]
    # An installed command has its bytecode compiled: cache it outside the trees.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = pyc = tempfile.mkdtemp(prefix="rinfo-bench-pyc-")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    base = None
    if not args.no_slurm:
        print("slurm:", flush=True)
        base = slurm(args)
    for label, tree in trees:
        print(f"{label}:", flush=True)
        figs = ranch(label, tree, args)
        if base:
            for (name, fig), sfig in zip(list(figs.items())[:2], base.values(), strict=True):
                print(f"  {name} / sinfo wall: {fig[0] / sfig[0]:.2f}x", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    shutil.rmtree(pyc, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
