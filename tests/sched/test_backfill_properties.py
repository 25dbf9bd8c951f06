"""The backfill planner over random clusters, running jobs, windows and queues: an answer for
every job, no node over-allocated at any slot of the plan, no reservation shared, windows kept,
and no job started now delays a job ahead of it (replanned with the started jobs running, every
other job gets the very same start and nodes)."""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.sched.backfill import Params, node_order, plan
from ranch.sched.bfmap import Clock
from ranch.sched.features import matches_features
from ranch.sched.fifo import Queued
from ranch.sched.model import (
    BOOTING,
    OFF,
    UP,
    Ending,
    Holder,
    NodeUse,
    Planned,
    Share,
    Start,
    Unplanned,
    Window,
)

from .helpers import cluster, job, need, node

NAMES = [f"n{i}" for i in range(6)]
NOW = 1_700_000_100.0
SKIPS = {"bf_max_job_test", "bf_max_job_user", "bf_max_job_part"}


@st.composite
def running(draw, nodes):
    """Running jobs that fit the nodes: (uses, ends)."""
    free = {n.name: [n.cpus, n.real_memory, list(range(n.gpus))] for n in nodes}
    uses: dict[str, NodeUse] = {}
    ends = []
    for jid in range(1000, 1000 + draw(st.integers(0, 8))):
        shares = {}
        for name in draw(st.sets(st.sampled_from(NAMES), min_size=1, max_size=2)):
            f = free[name]
            cpus = draw(st.integers(0, f[0]))
            mem = draw(st.integers(0, f[1]))
            g = draw(st.integers(0, len(f[2])))
            gpus, f[2] = tuple(f[2][:g]), f[2][g:]
            f[0], f[1] = f[0] - cpus, f[1] - mem
            shares[name] = Share(cpus, mem, gpus)
            uses.setdefault(name, NodeUse()).add(jid, shares[name])
        end = draw(st.sampled_from([None, -30, 1, 59, 60, 61, 300, 300, 1439, 2000]))
        if end is not None:
            ends.append(Ending(NOW + end * 60 + draw(st.integers(0, 59)), jid, shares))
    return uses, ends


@st.composite
def scenes(draw):
    nodes = [node(n, cpus=draw(st.integers(1, 8)), mem=draw(st.sampled_from([500, 1000])),
                  gpus=draw(st.integers(0, 2)), features=draw(st.sets(st.sampled_from("xy"))),
                  rank=draw(st.sampled_from([UP, UP, UP, BOOTING, OFF, None])))
             for n in NAMES]
    parts = {"p": [n for n in NAMES if draw(st.booleans())] or ["n0"],
             "q": [n for n in NAMES if draw(st.booleans())] or ["n5"]}
    uses, ends = draw(running(nodes))
    queue = []
    for i in range(1, draw(st.integers(1, 12)) + 1):
        spread = draw(st.booleans())
        tasks = draw(st.integers(1, 10))
        cpus = draw(st.integers(1, 4))
        # a spread job's `cpus` is one task's, as cpus_per_task is (jobsubmit.py builds both
        # from --cpus-per-task): drawn apart, a task of 2 CPUs counted at 1 by the spread
        # placement was planned on a 1-CPU node it could never fit (found by a busy run)
        # and under --gpus-per-task its `gpus` is one task's as well (jobsubmit.py); without
        # it, the GPUs each node gives it (-n 2 --gres=gpu:1)
        gpt = draw(st.sampled_from([0, 0, 1])) if spread else 0
        n = need(nodes=draw(st.sampled_from([1, 1, 2, 3])), cpus=cpus,
                 cpus_per_task=cpus if spread else 1,
                 mem=draw(st.sampled_from([0, 0, 100, 600])),
                 gpus=gpt or draw(st.sampled_from([0, 0, 0, 1, 2])),
                 exclusive=draw(st.integers(0, 3)) == 0 and not spread, spread=spread, tasks=tasks,
                 max_nodes=draw(st.sampled_from([0, 3])) if spread else 0,
                 gpus_per_task=gpt)
        req = draw(st.sampled_from([(), (), ()] + [(n,) for n in NAMES[:2]]))
        queue.append(Queued(
            job(i, draw(st.sampled_from(["p", "q"])), need=n, req_nodes=req,
                exc_nodes=tuple(x for x in draw(st.lists(st.sampled_from(NAMES), max_size=1))
                                if x not in req),
                constraint=draw(st.sampled_from(["", "", "x"])), ntasks=tasks if spread else 1,
                time_limit=draw(st.sampled_from([1, 5, 30, 60, 61, 240, 1440, None])),
                priority=draw(st.integers(0, 9)), uid=draw(st.integers(0, 2)),
                user_exclusive=draw(st.booleans())),
            waits=draw(st.sampled_from(["", "", "", "", "Dependency"]))))
    windows = [Window(NOW + a * 60, NOW + (a + d) * 60,
                      frozenset(draw(st.sets(st.sampled_from(NAMES), max_size=3))))
               for a, d in draw(st.lists(st.tuples(st.integers(-60, 600), st.integers(1, 300)),
                                         max_size=2))]
    params = Params(window=draw(st.sampled_from([60, 240, 1440])),
                    resolution=draw(st.sampled_from([60, 300])),
                    max_job_test=draw(st.sampled_from([0, 3, 500])),
                    max_job_user=draw(st.sampled_from([0, 2])),
                    max_job_part=draw(st.sampled_from([0, 3])),
                    min_prio_reserve=draw(st.sampled_from([0, 0, 0, 5])))
    now = NOW + draw(st.integers(0, 299))
    return cluster(nodes, parts, uses=uses), queue, ends, windows, params, now


