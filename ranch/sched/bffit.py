"""Backfill's view of running jobs: per node what is free now and what frees at each later
slot, and for each per-node request the nodes that hold it from each slot on (bitmasks)."""

from __future__ import annotations

import bisect
import copy
from collections.abc import Mapping, Sequence

from ranch.sched.model import Ending, Need, Node, NodeUse, Share

NEVER = 1 << 62  # a slot no window reaches: held by a job with no end, or too small a node
Sig = tuple[int, int, int, bool]  # cpus, memory, GPUs per node; whole node


def sig_of(need: Need) -> tuple[Sig, int]:
    """What one node must hold and how many nodes, as the planner reads a request: a spread
    job's per node is one task's CPUs, with its GPUs per node (`gpus`: one task's under
    --gpus-per-task, else the GPUs each node gives it, as place.share_on takes them)."""
    if need.spread:
        gpus = max(need.gpus, need.gpus_per_task)
        return (need.cpus_per_task, need.mem, gpus, need.exclusive), max(1, need.nodes)
    return (need.cpus, need.mem, need.gpus, need.exclusive), need.nodes


CPUS, MEM, GPUS, JOBS = range(4)  # a node's free resources by dimension; JOBS: jobs on it


class Timelines:
    """Nodes by bit index. Each node's free cpus/mem/GPUs and job count now, and its releases:
    (slot, cpus, mem, GPUs, jobs) as running jobs reach their end bounds. Free resources only
    grow over the window, each dimension on its own, so a node holds a request from the
    latest of the slots at which each dimension reaches it: one table per dimension and
    threshold (the sorted slots at which nodes reach it, the cumulative mask of nodes by each),
    shared by every request that names that amount, brought up to date as jobs start when it
    is next read (a start only logs its node: most tables of a queue of diverse requests are
    never read again, and eager updates of every table at every start cost 40 % of a cycle)."""

    def __init__(self, nodes: Sequence[Node], uses: Mapping[str, NodeUse],
                 releases: Mapping[str, list[tuple[int, int, int, int, int]]],
                 exact: Mapping[str, list[tuple[int, int, int, int, int]]] | None = None
                 ) -> None:
        self.nodes = nodes
        # the same releases to the second (Slurm's will_run start is a running job's
        # end_time, not its slot), for the start a plan shows: see since()
        self.exact = [sorted((exact or {}).get(n.name, ())) for n in nodes]
        self.caps = [(n.cpus, n.real_memory, n.gpus) for n in nodes]
        self.free: list[list[int]] = []
        self.rel: list[list[tuple[int, int, int, int, int]]] = []
        for n in nodes:
            u = uses.get(n.name)
            self.free.append([n.cpus - (u.cpus if u else 0), n.real_memory - (u.mem if u else 0),
                              n.gpus - (len(u.gpus) if u else 0), len(u.jobs) if u else 0])
            self.rel.append(sorted(releases.get(n.name, ())))
        # every node's releases by slot: the nodes something frees on at each
        self.rel_at: dict[int, int] = {}
        for i, rel in enumerate(self.rel):
            for r in rel:
                self.rel_at[r[0]] = self.rel_at.get(r[0], 0) | 1 << i
        self.rel_slots = sorted(self.rel_at)
        self.later: list[int] | None = None  # next_release's index, made when read
        self.tables: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        self.at: dict[tuple[int, int], list[int]] = {}  # per table, each node's reach slot
        self.synced: dict[tuple[int, int], int] = {}  # per table, how much of `log` it holds
        self.log: list[int] = []  # the nodes jobs started on, in order
        self.until: list[int] = []  # and the slots those jobs end by
        self.opens: list[int] = []  # where in `log` a job with no end started
        # per amount, the nodes that have it free now and how much of `log` that has seen:
        # a start now only takes from its nodes (most jobs read no more than this)
        self.nows: dict[tuple[int, int], list[int]] = {}
        self.keyed: dict[Sig, list[tuple[int, int]]] = {}  # keys(sig), memoised

    def fork(self) -> Timelines:
        """A copy whose starts leave this one as it is."""
        other = copy.copy(self)
        other.free = [list(f) for f in self.free]
        other.rel = [list(r) for r in self.rel]
        other.rel_at, other.rel_slots = dict(self.rel_at), list(self.rel_slots)
        other.exact = [list(r) for r in self.exact]
        other.tables = {k: (list(s), list(m)) for k, (s, m) in self.tables.items()}
        other.at = {k: list(a) for k, a in self.at.items()}
        other.synced, other.log = dict(self.synced), list(self.log)
        other.until, other.opens = list(self.until), list(self.opens)
        other.nows = {k: list(v) for k, v in self.nows.items()}
        return other

    def reach(self, i: int, dim: int, x: int) -> int:
        """The first slot from which node `i` has `x` free in `dim` (JOBS: no job on it),
        0 for now, or NEVER."""
        if dim != JOBS and x > self.caps[i][dim]:
            return NEVER
        free = self.free[i][dim]
        if (free == 0) if dim == JOBS else free >= x:
            return 0
        for r in self.rel[i]:
            if dim == JOBS:
                free -= r[4]
                if free == 0:
                    return r[0]
            else:
                free += r[dim + 1]
                if free >= x:
                    return r[0]
        return NEVER

    def free_at(self, i: int, slot: int) -> tuple[int, int, int, int]:
        """Node `i`'s free cpus, mem, GPUs and its job count at `slot`."""
        fc, fm, fg, fj = self.free[i]
        for s, dc, dm, dg, dj in self.rel[i]:
            if s > slot:
                break
            fc, fm, fg, fj = fc + dc, fm + dm, fg + dg, fj - dj
        return fc, fm, fg, fj

    def next_release(self, mask: int, slot: int) -> int | None:
        """The first slot after `slot` at which any node of `mask` frees something."""
        slots, at = self.rel_slots, self.rel_at
        j = bisect.bisect_right(slots, slot)
        later = self.later
        if later is None:  # per slot, the nodes that free something then or after
            later, acc = [0] * (len(slots) + 1), 0
            for k in range(len(slots) - 1, -1, -1):
                acc |= at[slots[k]]
                later[k] = acc
            self.later = later
        if not later[j] & mask:  # the nodes that hold a job now often free nothing later
            return None
        for k in range(j, len(slots)):
            if at[slots[k]] & mask:
                return slots[k]
        return None

    def table(self, key: tuple[int, int]) -> tuple[list[int], list[int]]:
        got = self.tables.get(key)
        if got is None:
            dim, x = key
            free = self.free  # reach()'s first test inlined: most nodes have it now or never
            reach = [0 if ((f[dim] == 0) if dim == JOBS else f[dim] >= x) else self.reach(i, dim, x)
                     for i, f in enumerate(free)]
            by: dict[int, int] = {}
            for i, s in enumerate(reach):
                if s != NEVER:
                    by[s] = by.get(s, 0) | (1 << i)
            slots = sorted(by)
            masks, acc = [], 0
            for s in slots:
                acc |= by[s]
                masks.append(acc)
            got = self.tables[key] = (slots, masks)
            self.at[key], self.synced[key] = reach, len(self.log)
        elif self.synced[key] < len(self.log):
            self._sync(key)
        return got

    def _sync(self, key: tuple[int, int]) -> None:
        """Bring a table up to the starts logged since it was last read: each node that
        reaches the amount later leaves the cumulative masks between its old and its new
        slot, all of them in one sweep (a start only makes a node reach later)."""
        at, (dim, x) = self.at[key], key
        moved = []
        free, since = self.free, self.synced[key]
        latest: dict[int, int] = {}  # per node started on, the last end of those starts
        for i, u in zip(self.log[since:], self.until[since:], strict=True):
            if latest.get(i, -1) < u:
                latest[i] = u
        for i, u in latest.items():
            old = at[i]
            # a start only lowers what the node has free before its end: one that reached
            # the amount by then (or never does, or does now still) has not moved
            if old == NEVER or u <= old or (old == 0 and dim != JOBS and free[i][dim] >= x):
                continue
            new = self.reach(i, dim, x)
            if new != at[i]:
                moved.append((i, at[i], new))
                at[i] = new
        self.synced[key] = len(self.log)
        if not moved:
            return
        slots, masks = self.tables[key]
        for _, _, new in moved:  # the new slots first, each with the cumulative mask before
            j = bisect.bisect_left(slots, new)
            if new != NEVER and (j == len(slots) or slots[j] != new):
                slots.insert(j, new)
                masks.insert(j, masks[j - 1] if j else 0)
        begin: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, old, new in moved:
            lo, hi = bisect.bisect_left(slots, old), bisect.bisect_left(slots, new)
            begin[lo] = begin.get(lo, 0) | 1 << i
            end[hi] = end.get(hi, 0) | 1 << i
        gone = 0
        for j in range(min(begin), min(max(end), len(slots))):
            gone = (gone | begin.get(j, 0)) & ~end.get(j, 0)
            if gone:
                masks[j] &= ~gone

    @staticmethod
    def keys(sig: Sig) -> list[tuple[int, int]]:
        c, m, g, whole = sig
        out = [(CPUS, c)]
        if m:
            out.append((MEM, m))
        if g:
            out.append((GPUS, g))
        if whole:
            out.append((JOBS, 0))
        return out

    def tables_of(self, sig: Sig) -> list[tuple[list[int], list[int]]]:
        """The tables of a request's amounts, up to date."""
        keys = self.keyed.get(sig)
        if keys is None:
            keys = self.keyed[sig] = self.keys(sig)
        return [self.table(key) for key in keys]

    def holding(self, sig: Sig, slot: int) -> tuple[int, int | None]:
        """(the nodes holding `sig` at `slot`, the next slot at which more might, or None)."""
        mask, nxt = -1, None
        keys = self.keyed.get(sig)
        if keys is None:
            keys = self.keyed[sig] = self.keys(sig)
        tables, logged, synced = self.tables, len(self.log), self.synced
        for key in keys:  # the hot path of a search: table() inlined
            got = tables.get(key)
            if got is None or synced[key] < logged:
                got = self.table(key)
            slots, masks = got
            j = bisect.bisect_right(slots, slot)
            mask &= masks[j - 1] if j else 0
            if j < len(slots) and (nxt is None or slots[j] < nxt):
                nxt = slots[j]
        return mask, nxt

    def ever(self, sig: Sig) -> int:
        """The nodes that come to hold `sig` at some time. A start with an end only moves a
        node's reach later, never to NEVER: a table need not catch up unless a job with no
        end started since."""
        mask, opens = -1, self.opens
        for key in self.keys(sig):
            got = self.tables.get(key)
            if got is None or (opens and opens[-1] >= self.synced[key]):
                got = self.table(key)
            masks = got[1]
            mask &= masks[-1] if masks else 0
        return mask

    def now(self, sig: Sig) -> int:
        """The nodes that hold `sig` now (holding(sig, 0)'s mask)."""
        keys = self.keyed.get(sig)
        if keys is None:
            keys = self.keyed[sig] = self.keys(sig)
        mask, log, free = -1, self.log, self.free
        for key in keys:
            dim, x = key
            got = self.nows.get(key)
            if got is None:
                got = self.nows[key] = [0, len(log)]
                for i, f in enumerate(free):
                    if (f[dim] == 0) if dim == JOBS else f[dim] >= x:
                        got[0] |= 1 << i
            elif got[1] < len(log):
                for i in log[got[1]:]:
                    if (free[i][dim] != 0) if dim == JOBS else free[i][dim] < x:
                        got[0] &= ~(1 << i)
                got[1] = len(log)
            mask &= got[0]
        return mask

    def since(self, i: int, sig: Sig, now: int) -> int | None:
        """The second from which node `i` holds `sig` (`now` if it does now; None: never
        known to the second). Free resources only grow, so the first such release."""
        c, m, g, whole = sig
        fc, fm, fg, fj = self.free[i]
        if fc >= c and fm >= m and fg >= g and not (whole and fj):
            return now
        for at, dc, dm, dg, dj in self.exact[i]:
            fc, fm, fg, fj = fc + dc, fm + dm, fg + dg, fj - dj
            if fc >= c and fm >= m and fg >= g and not (whole and fj):
                return at
        return None

    def latest(self, i: int, slot: int, slots) -> int | None:
        """The last second at which node `i` frees something in `slot` (`slots`: a second's
        slot), or None."""
        out = None
        for at, *_ in self.exact[i]:
            if slots(at) == slot:
                out = at
        return out

    def start(self, i: int, share: Share, until: int, at: int | None = None) -> None:
        """A job starts on node `i` now with `share` and ends by slot `until` (the second
        `at`)."""
        f = self.free[i]
        f[0] -= share.cpus
        f[1] -= share.mem
        f[2] -= len(share.gpus)
        f[3] += 1
        bisect.insort(self.rel[i], (until, share.cpus, share.mem, len(share.gpus), 1))
        got = self.rel_at.get(until)
        if got is None:
            bisect.insort(self.rel_slots, until)
        self.rel_at[until] = (got or 0) | 1 << i
        self.later = None
        if at is not None:
            bisect.insort(self.exact[i], (at, share.cpus, share.mem, len(share.gpus), 1))
        self.log.append(i)  # the tables catch up when read (table)
        self.until.append(until)
        if until >= NEVER:
            self.opens.append(len(self.log) - 1)


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
