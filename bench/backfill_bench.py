"""One full backfill planning cycle (ranch/sched/backfill.py) over plain data, in-process.

    python bench/backfill_bench.py [--pending 10000] [--nodes 1000] [--rounds 5] [--profile]

The cluster: `--nodes` 32-CPU nodes (one in ten with 4 GPUs), one partition, every node busy
with running jobs whose end bounds fall over the next 26 hours (a quarter of nodes shared by
small jobs, the rest whole-node jobs). The queue, seeded: sizes after the Lublin-Feitelson
marginals measured in ../shared/sched-reference.md (a quarter serial, the rest mostly powers of
two, p50 8 and p90 64 CPUs, 32 CPUs a node), time limits of 15 min, 1 h, 4 h or 1 day, one in
ten asking GPUs (`--diverse`: random nodes, CPUs, memory and minutes: every job its own
shape; `--idle F`: that share of nodes idle, so the cycle starts jobs too). bf_window 1 day,
bf_resolution 60 s, bf_max_job_test = every job (an estimate for all). Figures: milliseconds
of this process's CPU time per cycle (p50, max over the rounds) and what the cycle decided.
Prints one JSON line per queue length; asserts nothing; not part of `make test`.

`--loop`: the cycle as the controller runs it (ranch/ctld/jobs/backfill.py, in-process as
bench/sched_bench.py builds it): `--nodes` 8-CPU nodes each busy with a job of 10-1200
minutes, `--pending` jobs of 1-8 whole nodes and 15 min to 1 day (every one tested:
bf_max_job_test above the queue), one cycle under trio while a
task wakes every millisecond. Figures: CPU ms of the snapshot, plan and commit; then one cycle
as ranch/ctld/jobs/backfill.py runs it (`cycle`: the snapshot and the plan on the loop in
20 ms slices, the commit whole), its wall time and the longest the task waited past its
wake-up (the event loop's longest stall), with the longest steps of any task, each named by
the lines its task stood at before and after (bench/fleet_lib/longsteps.py), and the
collector's passes during the cycle.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ranch.sched.backfill import Params, plan  # noqa: E402
from ranch.sched.fifo import Cluster, Queued  # noqa: E402
from ranch.sched.model import (  # noqa: E402
    UP,
    Ending,
    Need,
    Node,
    NodeUse,
    Partition,
    Pending,
    Planned,
    Share,
    Start,
)

NOW = 1_800_000_000.0
CPUS, MEM = 32, 256_000


def cluster(nodes: int, rng: random.Random, idle: float) -> tuple[Cluster, list[Ending]]:
    names = [f"n{i:05d}" for i in range(nodes)]
    by_name = {n: Node(n, CPUS, MEM, 4 if i % 10 == 0 else 0, frozenset(), UP)
               for i, n in enumerate(names)}
    uses: dict[str, NodeUse] = {}
    ends: list[Ending] = []
    jid = 10_000_000
    i = 0
    while i < nodes:
        if rng.random() < idle:
            i += 1
            continue
        if rng.random() < 0.25:  # a node shared by a few small jobs
            name, left = names[i], CPUS
            while left:
                c = min(left, rng.choice([1, 2, 4, 8, 16]))
                share = Share(c, c * 4000)
                uses.setdefault(name, NodeUse()).add(jid, share)
                ends.append(Ending(NOW + rng.uniform(60, 26 * 3600), jid, {name: share}))
                jid, left = jid + 1, left - c
            i += 1
            continue
        width = min(nodes - i, rng.choice([1, 1, 2, 4, 8, 16]))
        shares = {names[j]: Share(CPUS, MEM // 2) for j in range(i, i + width)}
        for name, share in shares.items():
            uses.setdefault(name, NodeUse()).add(jid, share)
        ends.append(Ending(NOW + rng.uniform(60, 26 * 3600), jid, shares))
        jid, i = jid + 1, i + width
    part = Partition("main", True, 1440, (nodes, nodes * CPUS))
    return Cluster(by_name, {"main": part}, {"main": names}, uses, {}, {"main"}), ends


def queue(pending: int, nodes: int, rng: random.Random, diverse: bool) -> list[Queued]:
    out = []
    for k in range(pending):
        if diverse:  # every job its own shape: the planner's memo of shapes helps least
            out.append(Queued(Pending(
                k + 1, "main", Need(rng.randint(1, 8), rng.randint(1, CPUS),
                                    rng.randint(0, MEM // 1000) * 1000, 0),
                priority=pending - k, time_limit=rng.randint(1, 1440),
                uid=rng.randrange(50))))
            continue
        if rng.random() < 0.25:
            procs = 1
        else:  # p50 8, p90 64 over all jobs; four in five a power of two
            e = rng.choices(range(1, 10), weights=[5, 5, 5, 8, 8, 8, 2, 2, 2])[0]
            procs = 2 ** e if rng.random() < 0.8 else rng.randint(2 ** (e - 1) + 1, 2 ** e)
        n = max(1, -(-procs // CPUS))
        n = min(n, nodes)
        cpus = procs if n == 1 else CPUS
        gpus = rng.choice([1, 2, 4]) if rng.random() < 0.1 else 0
        need = Need(n, cpus, cpus * 2000, gpus)
        limit = rng.choice([15, 60, 60, 240, 240, 1440])
        out.append(Queued(Pending(k + 1, "main", need, priority=pending - k, time_limit=limit,
                                  uid=rng.randrange(50), num_nodes=n)))
    return out


def run(pending: int, nodes: int, rounds: int, profile: bool, idle: float = 0.0,
        diverse: bool = False) -> dict:
    rng = random.Random(42)
    c, ends = cluster(nodes, rng, idle)
    q = queue(pending, nodes, rng, diverse)
    params = Params(window=1440, resolution=60, max_job_test=0)
    times, got = [], ()
    for _ in range(rounds):
        t0 = time.process_time()
        got = plan(c, q, ends, NOW, params)
        times.append((time.process_time() - t0) * 1000)
    if profile:
        prof = cProfile.Profile()
        prof.runcall(plan, c, q, ends, NOW, params)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(18)
    planned = [e for e in got if isinstance(e, Planned)]
    return {"pending": pending, "nodes": nodes, "idle": idle, "diverse": diverse,
            "running": len(ends),
            "cycle_ms_p50": round(statistics.median(times), 1),
            "cycle_ms_max": round(max(times), 1),
            "started": sum(isinstance(e, Start) for e in got), "planned": len(planned),
            "no_estimate": len(got) - len(planned) - sum(isinstance(e, Start) for e in got),
            "last_planned_h": round((max(e.start for e in planned) - NOW) / 3600, 1)
            if planned else None}


LOOP_CONF = """\
ClusterName=bench
SlurmctldHost=ctl(127.0.0.1)
MaxJobCount=200000
SchedulerType=sched/backfill
SchedulerParameters=bf_max_job_test=1000000,bf_window=1440,bf_resolution=60
NodeName=n[1-{nodes}] CPUs=8 RealMemory=16000
PartitionName=main Nodes=n[1-{nodes}] Default=YES MaxTime=1440
"""


def loop(pending: int, nodes: int) -> dict:
    """One controller cycle over `pending` jobs, timed against the event loop."""
    import trio

    sys.path.insert(0, str(ROOT / "bench"))
    import sched_bench
    from fleet_lib.longsteps import LongSteps

    from ranch.ctld import gctune

    gctune.configure()  # the collector as rctld sets it (full passes over 50,000 jobs are rare)
    sched_bench.CONF = LOOP_CONF
    out: dict = {"pending": pending, "nodes": nodes, "loop": True}
    worst = [0.0]

    async def main() -> None:
        c = sched_bench.build(nodes, busy=False)
        rng = random.Random(42)
        submit = c.jobs.submission.submit
        for _ in range(nodes):  # every node busy, each job ending within the window
            submit(sched_bench.job(cpus_per_task=8, time_limit=rng.randint(10, 1200)))
        held, c.jobs.submission._run_pass = c.jobs.submission._run_pass, lambda: None
        for _ in range(pending):  # each submission would run the pass: held back
            submit(sched_bench.job(num_nodes=rng.choice([1, 1, 1, 2, 4, 8]),
                                   time_limit=rng.choice([15, 60, 240, 1440])))
        c.jobs.submission._run_pass = held
        bf = c.jobs.backfill
        t0 = time.process_time()
        snap = bf.snapshot()
        out["snapshot_cpu_ms"] = round((time.process_time() - t0) * 1000, 1)
        t0 = time.process_time()
        est = snap.plan()
        out["plan_cpu_ms"] = round((time.process_time() - t0) * 1000, 1)
        out["planned"] = sum(isinstance(e, Planned) for e in est)
        t0 = time.process_time()
        bf.commit(snap, est)
        out["commit_cpu_ms"] = round((time.process_time() - t0) * 1000, 1)

        for name, run in (("cycle", bf.cycle),):
            worst[0] = 0.0
            done = trio.Event()

            async def watch() -> None:
                while not done.is_set():  # noqa: B023 (each round's own event, awaited)
                    t = time.perf_counter()
                    await trio.sleep(0.001)
                    worst[0] = max(worst[0], time.perf_counter() - t - 0.001)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                await trio.sleep(0.01)
                t = time.perf_counter()
                with LongSteps() as probe:
                    await run()
                out[f"{name}_wall_ms"] = round((time.perf_counter() - t) * 1000, 1)
                done.set()
            out[f"{name}_max_stall_ms"] = round(worst[0] * 1000, 1)
            out.update(probe.report())  # what held the loop: its stretches of code, the GC

    trio.run(main)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pending", type=int, nargs="*", default=[10_000, 50_000])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--idle", type=float, default=0.0, help="share of nodes idle")
    ap.add_argument("--diverse", action="store_true", help="every job its own shape")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--loop", action="store_true", help="the controller's cycle, timed")
    a = ap.parse_args()
    if a.loop:
        for pending in a.pending:
            print(json.dumps(loop(pending, a.nodes)), flush=True)
        return
    for pending in a.pending:
        print(json.dumps(run(pending, a.nodes, a.rounds, a.profile, a.idle, a.diverse)),
              flush=True)


if __name__ == "__main__":
    main()