def key(e) -> tuple:
    if isinstance(e, Start):
        return ("start", e.job_id, e.partition, sorted(e.shares.items()))
    if isinstance(e, Planned):
        return ("plan", e.job_id, e.partition, e.start, e.nodes)
    return ("none", e.job_id, e.why)


def span_of(c, q, clock: Clock) -> int:
    limit = q.job.time_limit
    return clock.span(limit if limit is not None else c.partitions[q.job.partition].max_time)


@settings(max_examples=200, deadline=None)
@given(scenes())
def test_the_plan_keeps_its_promises(scene) -> None:
    c, queue, ends, windows, params, now = scene
    got = plan(c, queue, ends, now, params, windows)
    assert [key(e) for e in got] == [key(e) for e in plan(c, queue, ends, now, params, windows)]
    assert [e.job_id for e in got] == [q.job.id for q in queue]
    for q, e in zip(queue, got, strict=True):
        if isinstance(e, Unplanned):
            assert e.reason or e.why in SKIPS  # every job looked at has a reason
            assert e.why
        elif isinstance(e, Planned):
            assert e.reason and e.start > now and e.nodes
        else:
            assert not q.waits
    for q, e in zip(queue, got, strict=True):
        if isinstance(e, Start | Planned):
            _on_nodes_it_may_use(c, q, e)
    clock = Clock.of(now, params.resolution, params.window * 60)
    _no_overlap(c, queue, got, clock, windows)
    _no_over_allocation(c, queue, got, ends, clock)


def _on_nodes_it_may_use(c, q, e) -> None:
    names = e.nodes if isinstance(e, Planned) else tuple(e.shares)
    jb = q.job
    assert set(jb.req_nodes) <= set(names) and len(names) >= jb.need.nodes
    part = e.partition
    for name in names:
        n = c.nodes[name]
        assert n.rank is not None and matches_features(jb.constraint, n)
        assert name in c.members[part] or name in jb.req_nodes
        assert name not in jb.exc_nodes


def _limit(c, q) -> int | None:
    limit = q.job.time_limit
    return limit if limit is not None else c.partitions[q.job.partition].max_time


def _runs(c, queue, got, clock):
    """(position, job, kind, first slot, end slot, node names) of each start and plan."""
    for pos, (q, e) in enumerate(zip(queue, got, strict=True)):
        if isinstance(e, Start):
            limit = _limit(c, q)
            end = 10**9 if limit is None else clock.after(clock.now + 60 * limit)
            yield pos, q.job, "start", 0, end, tuple(e.shares)
        elif isinstance(e, Planned):
            # the reservation Slurm makes for a start at that second: start and end rounded
            # down to bf_resolution
            a, b = clock.held(e.start, _limit(c, q))
            yield pos, q.job, "plan", a, b, e.nodes


