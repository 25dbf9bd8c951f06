"""The controller's one deadline task (ctld/deadlines.py) on trio's MockClock: a deadline after a
quiet spell fires on time; in a busy stretch the task wakes at most once every GATHER and takes
every key due by then, none later than GATHER past its time; rescheduled and cancelled keys
never fire on their old time."""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from functools import partial

import trio
import trio.testing

from ranch.ctld.deadlines import GATHER, Deadlines


async def test_quiet_deadlines_fire_on_time_and_busy_ones_gather(
        autojump_clock: trio.testing.MockClock) -> None:
    deadlines = Deadlines()
    fired: list[tuple[float, list[Hashable]]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(deadlines.run, lambda keys: fired.append((trio.current_time(), keys)))
        start = trio.current_time()
        deadlines.schedule("a", start + 5.0)
        await trio.sleep(6.0)
        assert fired == [(start + 5.0, ["a"])]  # quiet: on time
        fired.clear()
        t = trio.current_time()
        # a busy stretch: one key every 5 ms, 20 of them
        for i in range(20):
            deadlines.schedule(i, t + 1.0 + i * 0.005)
        deadlines.schedule("moved", t + 1.01)
        deadlines.schedule("moved", t + 3.0)  # its old time never fires
        deadlines.schedule("gone", t + 1.02)
        deadlines.cancel("gone")
        await trio.sleep(2.0)
        wakes = [when for when, _ in fired]
        assert wakes[0] == t + 1.0  # the first after a quiet spell: on time
        assert all(b - a >= GATHER - 1e-9 for a, b in itertools.pairwise(wakes))
        keys = [k for _, ks in fired for k in ks]
        assert keys == list(range(20))  # each once, in their order
        for when, ks in fired:
            for k in ks:
                assert t + 1.0 + k * 0.005 <= when <= t + 1.0 + k * 0.005 + GATHER + 1e-9
        assert len(fired) < 10  # gathered: 20 keys, not 20 wake-ups
        fired.clear()
        await trio.sleep(2.0)
        assert fired == [(t + 3.0, ["moved"])]
        nursery.cancel_scope.cancel()


class _Steps(trio.abc.Instrument):
    """The times at which the task named `name` runs a step."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.times: list[float] = []

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name == self.name:
            self.times.append(trio.current_time())


async def test_a_quiet_deadline_wakes_the_task_once(
        autojump_clock: trio.testing.MockClock) -> None:
    """The gather and the next deadline are one wait: a firing after a quiet spell costs one
    wake-up, not a second one GATHER later (a quiet controller's deadlines come every second
    or two: heartbeats re-armed as they fire)."""
    deadlines = Deadlines()
    steps = _Steps("deadlines")
    fired: list[float] = []
    trio.lowlevel.add_instrument(steps)
    try:
        async with trio.open_nursery() as nursery:
            start = trio.current_time()
            nursery.start_soon(partial(deadlines.run, lambda keys: fired.append(
                trio.current_time())), name="deadlines")
            deadlines.schedule("a", start + 5.0)
            deadlines.schedule("b", start + 10.0)
            await trio.sleep(12.0)
            # a key scheduled right after a firing still waits out the gather
            deadlines.schedule("c", trio.current_time() + 1.0)
            await trio.sleep(1.0 + GATHER / 2)
            deadlines.schedule("d", trio.current_time())
            await trio.sleep(1.0)
            nursery.cancel_scope.cancel()
    finally:
        trio.lowlevel.remove_instrument(steps)
    c = start + 13.0
    assert fired == [start + 5.0, start + 10.0, c, c + GATHER]
    # its first step, one per firing, and the cancellation at the end
    assert steps.times[1:-1] == fired, steps.times
