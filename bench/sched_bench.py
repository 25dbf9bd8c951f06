"""One scheduling pass over 10,000 pending jobs x 1,000 nodes, in-process (no sockets, no disk).

    python bench/sched_bench.py [--tree DIR] [--pending 10000] [--nodes 1000] [--rounds 5]

`--tree DIR` imports Ranch from another checkout (a `git archive main` export, say) so the same
script times before and after. Figures (median of the rounds, milliseconds of this process's
CPU time: the machine is shared, and a pass is all CPU):
  pass_start_ms  1,000 idle 8-CPU nodes, 10,000 one-CPU jobs: the pass starts 8,000 (each
                 allocated, its nodes told, LaunchJob pushed) and stops at the first that waits
  pass_wait_ms   every node busy; each job's reason computed: a quarter name a busy node (-w),
                 a quarter exceed MaxTime, a quarter ask more nodes than there are, a quarter
                 wait behind the first (Priority); a held job in a second partition keeps the pass
                 going to the end of the queue
  pass_wait_again_ms  the same pass run once more (nothing changed: what every event's pass
                 costs while the queue stands)
  core_wait_ms   pass_wait's queue through ranch/sched's schedule() from plain data alone
                 (only where the tree has ranch/sched)
Prints one JSON line; asserts nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

CONF = """\
ClusterName=bench
SlurmctldHost=ctl(127.0.0.1)
MaxJobCount=100000
NodeName=n[1-{nodes}] CPUs=8 RealMemory=16000
PartitionName=main Nodes=n[1-{nodes}] Default=YES MaxTime=60
PartitionName=spare Nodes=n1
"""


def _controller(config: Any) -> Any:
    """The in-process controller, the way the tree's own tests/ctld builds one."""
    from tests.ctld.helpers import Cluster

    return Cluster(config, wall=lambda: 1.7e9)


def build(nodes: int, busy: bool) -> Any:
    import trio  # noqa: F401  (the controller reads trio's clock)

    from ranch.conf.build import parse_config_text
    from ranch.protocol import messages as m
    from tests.ctld.helpers import FakeConn, hardware

    c = _controller(parse_config_text(CONF.format(nodes=nodes), path="/bench.conf"))
    for i in range(1, nodes + 1):
        c.register(m.Register(f"n{i}", hardware(cpus=8, mem=16000, gpus=0), 1.0, "0.1.0"),
                   FakeConn())
    if busy:
        for _ in range(nodes):
            c.jobs.submission.submit(job(cpus_per_task=8))
    return c


def job(**kw: Any) -> Any:
    from ranch.protocol import messages as m

    return m.SubmitJob("#!/bin/sh\ntrue\n", "alice", 1000, 1000, "/tmp", **kw)


def queue(c: Any, pending: int, mixed: bool, nodes: int) -> None:
    """Submit the pending jobs with the pass held back (each submission would run one)."""
    submission = c.jobs.submission
    held, submission._run_pass = submission._run_pass, lambda: None
    try:
        if mixed:
            c.jobs.submission.submit(job(partition="spare", hold=True))
        for i in range(pending):
            kind = i % 4 if mixed else 3
            kw: dict[str, Any] = {"time_limit": 30}
            if kind == 0:
                kw["nodelist"] = f"n{1 + i % nodes}"
            elif kind == 1:
                kw["time_limit"] = 120  # over MaxTime: PartitionTimeLimit
            elif kind == 2:
                kw["num_nodes"] = nodes + 1  # more than the partition has: PartitionNodeLimit
            reply = c.jobs.submission.submit(job(**kw))
            assert isinstance(reply, m_reply()), reply
    finally:
        submission._run_pass = held


def m_reply() -> type:
    from ranch.protocol import messages as m

    return m.SubmitReply


def timed_pass(c: Any) -> float:
    gc.collect()
    c.jobs.kick()
    t0 = time.process_time()
    c.jobs.starts.run()
    return (time.process_time() - t0) * 1000


def core_only(c: Any) -> float | None:
    """The same queue as plain data through ranch/sched's schedule()."""
    try:
        from ranch.ctld.jobs import schedviews
        from ranch.sched.fifo import Cluster, Queued, schedule
    except ImportError:
        return None
    starts = c.jobs.starts
    parts = {p.name: p for p in c.config.partitions}
    views = schedviews.NodeViews().over(c.nodes)
    made = schedviews.Partitions(parts, starts.members, starts._sizes)
    holders = schedviews.Holders(c.jobs.store.jobs)
    for use in c.jobs.store.uses.values():
        for j in use.jobs:
            holders[j]  # made now: plain data from here on
    plain = Cluster(
        nodes={n: views[n] for n in c.nodes},
        partitions={p: made[p] for p in parts},
        members={p: [n.name for n in starts.members(pc)] for p, pc in parts.items()},
        uses=dict(c.jobs.store.uses), holders=holders,
        pending_parts=set(c.jobs.store.pending_parts))
    todo = [Queued(schedviews.pending(j), waits="JobHeldUser" if j.held else "")
            for j in c.jobs.store.pending]
    gc.collect()
    t0 = time.process_time()
    schedule(plain, todo)
    return (time.process_time() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, default=ROOT)
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))  # tests.ctld.helpers
    sys.path.insert(0, str(args.tree.resolve()))  # ranch from the tree measured
    import trio

    out: dict[str, Any] = {"tree": str(args.tree), "pending": args.pending, "nodes": args.nodes}
    figures: dict[str, list[float]] = {
        "pass_start_ms": [], "pass_wait_ms": [], "pass_wait_again_ms": [], "core_wait_ms": []}

    async def rounds() -> None:
        for _ in range(args.rounds):
            c = build(args.nodes, busy=False)
            queue(c, args.pending, mixed=False, nodes=args.nodes)
            figures["pass_start_ms"].append(timed_pass(c))
            c = build(args.nodes, busy=True)
            queue(c, args.pending, mixed=True, nodes=args.nodes)
            core = core_only(c)
            if core is not None:
                figures["core_wait_ms"].append(core)
            figures["pass_wait_ms"].append(timed_pass(c))
            figures["pass_wait_again_ms"].append(timed_pass(c))

    trio.run(rounds)
    import ranch

    out["ranch"] = str(Path(ranch.__file__).parent)
    out.update({k: round(statistics.median(v), 1) for k, v in figures.items() if v})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