def _no_overlap(c, queue, got, clock, windows) -> None:
    """Within the window: a reserved node is no one else's while reserved; a start never runs
    on a node reserved for a job ahead of it; nothing runs in a window."""
    last = clock.slots
    runs = list(_runs(c, queue, got, clock))
    for pos, _job, _kind, a, b, nodes in runs:
        a, b = min(a, last), min(b, last)
        for w in windows:
            if w.end > clock.now:
                wa, wb = clock.before(w.begin), clock.after(w.end)
                assert not (set(nodes) & w.nodes and a < wb and wa < b)
        for pos2, _job2, kind2, a2, b2, nodes2 in runs:
            if pos2 >= pos or not set(nodes) & set(nodes2) or kind2 != "plan":
                continue
            a2, b2 = min(a2, last), min(b2, last)
            assert not (a < b2 and a2 < b), (pos, pos2)


def _no_over_allocation(c, queue, got, ends, clock) -> None:
    """At every slot of the window, what running, started and planned jobs hold on a node
    fits it (a planned spread job counted at one task a node, the least it takes), and a
    whole-node job is alone on its node."""
    shares = {e.job_id: e.shares for e in got if isinstance(e, Start)}
    e_start = {e.job_id: e.start for e in got if isinstance(e, Planned)}
    for n in node_order(c):
        use = c.uses.get(n.name, NodeUse())
        freed = [(clock.after(e.at), e.shares[n.name]) for e in ends
                 if n.name in e.shares and e.job_id in use.jobs]
        runs = []
        for _pos, jb, kind, a, b, nodes in _runs(c, queue, got, clock):
            if n.name not in nodes:
                continue
            nd = jb.need
            if kind == "start":
                sh = shares[jb.id][n.name]
                per = (sh.cpus, sh.mem, len(sh.gpus))
            elif nd.spread:
                per = (nd.cpus_per_task, nd.mem, nd.gpus_per_task)
            else:
                per = (nd.cpus, nd.mem, nd.gpus)
            if kind == "plan":  # it runs from its second on: the slot its nodes free in
                a = max(a, clock.after(e_start[jb.id]))
            runs.append((a, b, per, nd.exclusive))
        for s in range(clock.slots):
            gone = [sh for r, sh in freed if r <= s]
            live = [(per, whole) for a, b, per, whole in runs if a <= s < b]
            cpus = use.cpus - sum(sh.cpus for sh in gone) + sum(p[0] for p, _ in live)
            mem = use.mem - sum(sh.mem for sh in gone) + sum(p[1] for p, _ in live)
            gpus = len(use.gpus) - sum(len(sh.gpus) for sh in gone) + sum(p[2] for p, _ in live)
            assert cpus <= n.cpus and mem <= n.real_memory and gpus <= n.gpus, (n.name, s)
            if any(whole for _, whole in live):
                assert len(live) == 1 and len(use.jobs) == len(gone), (n.name, s)


@settings(max_examples=150, deadline=None)
@given(scenes())
def test_no_start_now_delays_a_job_ahead(scene) -> None:
    c, queue, ends, windows, params, now = scene
    params = attrs.evolve(params, max_job_test=0, max_job_user=0, max_job_part=0)
    got = plan(c, queue, ends, now, params, windows)
    started = {e.job_id: e for e in got if isinstance(e, Start)}
    if not started:
        return
    uses = {n: u.copy() for n, u in c.uses.items()}
    holders = dict(c.holders)
    ends2 = list(ends)
    for q in queue:
        s = started.get(q.job.id)
        if s is None:
            continue
        for name, share in s.shares.items():
            uses.setdefault(name, NodeUse()).add(q.job.id, share)
        holders[q.job.id] = Holder(q.job.uid, q.job.user_exclusive)
        limit = q.job.time_limit
        if limit is None:
            limit = c.partitions[s.partition].max_time
        if limit is not None:
            ends2.append(Ending(now + limit * 60, q.job.id, s.shares))
    c2 = attrs.evolve(c, uses=uses, holders=holders)
    rest = [q for q in queue if q.job.id not in started]
    again = plan(c2, rest, ends2, now, params, windows)
    # the same starts and nodes; those with no estimate keep none (why may differ: a job
    # started with no time limit is one no later job can outlast)
    before = [key(e)[:2] if isinstance(e, Unplanned) else key(e)
              for e in got if e.job_id not in started]
    assert [key(e)[:2] if isinstance(e, Unplanned) else key(e) for e in again] == before
