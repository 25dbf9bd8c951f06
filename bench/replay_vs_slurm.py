"""A 300-job Lublin-Feitelson trace replayed on real Slurm 22.05 and on real Ranch at once, both
sched/backfill, and through the simulator (ranch/sim): each one's utilisation, makespan and start
order (Kendall's tau-b against Slurm's, and the simulator's against Ranch's).

    python bench/replay_vs_slurm.py [--jobs 300] [--nodes 4] [--seed 44] [--longest 4]

Runs as root where tests/conformance can start a private Slurm (bench/trace_replay.py makes
the trace and drives both). Prints one JSON line; asserts nothing; not part of `make test`.
The issue's bar: Ranch's utilisation >= Slurm's minus 1 point.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.trace_replay import (  # noqa: E402
    BACKFILL,
    order,
    replay_jobs,
    run,
    simulate,
    utilisation,
)
from ranch.sim.report import kendall_tau_b, start_times, summary  # noqa: E402
from tests.conformance.conftest import start_slurm  # noqa: E402
from tests.conformance.ranch_cluster import RanchCluster  # noqa: E402
from tests.conformance.shape import SHAPE, Shape  # noqa: E402
from tests.conformance.sidebyside import run_both  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--longest", type=int, default=4)
    args = ap.parse_args()
    shape = Shape(nodes=tuple(f"c{i}" for i in range(1, args.nodes + 1)), cpus=SHAPE.cpus)
    jobs = replay_jobs(args.jobs, args.seed, args.nodes, args.longest)
    sim = simulate(shape, jobs)
    predicted = summary(sim)
    began = time.monotonic()
    slurm = start_slurm(shape, scheduler=BACKFILL)
    try:
        with RanchCluster(shape, scheduler=BACKFILL) as ranch:
            got = run_both(slurm, ranch, lambda c: run(c, jobs, timeout=3600), timeout=3700)
    finally:
        slurm.stop()
    out: dict = {"jobs": len(jobs), "nodes": args.nodes, "seed": args.seed,
                 "wall_s": round(time.monotonic() - began, 1)}
    for name in ("slurm", "ranch"):
        times = got[name]["times"]
        ends = [e for _, e in times.values() if e is not None]
        starts = [s for s, _ in times.values() if s is not None]
        out[name] = {"utilisation": round(utilisation(jobs, times, args.nodes), 2),
                     "makespan_s": max(ends) - min(starts)}
    out["simulated"] = {"utilisation": predicted["utilisation"],
                        "makespan_s": predicted["makespan"],
                        "backfilled": predicted["backfilled"]}
    real = {n: {t: s for t, (s, _e) in got[n]["times"].items() if s is not None}
            for n in ("slurm", "ranch")}
    out["tau_b_ranch_vs_slurm"] = round(kendall_tau_b(real["slurm"], real["ranch"]), 3)
    out["tau_b_simulated_vs_ranch"] = round(kendall_tau_b(start_times(sim.runs),
                                                          real["ranch"]), 3)
    out["order_slurm"] = order(got["slurm"]["times"])
    out["order_ranch"] = order(got["ranch"]["times"])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
