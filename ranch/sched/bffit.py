"""Backfill's view of running jobs: per node what is free now and what frees at each later
slot, and for each per-node request the nodes that hold it from each slot on (bitmasks)."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from ranch.sched.model import Ending, Node, NodeUse, Share

NEVER = 1 << 62  # a slot no window reaches: held by a job with no end, or too small a node
Sig = tuple[int, int, int, bool]  # cpus, memory, GPUs per node; whole node


class Timelines:
    """Nodes by bit index. Each node's free cpus/mem/GPUs/jobs now, and its releases: (slot,
    cpus, mem, GPUs, jobs) as running jobs reach their end bounds. `table(sig)` gives, for a
    per-node request, the sorted slots at which nodes come to hold it and the cumulative mask
    of nodes holding it by each; tables are kept up to date as jobs start."""

    def __init__(self, nodes: Sequence[Node], uses: Mapping[str, NodeUse],
                 releases: Mapping[str, list[tuple[int, int, int, int, int]]]) -> None:
        self.nodes = nodes
        self.free: list[list[int]] = []
        self.rel: list[list[tuple[int, int, int, int, int]]] = []
        for n in nodes:
            u = uses.get(n.name)
            self.free.append([n.cpus - (u.cpus if u else 0), n.real_memory - (u.mem if u else 0),
                              n.gpus - (len(u.gpus) if u else 0), len(u.jobs) if u else 0])
            self.rel.append(sorted(releases.get(n.name, ())))
        self.tables: dict[Sig, tuple[list[int], list[int]]] = {}

    def fit_slot(self, i: int, sig: Sig) -> int:
        """The first slot from which node `i` holds `sig` (0: now), or NEVER."""
        c, m, g, whole = sig
        node = self.nodes[i]
        if c > node.cpus or m > node.real_memory or g > node.gpus:
            return NEVER
        fc, fm, fg, fj = self.free[i]
        if (fj == 0) if whole else (fc >= c and fm >= m and fg >= g):
            return 0
        for slot, dc, dm, dg, dj in self.rel[i]:
            fc, fm, fg, fj = fc + dc, fm + dm, fg + dg, fj - dj
            if (fj == 0) if whole else (fc >= c and fm >= m and fg >= g):
                return slot
        return NEVER

    def free_at(self, i: int, slot: int) -> tuple[int, int, int, int]:
        """Node `i`'s free cpus, mem, GPUs and its job count at `slot`."""
        fc, fm, fg, fj = self.free[i]
        for s, dc, dm, dg, dj in self.rel[i]:
            if s > slot:
                break
            fc, fm, fg, fj = fc + dc, fm + dm, fg + dg, fj - dj
        return fc, fm, fg, fj

    def table(self, sig: Sig) -> tuple[list[int], list[int]]:
        got = self.tables.get(sig)
        if got is None:
            at: dict[int, int] = {}
            for i in range(len(self.nodes)):
                s = self.fit_slot(i, sig)
                if s != NEVER:
                    at[s] = at.get(s, 0) | (1 << i)
            slots = sorted(at)
            masks, acc = [], 0
            for s in slots:
                acc |= at[s]
                masks.append(acc)
            got = self.tables[sig] = (slots, masks)
        return got

    def holding(self, sig: Sig, slot: int) -> tuple[int, int | None]:
        """(the nodes holding `sig` at `slot`, the next slot at which more do, or None)."""
        slots, masks = self.table(sig)
        j = bisect.bisect_right(slots, slot)
        return (masks[j - 1] if j else 0), (slots[j] if j < len(slots) else None)

    def start(self, i: int, share: Share, until: int) -> None:
        """A job starts on node `i` now with `share` and ends by slot `until`."""
        before = {sig: self.fit_slot(i, sig) for sig in self.tables}
        f = self.free[i]
        f[0] -= share.cpus
        f[1] -= share.mem
        f[2] -= len(share.gpus)
        f[3] += 1
        bisect.insort(self.rel[i], (until, share.cpus, share.mem, len(share.gpus), 1))
        for sig, old in before.items():
            self._move(sig, i, old, self.fit_slot(i, sig))

    def _move(self, sig: Sig, i: int, old: int, new: int) -> None:
        """Node `i` holds `sig` from `new` on now, not `old` (new >= old: only starts)."""
        if new == old:
            return
        slots, masks = self.tables[sig]
        bit = 1 << i
        lo = bisect.bisect_left(slots, old)
        hi = bisect.bisect_left(slots, new)
        for j in range(lo, hi):
            masks[j] &= ~bit
        if new != NEVER and (hi == len(slots) or slots[hi] != new):
            slots.insert(hi, new)
            masks.insert(hi, (masks[hi - 1] if hi else 0) | bit)


def releases(ends: Sequence[Ending], uses: Mapping[str, NodeUse], slot_of
             ) -> dict[str, list[tuple[int, int, int, int, int]]]:
    """Per node, what each running job frees and when (`slot_of(at)`): only shares the node
    still counts (a job that ended holds nothing)."""
    out: dict[str, list[tuple[int, int, int, int, int]]] = {}
    for e in ends:
        slot = slot_of(e.at)
        for name, share in e.shares.items():
            use = uses.get(name)
            if use is None or e.job_id not in use.jobs:
                continue
            out.setdefault(name, []).append(
                (slot, share.cpus, share.mem, len(share.gpus), 1))
    return out
