"""What measuring jobs costs a node (issue 48): rnoded's meter (noded/usage.py) over 64 running
steps, each a task with a child (sh -> sleep, as a step's shell and its command), as a share of
one CPU. Goal: at most 1 % with 64 steps.

Figures: one look at all 64 trees (procfs reads: each process's stat and children), the meter's
own CPU over the first WINDOW seconds (a look each second in a tree's first minute) and at its
steady interval (each tree every 30 s, from the cost of a look), and an idle meter's wake-ups.

    python bench/usage_cost.py [--steps 64] [--window 20]"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ranch.noded import usage


def start_steps(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen(["sh", "-c", "sleep 600; true"], start_new_session=True)
            for _ in range(n)]


def cpu_of(fn, seconds: float) -> float:
    """Share of a CPU this process used while `fn` ran for `seconds` under trio."""
    async def main() -> None:
        with trio.move_on_after(seconds):
            await fn()

    before = time.process_time()
    trio.run(main)
    return (time.process_time() - before) / seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--window", type=float, default=20.0)
    p.add_argument("--rounds", type=int, default=50)
    args = p.parse_args()
    procs = start_steps(args.steps)
    try:
        time.sleep(0.5)  # each shell has started its sleep
        meter = usage.Meter()
        for i, proc in enumerate(procs):
            meter.watch(("step", 1, i), {0: proc.pid})
        trees = sum(len(usage.tree(proc.pid)) for proc in procs)
        started = time.process_time()
        for _ in range(args.rounds):
            for track in meter.tracks.values():
                track.sample(0.0)
        look_ms = (time.process_time() - started) / args.rounds * 1000

        fresh = usage.Meter()
        for i, proc in enumerate(procs):
            fresh.watch(("step", 1, i), {0: proc.pid})
        ramp = cpu_of(fresh.run, args.window)
        idle = cpu_of(usage.Meter().run, min(args.window, 5.0))
        steady = look_ms / 1000 / usage.LONGEST + idle
        print(f"steps: {args.steps} ({trees} processes)")
        print(f"one look at every tree: {look_ms:.2f} ms ({look_ms / args.steps * 1000:.0f} us "
              "a step)")
        print(f"meter CPU, first {args.window:.0f} s (a look each second): "
              f"{ramp * 100:.3f} % of a CPU")
        print(f"meter CPU, steady (a look every {usage.LONGEST:.0f} s): {steady * 100:.4f} % "
              f"of a CPU (idle wake-ups {idle * 100:.4f} %)")
        worst = max(ramp, steady)
        verdict = "within" if worst <= 0.01 else "OVER"
        print(f"goal: at most 1 % of a CPU with 64 steps: {verdict} ({worst * 100:.3f} %)")
        return 0 if worst <= 0.01 else 1
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, 9)
            except OSError:
                pass
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
