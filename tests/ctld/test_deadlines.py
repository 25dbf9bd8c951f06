"""The controller's one deadline task (ctld/deadlines.py) on trio's MockClock: a deadline after a
quiet spell fires on time; in a busy stretch the task wakes at most once every GATHER and takes
every key due by then, none later than GATHER past its time; rescheduled and cancelled keys
never fire on their old time."""

from __future__ import annotations

import itertools
from collections.abc import Hashable

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
