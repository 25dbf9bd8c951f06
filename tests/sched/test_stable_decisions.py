"""Same inputs, same decisions (issue 44): the FIFO pass and the backfill planner, each run on
inputs that are equal but built in another order (the node table, what each node holds, the
running jobs' ends, the windows: dicts and lists a controller fills in whatever order events
came), give the same starts, reservations and reasons; and the explanation of every job is the
same too. Ties between equal nodes fall to placement order, never to a dict's history."""

from __future__ import annotations

import random

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.sched.backfill import plan
from ranch.sched.fifo import schedule
from ranch.sched.model import Planned, Start
from ranch.sched.why import Scene, explain

from .test_backfill_properties import key, scenes


def shuffled(rng: random.Random, c, ends, windows):
    """The same cluster, running jobs and windows, every mapping and list refilled in a
    random order (the placement order, members, is an input: kept)."""

    def mix(d: dict) -> dict:
        items = list(d.items())
        rng.shuffle(items)
        return dict(items)

    uses = {n: u.copy() for n, u in mix(dict(c.uses)).items()}
    for u in uses.values():
        jobs = list(u.jobs)
        rng.shuffle(jobs)
        u.jobs = set(jobs)
    ends = list(ends)
    rng.shuffle(ends)
    windows = list(windows)
    rng.shuffle(windows)
    return (attrs.evolve(c, nodes=mix(dict(c.nodes)), partitions=mix(dict(c.partitions)),
                         uses=uses, holders=mix(dict(c.holders))), ends, windows)


@settings(max_examples=150, deadline=None)
@given(scenes(), st.randoms(use_true_random=False))
def test_the_planner_decides_the_same_on_equal_inputs_in_another_order(scene, rng) -> None:
    c, queue, ends, windows, params, now = scene
    first = plan(c, queue, ends, now, params, windows)
    c2, ends2, windows2 = shuffled(rng, c, ends, windows)
    again = plan(c2, queue, ends2, now, params, windows2)
    assert [key(e) for e in again] == [key(e) for e in first]
    assert [getattr(e, "reason", "") for e in again] == [getattr(e, "reason", "") for e in first]
    assert [_fifo(d) for d in schedule(c2, queue)] == [_fifo(d) for d in schedule(c, queue)]


def _fifo(d) -> tuple:
    shares = sorted(getattr(d, "shares", {}).items())
    return (type(d).__name__, d.job_id, getattr(d, "partition", ""), shares,
            getattr(d, "reason", ""))


@settings(max_examples=40, deadline=None)
@given(scenes(), st.randoms(use_true_random=False))
def test_the_explanation_is_the_same_on_equal_inputs_in_another_order(scene, rng) -> None:
    c, queue, ends, windows, params, now = scene
    c2, ends2, windows2 = shuffled(rng, c, ends, windows)
    one = Scene(c, tuple(queue), tuple(ends), now, params, tuple(windows))
    two = Scene(c2, tuple(queue), tuple(ends2), now, params, tuple(windows2))
    for q in queue:
        a, b = explain(one, q.job.id), explain(two, q.job.id)
        assert a == b
        assert a.reason and a.binding  # every job is explained


@settings(max_examples=60, deadline=None)
@given(scenes())
def test_the_estimate_explained_is_the_planners_and_a_fork_leaves_its_cycle_alone(scene) -> None:
    """explain plans the jobs ahead once and tries each change on a fork of that cycle: its
    estimate is the one the planner gives over the queue up to the job (bf_max_* lifted), and
    the suggestions' tries change nothing the next job's estimate reads."""
    c, queue, ends, windows, params, now = scene
    lifted = attrs.evolve(params, max_job_test=0, max_job_user=0, max_job_part=0)
    whole = plan(c, queue, ends, now, lifted, windows)
    s = Scene(c, tuple(queue), tuple(ends), now, params, tuple(windows))
    for q, e in zip(queue, whole, strict=True):
        got = explain(s, q.job.id)
        if isinstance(e, Start):
            assert got.start == now and set(got.nodes) == set(e.shares)
        elif isinstance(e, Planned):
            assert got.start == max(e.start, now) and got.nodes == e.nodes
        else:
            assert got.start is None
        for tip in got.suggestions:
            assert tip.start < (got.start if got.start is not None else float("inf"))
