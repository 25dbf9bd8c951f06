"""The backfill planner's fast paths against plain references on random small scenes: the
same estimates, job for job. The search walks only the ends that free enough of a whole-node
job's nodes (bfsearch.py); the reference tests every slot of the window. The fit tables catch
up on starts and serve "holds it now" and "ever holds it" from partial state, and a spread
job's next release comes from an index by slot (bffit.py); the reference rebuilds each table
from the nodes whenever it is read and looks at each node's releases."""

from __future__ import annotations

from unittest import mock

import attrs
from hypothesis import given, settings

from ranch.sched import backfill
from ranch.sched.bffit import NEVER, Sig, Timelines
from ranch.sched.bfsearch import BEYOND, search

from .test_backfill_properties import key, scenes


class Plain(Timelines):
    """Timelines with every table built afresh when read."""

    def table(self, key: tuple[int, int]) -> tuple[list[int], list[int]]:
        dim, x = key
        by: dict[int, int] = {}
        for i in range(len(self.nodes)):
            s = self.reach(i, dim, x)
            if s != NEVER:
                by[s] = by.get(s, 0) | 1 << i
        slots, masks, acc = sorted(by), [], 0
        for s in slots:
            acc |= by[s]
            masks.append(acc)
        return slots, masks

    def holding(self, sig: Sig, slot: int) -> tuple[int, int | None]:
        mask, nxt = -1, None
        for k in self.keys(sig):
            slots, masks = self.table(k)
            later = [s for s in slots if s > slot]
            mask &= ([m for s, m in zip(slots, masks, strict=True) if s <= slot] or [0])[-1]
            if later and (nxt is None or later[0] < nxt):
                nxt = later[0]
        return mask, nxt

    def now(self, sig: Sig) -> int:
        return self.holding(sig, 0)[0]

    def next_release(self, mask: int, slot: int) -> int | None:
        later = [r[0] for i in range(len(self.nodes)) if mask >> i & 1
                 for r in self.rel[i] if r[0] > slot]
        return min(later, default=None)

    def ever(self, sig: Sig) -> int:
        return self.holding(sig, NEVER)[0]


def every_slot(cycle, job, sig, k, usable, req, minutes, t):
    """The first slot from `t` where enough nodes hold the job and are free of reservations
    and windows for its run, tested slot by slot. A job spread over nodes by tasks, and a
    cycle with a window shorter than a slot (it frees its nodes between the map's ends),
    keep the stepping search: the fast path leaves them to it."""
    if job.need.spread or k <= 0 or not cycle.ends_known:
        return search(cycle, job, sig, k, usable, req, minutes, t)
    span = cycle.clock.span(minutes)
    for s in range(t, cycle.clock.slots):
        held = cycle.lines.holding(sig, s)[0] & usable
        free = cycle.map.free(s, s + span) & ~cycle._windowed(cycle.clock.wall(s), minutes)
        if (held & free).bit_count() >= k and not req & ~(held & free):
            return s, cycle._choose(job, held & free, req, k, s)
    return BEYOND


@settings(max_examples=150, deadline=None)
@given(scenes())
def test_the_fast_planner_plans_as_the_plain_one(scene) -> None:
    c, queue, ends, windows, params, now = scene
    for p in (params, attrs.evolve(params, estimate_all=True, busy_nodes=True)):
        fast = [key(e) for e in backfill.plan(c, queue, ends, now, p, windows)]
        with mock.patch.object(backfill, "Timelines", Plain), \
                mock.patch.object(backfill, "search", every_slot):
            plain = [key(e) for e in backfill.plan(c, queue, ends, now, p, windows)]
        assert fast == plain


@settings(max_examples=50, deadline=None)
@given(scenes())
def test_the_plan_in_slices_is_the_plan(scene) -> None:
    """steps() told that a pause is due after every job yields after each and plans as
    plan()."""
    c, queue, ends, windows, params, now = scene
    slices = backfill.steps(c, queue, ends, now, params, windows, lambda: True)
    paused = 0
    while True:
        try:
            next(slices)
            paused += 1
        except StopIteration as done:
            got = done.value
            break
    assert [key(e) for e in got] == [key(e) for e in backfill.plan(c, queue, ends, now, params,
                                                                   windows)]
    assert paused >= len(queue)
