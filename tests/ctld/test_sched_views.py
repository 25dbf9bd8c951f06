"""The controller's pass decides what ranch/sched's schedule() decides over a plain copy of the
same nodes, allocations and queue: the views the job store hands the core hide nothing."""

from __future__ import annotations

import random
from collections import Counter

import attrs
import pytest

from ranch.ctld.jobs import schedviews
from ranch.protocol import messages as m
from ranch.sched.fifo import Cluster as Plain
from ranch.sched.fifo import Queued, schedule
from ranch.sched.model import Start

from .helpers import Cluster, FakeConn, hardware, make_config, wall

CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
NodeName=a[1-6] CPUs=4 RealMemory=1000 Gres=gpu:2 Feature=intel
NodeName=b[1-6] CPUs=8 RealMemory=2000 Feature=amd,ib Weight=5
PartitionName=main Nodes=a[1-6],b[1-6] Default=YES MaxTime=60
PartitionName=small Nodes=a[1-3] MaxTime=10
"""


def job(rng: random.Random) -> m.SubmitJob:
    kw: dict = {"time_limit": rng.choice([5, 5, 5, 30, 120]),
                "partition": rng.choice(["main", "main", "small", "small,main"])}
    shape = rng.randrange(6)
    if shape == 0:
        kw.update(ntasks=rng.randint(1, 12), max_nodes=0)
    elif shape == 1:
        kw.update(num_nodes=rng.randint(1, 3), cpus_per_task=rng.randint(1, 4))
    elif shape == 2:
        kw.update(gpus=rng.randint(1, 2), constraint="intel")
    elif shape == 3:
        kw.update(constraint=rng.choice(["amd&ib", "intel|amd"]), mem_mib=rng.choice([0, 600]))
    elif shape == 4:
        kw.update(nodelist=rng.choice(["a1", "b2", "a2,b3"]))
    else:
        kw.update(oversubscribe="USER", exclusive=rng.random() < 0.3)
    uid = rng.choice([1000, 1001])
    return m.SubmitJob("#!/bin/sh\ntrue\n", f"u{uid}", uid, uid, "/tmp", **kw)


def snapshot(c: Cluster) -> tuple[Plain, list[Queued]]:
    """The store and the records as plain dicts, each value made once."""
    starts = c.jobs.starts
    parts = {p.name: p for p in c.config.partitions}
    views = schedviews.NodeViews().over(c.nodes)
    made = schedviews.Partitions(parts, starts.members, starts._sizes)
    holders = schedviews.Holders(c.jobs.store.jobs)
    for j in c.jobs.store.jobs:
        holders[j]  # made now: plain data from here on
    plain = Plain(nodes={n: views[n] for n in c.nodes},
                  partitions={p: made[p] for p in parts},
                  members={p: [n.name for n in starts.members(pc)] for p, pc in parts.items()},
                  uses={n: u.copy() for n, u in c.jobs.store.uses.items()}, holders=dict(holders),
                  pending_parts=set(c.jobs.store.pending_parts))
    queue = []
    for j in c.jobs.store.pending:
        view = schedviews.pending(j)
        alts = []
        for name in j.alt_parts:  # -p small,main: as it would be submitted to main
            got = c.jobs.submission.check(attrs.evolve(j.req, partition=name))
            if not isinstance(got, m.Error):
                alts.append(attrs.evolve(view, partition=name, need=got.need,
                                         time_limit=got.time_limit, req_nodes=got.req_nodes,
                                         exc_nodes=got.exc_nodes))
        queue.append(Queued(view, alternatives=tuple(alts)))
    return plain, queue


def scene(seed: int) -> Counter[str]:
    """A random queue on a cluster with some jobs running; the pass's decisions checked
    against the core's over a plain copy. Returns how many of each decision there were."""
    rng = random.Random(seed)
    c = Cluster(make_config(text=CONF), wall=wall)
    for name in [f"a{i}" for i in range(1, 7)]:
        c.register(m.Register(name, hardware(cpus=4, mem=1000, gpus=2), 1.0, "0.1.0"),
                   FakeConn())
    for name in [f"b{i}" for i in range(1, 7)]:
        c.register(m.Register(name, hardware(cpus=8, mem=2000, gpus=0), 1.0, "0.1.0"),
                   FakeConn())
    for _ in range(10):  # some running already, as each submission's pass leaves them
        c.jobs.submission.submit(job(rng))
    submission = c.jobs.submission
    held, submission._run_pass = submission._run_pass, lambda: None  # no pass, then one pass
    for _ in range(25):
        submission.submit(job(rng))
    submission._run_pass = held
    plain, queue = snapshot(c)
    want = schedule(plain, queue)
    before = {j.id: j for j in c.jobs.store.pending}
    c.jobs.kick()
    c.jobs.starts.run()
    got = []
    for d in want:
        j = c.jobs.store.jobs[d.job_id]
        if isinstance(d, Start):
            assert j.state != "PENDING", (d, j.reason)
            assert (j.partition, j.shares) == (d.partition, d.shares)
        else:
            assert j.state == "PENDING" and j.reason == d.reason
        got.append(d.job_id)
    assert got == list(before)[: len(got)]
    return Counter(("start" if d.partition == queue[i].job.partition else "start elsewhere")
                   if isinstance(d, Start) else d.reason for i, d in enumerate(want))


@pytest.mark.parametrize("seed", range(8))
async def test_the_pass_decides_as_the_core_over_plain_data(seed: int) -> None:
    scene(seed)


async def test_the_scenes_cover_starts_and_the_reasons() -> None:
    """The seeds above are worth comparing: together they start jobs and leave each kind of
    reason."""
    seen: Counter[str] = Counter()
    for seed in range(8):
        seen += scene(seed)
    assert seen["start"] >= 10 and seen["start elsewhere"], seen
    assert {"Resources", "Priority", "PartitionTimeLimit"} <= set(seen), seen
