"""The FIFO pass over random clusters and queues: never more than a node holds, only nodes a job
may use, and a partition never starts a job behind one that waits for resources."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.sched.features import matches_features
from ranch.sched.fifo import Queued, schedule
from ranch.sched.model import BOOTING, OFF, UP, Start, Wait

from .helpers import cluster, job, need, node, used

NAMES = [f"n{i}" for i in range(6)]


@st.composite
def scenes(draw):
    nodes = [node(n, cpus=draw(st.integers(1, 8)), mem=draw(st.sampled_from([500, 1000])),
                  gpus=draw(st.integers(0, 4)),
                  features=draw(st.sets(st.sampled_from(["x", "y"]))),
                  rank=draw(st.sampled_from([UP, UP, BOOTING, OFF, None])))
             for n in NAMES]
    parts = {"p": [n for n in NAMES if draw(st.booleans())] or ["n0"],
             "q": [n for n in NAMES if draw(st.booleans())] or ["n5"]}
    uses = {}
    for n in nodes:
        cpus = draw(st.integers(0, n.cpus))
        if cpus:
            uses[n.name] = used(cpus=cpus, mem=draw(st.integers(0, n.real_memory)),
                                gpus=set(range(draw(st.integers(0, n.gpus)))), jobs={1000})
    queue = []
    for i in range(draw(st.integers(1, 12))):
        spread = draw(st.booleans())
        tasks = draw(st.integers(1, 10))
        cpus = draw(st.integers(1, 4))  # a spread job's: one task's, as cpus_per_task is
        n = need(nodes=draw(st.integers(1, 3)), cpus=cpus, cpus_per_task=cpus if spread else 1,
                 mem=draw(st.sampled_from([0, 100, 600])), gpus=draw(st.integers(0, 2)),
                 exclusive=draw(st.booleans()) and not spread, spread=spread, tasks=tasks)
        req = tuple(draw(st.lists(st.sampled_from(NAMES), max_size=1)))
        exc = tuple(n for n in draw(st.lists(st.sampled_from(NAMES), max_size=2))
                    if n not in req)  # submission refuses a node both required and excluded
        queue.append(Queued(
            job(i + 1, draw(st.sampled_from(["p", "q"])), need=n, req_nodes=req, exc_nodes=exc,
                constraint=draw(st.sampled_from(["", "x", "x|y"])),
                ntasks=tasks if spread else 1),
            waits=draw(st.sampled_from(["", "", "", "JobHeldUser"]))))
    windows = {None: frozenset(draw(st.lists(st.sampled_from(NAMES), max_size=2)))}
    return cluster(nodes, parts, uses=uses, windows=windows), queue


@settings(max_examples=150, deadline=None)
@given(scenes())
def test_the_pass_keeps_its_promises(scene) -> None:
    c, queue = scene
    got = schedule(c, queue)
    assert got == schedule(c, queue)  # same inputs, same decisions
    assert [d.job_id for d in got] == [q.job.id for q in queue[: len(got)]]
    cpus = Counter({n: u.cpus for n, u in c.uses.items()})
    mem = Counter({n: u.mem for n, u in c.uses.items()})
    gpus = {n: list(u.gpus) for n, u in c.uses.items()}
    waiting: set[str] = set()
    for q, d in zip(queue, got, strict=False):
        if isinstance(d, Wait):
            assert d.reason
            if d.reason == "Resources" and not q.job.req_nodes and not q.waits:
                waiting.add(q.job.partition)
            continue
        assert not q.waits and d.partition == q.job.partition
        assert d.partition not in waiting  # nothing starts behind a job waiting for resources
        for name, share in d.shares.items():
            n = c.nodes[name]
            assert n.rank is not None and matches_features(q.job.constraint, n)
            assert name in c.members[d.partition] or name in q.job.req_nodes
            assert name not in q.job.exc_nodes and name not in c.windows[None]
            cpus[name] += share.cpus
            mem[name] += share.mem
            gpus.setdefault(name, []).extend(share.gpus)
        assert set(q.job.req_nodes) <= set(d.shares)
        assert len(d.shares) >= q.job.need.nodes
    for name, n in c.nodes.items():
        assert cpus[name] <= n.cpus and mem[name] <= n.real_memory
        assert len(gpus.get(name, [])) == len(set(gpus.get(name, [])))
        assert all(0 <= g < n.gpus for g in gpus.get(name, []))
    if len(got) < len(queue):
        assert waiting >= set(c.pending_parts)  # it stopped only when every partition waits
    assert isinstance(got, tuple) and all(isinstance(d, Start | Wait) for d in got)
