"""Backfill's map of its window: slot by slot, the nodes no reservation holds (bitmasks)."""

from __future__ import annotations

import bisect
import copy
import math

import attrs


@attrs.frozen
class Clock:
    """The cycle's time grid: slot s is [origin + s*res, origin + (s+1)*res). As in Slurm's
    node_space map the origin is now rounded down to bf_resolution and the window ends at
    now + bf_window rounded down: `slots` slots. `now` is in whole seconds, as slurmctld's
    time(NULL): a job's end is its start + limit * 60 to the second in both."""

    now: float
    res: int
    slots: int

    @classmethod
    def of(cls, now: float, res: int, window: int) -> Clock:
        now = math.floor(now)
        origin = math.floor(now / res) * res
        end = math.floor((now + window) / res) * res
        return cls(now, res, max(1, int((end - origin) // res)))

    @property
    def origin(self) -> float:
        return math.floor(self.now / self.res) * self.res

    def after(self, at: float) -> int:
        """The first slot that begins at or after `at` (a job ending at `at` frees its share
        from then; never slot 0, which holds `now`)."""
        return max(1, math.ceil((at - self.origin) / self.res))

    def freed(self, at: float) -> int:
        """The slot from which a running job whose end bound is `at` frees its share. Slurm's
        end_time is whole seconds (start_time is time(NULL) when it starts, plus the limit):
        the fraction of a second Ranch's clock adds is not a later end."""
        return self.after(math.floor(at))

    def second(self, at: float) -> int:
        """The second from which a running job whose end bound is `at` frees its share, as
        will_run sees it: its whole-second end_time, or now + 1 for one already past it."""
        return max(math.floor(at), int(self.now) + 1)

    def held(self, at: float, minutes: int | None) -> tuple[int, int]:
        """The slots [a, b) a reservation for a start at the second `at` holds: Slurm's
        start_time and end_reserve (at + limit) both rounded down to bf_resolution, at least
        one slot (backfill.c, _add_reservation); no limit: past any window."""
        a = self.before(at)
        if minutes is None:
            return a, a + self.span(None)
        return a, max(a + 1, math.floor((at + minutes * 60 - self.origin) / self.res))

    def before(self, at: float) -> int:
        """The slot holding `at` (a window beginning at `at` holds its nodes from it)."""
        return max(0, math.floor((at - self.origin) / self.res))

    def through(self, at: float) -> int:
        """The end of the run of slots that begin at or before `at`: a job tested for a start
        now whose limit ends at `at` has in its way every reservation that begins by then, one
        that begins in that very second included (Slurm 22.05 backfill.c _attempt_backfill,
        the nodes it may use at start_res: `else if (node_space[j].begin_time <= end_time)`,
        end_time = start_res + time_limit * 60, not rounded; every begin_time is on the
        bf_resolution grid)."""
        return max(1, math.floor((at - self.origin) / self.res) + 1)

    def span(self, minutes: int | None) -> int:
        """Slots a job's reservation holds from a start on the grid: Slurm's end_reserve,
        start + time_limit * 60 rounded DOWN to bf_resolution, at least one slot
        (backfill.c: `end_reserve = (end_reserve / backfill_resolution) * ...` and
        _add_reservation's one-slot minimum); no limit: past any window."""
        if minutes is None:
            return 10 * self.slots + 10
        return max(1, minutes * 60 // self.res)

    def wall(self, slot: int) -> float:
        return self.origin + slot * self.res


class SlotMap:
    """Per slot of the window, the mask of nodes free of reservations: a segment tree of ANDs,
    so "which nodes are free over [a, b)" costs O(log slots) and a reservation of d slots
    O(d). Slots past the window are free, as in Slurm's map, which ends there. `ends` keeps
    the slots where some reservation ends: the only moments a node comes free again."""

    def __init__(self, slots: int, everyone: int) -> None:
        self.slots = slots
        size = 1
        while size < slots:
            size *= 2
        self.size = size
        self.everyone = everyone
        self.tree = [everyone] * (2 * size)
        self.ends: list[int] = []
        # per slot of `ends`, the nodes that come free there
        self.freed: dict[int, int] = {}

    def fork(self) -> SlotMap:
        other = copy.copy(self)
        other.tree, other.ends = list(self.tree), list(self.ends)
        other.freed = dict(self.freed)
        return other

    def block(self, a: int, b: int, mask: int) -> None:
        """Hold the nodes of `mask` over slots [a, b)."""
        a, b = max(a, 0), min(b, self.slots)
        if a >= b or not mask:
            return
        keep = ~mask
        tree = self.tree
        lo, hi = a + self.size, b + self.size
        tree[lo:hi] = [v & keep for v in tree[lo:hi]]
        while lo > 1:
            lo, hi = lo >> 1, ((hi - 1) >> 1) + 1
            for i in range(lo, hi):
                tree[i] = tree[2 * i] & tree[2 * i + 1]
        if b < self.slots:
            i = bisect.bisect_left(self.ends, b)
            if i == len(self.ends) or self.ends[i] != b:
                self.ends.insert(i, b)
            self.freed[b] = self.freed.get(b, 0) | mask

    def free(self, a: int, b: int) -> int:
        """The nodes free of reservations over all of [a, b)."""
        a, b = max(a, 0), min(b, self.slots)
        out = self.everyone
        tree = self.tree
        lo, hi = a + self.size, b + self.size
        while lo < hi:
            if lo & 1:
                out &= tree[lo]
                lo += 1
            if hi & 1:
                hi -= 1
                out &= tree[hi]
            lo >>= 1
            hi >>= 1
        return out

    def next_end(self, t: int) -> int | None:
        """The first slot after `t` where some node comes free."""
        i = bisect.bisect_right(self.ends, t)
        return self.ends[i] if i < len(self.ends) else None


def bits(mask: int) -> list[int]:
    """The indices of the set bits, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def lowest(mask: int, k: int) -> int:
    """The mask of the `k` lowest set bits (first fit in node order)."""
    out = 0
    for _ in range(k):
        low = mask & -mask
        out |= low
        mask ^= low
    return out
