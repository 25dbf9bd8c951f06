"""Node-side and controller CPU per job, Ranch against Slurm 22.05, interleaved round by round
(issue 50).

    python bench/node_cpu_vs_slurm.py                          # 2 rounds of 1,000 jobs
    python bench/node_cpu_vs_slurm.py --jobs 300 --rounds 3
    python bench/node_cpu_vs_slurm.py --jobs 480 --submitters 8   # a submission per job
    python bench/node_cpu_vs_slurm.py --ranch before=/tmp/ranch-old --ranch after=.
    python bench/node_cpu_vs_slurm.py --jobs 240 --paced 15   # both sides fed alike

Each round starts, one after the other, Slurm (the conformance suite's private Slurm, with issue
50's settings: sched/backfill, batch_sched_delay=0, MessageTimeout=30) and each Ranch tree
(bench/vs_slurm.py's RanchSide: rctld and an rnoded per node), 6 nodes of 2 CPUs on loopback;
Ranch's nodes beat every `--heartbeat-interval` seconds (10, Ranch's default; a slurmd is
pinged every 100 s).
On each: `--warmup` jobs not counted, the node side's idle CPU over `--idle` seconds, then an
array of `--jobs` tasks running `true` (or, with `--submitters K`, as many `sbatch --wrap true`
from K shell loops, so that each job pays its own submission; or, with `--paced RATE`, as many
started RATE a second on both sides alike), until the queue is empty. Loops run each side's
commands as fast as they go, so they feed the two controllers at different rates (Ranch's at
60 jobs a second, Slurm's at 24), and a controller's CPU per request grows as requests come
further apart (bench/submit_vs_slurm.py); a RATE under both sides' own is the like-for-like
figure.

The node side is counted in cpuacct groups (nanoseconds, every process and thread that ever
ran in them; children stay in their parent's group): every slurmd (so every slurmstepd it forks
and the jobs' own processes) or every rnoded (so its job supervisors, spares included, and the
jobs' own processes). Slurm runs a munged per role (tests/conformance/slurm_cluster.py,
munged_per_role): one for the slurmds, one for slurmctld, one for the commands, each in a
group of its own, so that each side's MUNGE work is counted with it, as Ranch's MACs are
inside rnoded and rctld. Per job:
  node          the node group's CPU over the burst / jobs
  node-idle     less the idle rate times the burst's wall time (heartbeats, pings, samplers)
  daemon        the daemons' own CPU (slurmd / rnoded, /proc, 10 ms ticks), the rest being
                slurmstepd or the shims, and the jobs themselves (`/bin/sh` running `true`)
  ctld          the controller's CPU over the burst / jobs (slurmctld or rctld alone, in a
                cpuacct group of its own): what a job run to completion costs it, the array's
                one submission included
  ctld-idle     less the controller's idle rate over the burst's wall time
  node+munged, ctld+munged   the slurmds' or slurmctld's figure plus its own munged's
Ratios are each Ranch side's figure over Slurm's, per round, then the median. Prints; asserts
nothing; not part of `make test`. Where this machine lets no cpuacct group be made, it says so
and stops (/proc's children figures miss what a daemon did not reap itself).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import vs_slurm  # noqa: E402
from bench.vs_slurm import SHAPE, RanchSide, SlurmSide, now_load, on_side, proc_cpu  # noqa: E402

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
ISSUE_SLURM = "SchedulerType=sched/backfill\nSchedulerParameters=batch_sched_delay=0\n"


class Group:
    """A cpuacct group of our own holding some processes (and, from then on, their children)."""

    def __init__(self, name: str, pids: list[int]) -> None:
        self.path = CPUACCT / f"bench-node-cpu-{os.getpid()}-{name}"
        self.path.mkdir()
        for pid in pids:
            (self.path / "cgroup.procs").write_text(str(pid))

    def ms(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e6

    def close(self) -> None:
        """Move what is left back to the root group and remove ours."""
        deadline = time.monotonic() + 10
        while self.path.exists():
            for pid in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (CPUACCT / "cgroup.procs").write_text(pid)
            try:
                self.path.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


class Slurm(SlurmSide):
    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        from tests.conformance.slurm_cluster import SlurmCluster

        self.cluster = SlurmCluster(SHAPE, scheduler=ISSUE_SLURM, extra_conf="MessageTimeout=30\n",
                                    munged_per_role=True)

    def node_pids(self) -> list[int]:
        return [p.pid for n, p in self.cluster.procs.items() if n.startswith("slurmd-")]

    def munged_pids(self) -> dict[str, int]:
        """Each role's munged: the slurmds', slurmctld's, the commands'."""
        return {role: self.cluster.procs[name].pid for role, name in
                (("node", "munged-node"), ("ctld", "munged-ctld"), ("cmd", "munged"))}


class Ranch(RanchSide):
    def node_pids(self) -> list[int]:
        return [p.pid for n, p in self.procs.items() if n != "rctld"]

    def munged_pids(self) -> dict[str, int]:
        return {}


def wait_done(side, timeout: float) -> None:
    """Until the queue is empty (every task ended and its ending recorded by the controller)."""
    vs_slurm.wait_empty(side, timeout)


def array(side, jobs: int) -> None:
    subprocess.run(side.argv("sbatch", f"--array=1-{jobs}", "-o", "/dev/null", "--wrap", "true"),
                   env=side.env, cwd=side.workdir, check=True, stdout=subprocess.DEVNULL)


def loops(side, jobs: int, submitters: int) -> None:
    """`jobs` plain jobs, each its own `sbatch --wrap true`, from `submitters` shell loops."""
    vs_slurm.parallel_submits(side, submitters, jobs // submitters,
                              ("-o", "/dev/null", "--wrap", "true"))


def one(side, args, scratch: Path) -> dict[str, float]:
    node = Group(f"{side.label}-node", side.node_pids())
    ctld = Group(f"{side.label}-ctld", [side.ctld_pid])
    munged = {role: Group(f"{side.label}-munged-{role}", [pid])
              for role, pid in side.munged_pids().items()}
    try:
        if args.warmup:
            array(side, args.warmup)
            wait_done(side, 120)
        n0, c0 = node.ms(), ctld.ms()
        time.sleep(args.idle)
        idle = (node.ms() - n0) / args.idle  # ms a second
        ctld_idle = (ctld.ms() - c0) / args.idle
        pids = side.node_pids()
        d0 = sum(proc_cpu(p) for p in pids)
        n0, c0, t0 = node.ms(), ctld.ms(), time.perf_counter()
        m0 = {role: g.ms() for role, g in munged.items()}
        if args.paced:
            vs_slurm.paced_submits(side, args.paced, args.jobs,
                                   ("-o", "/dev/null", "--wrap", "true"))
        elif args.submitters:
            loops(side, args.jobs, args.submitters)
        else:
            array(side, args.jobs)
        wait_done(side, max(600.0, args.jobs))
        n1, c1, t1 = node.ms(), ctld.ms(), time.perf_counter()
        m1 = {role: g.ms() for role, g in munged.items()}
        d1 = sum(proc_cpu(p) for p in pids)
    finally:
        node.close()
        ctld.close()
        for g in munged.values():
            g.close()
    n, wall = args.jobs, t1 - t0
    fig = {"idle node ms/s": idle, "jobs/s": n / wall, "node": (n1 - n0) / n,
           "node-idle": (n1 - n0 - idle * wall) / n, "daemon": (d1 - d0) * 1000 / n,
           "idle ctld ms/s": ctld_idle, "ctld": (c1 - c0) / n,
           "ctld-idle": (c1 - c0 - ctld_idle * wall) / n}
    if munged:
        for role in munged:
            fig[f"munged-{role}"] = (m1[role] - m0[role]) / n
        fig["node+munged"] = fig["node"] + fig["munged-node"]
        fig["ctld+munged"] = fig["ctld"] + fig["munged-ctld"]
    print(f"  {side.label}: " + ", ".join(f"{k} {v:.2f}" for k, v in fig.items())
          + f" (load {now_load():.2f})", flush=True)
    return fig


def report(results: dict[str, list[dict[str, float]]], labels: list[str]) -> None:
    names: list[str] = []
    for rounds in results.values():
        for fig in rounds:
            names += [k for k in fig if k not in names]
    print("\nmedians over rounds (ms of CPU per job unless named)")
    print(f"{'figure':<16}" + "".join(f"{lb:>14}" for lb in labels))
    for name in names:
        cells = []
        for lb in labels:
            got = [f[name] for f in results.get(lb, []) if name in f]
            cells.append(f"{statistics.median(got):14.2f}" if got else f"{'-':>14}")
        print(f"{name:<16}" + "".join(cells))
    if "slurm" not in results:
        return
    print("\nratios, median of per-round ratios")
    for lb in labels:
        if lb == "slurm" or lb not in results:
            continue
        for mine, theirs in (("node", "node"), ("node-idle", "node-idle"),
                             ("node", "node+munged"), ("ctld", "ctld"), ("ctld", "ctld+munged"),
                             ("ctld-idle", "ctld-idle")):
            per = [r[mine] / s[theirs] for r, s in zip(results[lb], results["slurm"], strict=False)]
            print(f"  {lb} {mine} / slurm {theirs}: {statistics.median(per):.2f}x "
                  f"({', '.join(f'{x:.2f}' for x in per)})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=24)
    p.add_argument("--idle", type=float, default=10.0, help="seconds of idle measured")
    p.add_argument("--submitters", type=int, default=0, metavar="K",
                   help="K shell loops submit the jobs one sbatch each (default: one array)")
    p.add_argument("--paced", type=float, metavar="RATE",
                   help="the jobs submitted one sbatch each, started RATE a second")
    p.add_argument("--no-slurm", action="store_true")
    vs_slurm.add_heartbeat_option(p)
    p.add_argument("--ranch", action="append", metavar="LABEL=TREE",
                   help="a Ranch source tree (repeatable; default ranch=this tree)")
    args = p.parse_args(argv)
    if args.submitters and args.jobs % args.submitters:
        p.error("--jobs must be a multiple of --submitters")
    if not os.access(CPUACCT, os.W_OK):
        print(f"no cpuacct groups here ({CPUACCT} not writable): nothing measured")
        return 1
    trees = [(lb, Path(t)) for lb, _, t in (r.partition("=") for r in args.ranch or [])] \
        or [("ranch", ROOT)]
    labels = ([] if args.no_slurm else ["slurm"]) + [lb for lb, _ in trees]
    print(f"{len(SHAPE.nodes)} nodes of {SHAPE.cpus} CPUs; {os.cpu_count()} CPUs here; "
          f"{args.jobs} jobs a round; rounds {args.rounds}; order {', '.join(labels)}; "
          f"HeartbeatInterval={args.heartbeat_interval}; load {now_load():.2f}", flush=True)
    results: dict[str, list[dict[str, float]]] = {}
    for rnd in range(args.rounds):
        for lb in labels:
            scratch = Path(tempfile.mkdtemp(prefix=f"node-cpu-{lb}-"))
            side = Slurm(scratch) if lb == "slurm" else Ranch(
                lb, dict(trees)[lb], scratch, heartbeat=args.heartbeat_interval)
            print(f"round {rnd + 1}: {lb}", flush=True)
            got = on_side(side, scratch, lambda s, d: one(s, args, d), lb)
            if got is not None:
                results.setdefault(lb, []).append(got)
    report(results, [lb for lb in labels if lb in results])
    return 0


if __name__ == "__main__":
    sys.exit(main())
