"""Controller CPU per held CLI submission and submit -> running, Ranch against Slurm 22.05 run
with two scheduler settings, interleaved round by round, ratios per round (issue 35).

    python bench/submit_vs_slurm.py --rounds 3
    python bench/submit_vs_slurm.py --ranch before=/tmp/ranch-old --ranch after=. --rounds 3

Each round starts, one after the other, a private Slurm (tests/conformance/slurm_cluster.py)
with the project's bench settings ("slurm-builtin": sched/builtin, sched_interval=1), the same
with backfill and batch_sched_delay=0 ("slurm-backfill"), and each Ranch tree (rctld and an
rnoded per node, bench/vs_slurm.py's RanchSide). On each: `--submitters` shell loops of
`sbatch/rbatch --hold --wrap true` (`--jobs` in all; the controller's user and system CPU read
from /proc before and after, and submissions/s), the same from one loop (`--single`: every
submission its own commit), then `--latency-jobs` jobs one at a time that write their own
start time (submit -> running, from the submit command's start and from its acknowledgment).
Every daemon of this bench listens on 127.0.0.1 in 24000-24999 (`--ports`).
Prints each round and the median of the per-round ratios to each Slurm; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import vs_slurm  # noqa: E402
from bench.vs_slurm import SHAPE, RanchSide, SlurmSide, latencies, p99, parallel_submits  # noqa: E402
from tests.conformance import slurm_cluster  # noqa: E402
from tests.conformance.slurm_cluster import SlurmCluster  # noqa: E402

SLURMS = {
    "slurm-builtin": slurm_cluster.BUILTIN,
    "slurm-backfill": "SchedulerType=sched/backfill\nSchedulerParameters=batch_sched_delay=0\n",
}


class Slurm(SlurmSide):
    def __init__(self, label: str, workdir: Path) -> None:
        self.label = label
        self.cluster = SlurmCluster(SHAPE, scheduler=SLURMS[label])
        self.workdir = workdir


def port_range(low: int, high: int):
    """A free_port() that hands out ports of [low, high] only, each once a run."""
    nxt = [low]

    def free_port() -> int:
        while nxt[0] <= high:
            port = nxt[0]
            nxt[0] += 1
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
        raise RuntimeError(f"no free port left in {low}-{high}")

    return free_port


def proc_times(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def one(side, args, scratch: Path) -> dict[str, float]:
    pid = side.ctld_pid
    each = -(-args.jobs // args.submitters)
    u0, s0 = proc_times(pid)
    rate = parallel_submits(side, args.submitters, each)
    u1, s1 = proc_times(pid)
    n = each * args.submitters
    fig = {"subs/s": rate, "cpu ms/sub": (u1 - u0 + s1 - s0) / n * 1000,
           "user ms/sub": (u1 - u0) / n * 1000, "sys ms/sub": (s1 - s0) / n * 1000}
    if args.single:  # one at a time: every submission its own commit
        u0, s0 = proc_times(pid)
        fig["1 submitter subs/s"] = parallel_submits(side, 1, args.single)
        u1, s1 = proc_times(pid)
        fig["1 submitter cpu ms/sub"] = (u1 - u0 + s1 - s0) / args.single * 1000
    vs_slurm.cancel_all(side)
    if args.latency_jobs:
        lat, acked = latencies(side, args.latency_jobs, scratch / "lat")
        fig.update({"submit->run p50": statistics.median(lat), "submit->run p99": p99(lat),
                    "ack->run p50": statistics.median(acked), "ack->run p99": p99(acked)})
    fig["load"] = os.getloadavg()[0]
    return fig


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=240, help="held submissions a run")
    p.add_argument("--submitters", type=int, default=8)
    p.add_argument("--single", type=int, default=60, help="held submissions by one submitter")
    p.add_argument("--latency-jobs", type=int, default=40)
    p.add_argument("--ranch", action="append", metavar="LABEL=TREE")
    p.add_argument("--slurm", action="append", choices=sorted(SLURMS),
                   help="which Slurm settings (default both)")
    p.add_argument("--ports", default="24000-24999")
    args = p.parse_args(argv)
    low, _, high = args.ports.partition("-")
    free = port_range(int(low), int(high))
    slurm_cluster.free_port = vs_slurm.free_port = free  # every daemon's port from our range
    trees = [(lb, Path(t)) for lb, _, t in (r.partition("=") for r in args.ranch or [])] \
        or [("ranch", ROOT)]
    slurms = args.slurm or list(SLURMS)
    labels = [*slurms, *(lb for lb, _ in trees)]
    print(f"{len(SHAPE.nodes)} nodes of {SHAPE.cpus} CPUs; {os.cpu_count()} CPUs here; "
          f"{args.submitters} submitters x {args.jobs} held jobs, {args.latency_jobs} latency "
          f"jobs; order {', '.join(labels)}", flush=True)
    rounds: list[dict[str, dict[str, float]]] = []
    for rnd in range(args.rounds):
        got: dict[str, dict[str, float]] = {}
        for lb in labels:
            scratch = Path(tempfile.mkdtemp(prefix=f"submit-vs-{lb}-"))
            if lb in SLURMS:
                side = Slurm(lb, scratch)
            else:
                side = RanchSide(lb, dict(trees)[lb], scratch)
            result = vs_slurm.on_side(side, scratch, lambda s, d: one(s, args, d), lb)
            if result is None:
                continue
            got[lb] = result
            print(f"round {rnd + 1} {lb:>15}: " + ", ".join(
                f"{k} {v:.2f}" for k, v in got[lb].items()), flush=True)
        rounds.append(got)
    print("\nmedians over rounds (ratios: median of the per-round ratios)")
    keys = [k for k in next(iter(rounds[0].values())) if k != "load"]
    for lb in labels:
        vals = {k: statistics.median(r[lb][k] for r in rounds if lb in r) for k in keys}
        print(f"  {lb:>15}: " + ", ".join(f"{k} {v:.2f}" for k, v in vals.items()))
    for lb, _ in trees:
        for sl in slurms:
            ratios = {k: statistics.median(r[lb][k] / r[sl][k] for r in rounds
                                           if lb in r and sl in r and r[sl][k])
                      for k in ("cpu ms/sub", "subs/s", "1 submitter cpu ms/sub", "ack->run p50",
                                "ack->run p99")
                      if k in keys}
            print(f"  {lb} / {sl}: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
