"""A backfill job's search of the window: the first slot from which enough nodes hold it and
are free of reservations for its whole limit (ranch/sched/backfill.py plans with it)."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Protocol

from ranch.sched.bffit import Sig
from ranch.sched.model import Pending

BEYOND = "beyond bf_window"


class Cycle(Protocol):
    """What of backfill.py's Cycle this reads (named here, not imported: backfill imports
    this module)."""

    clock: Any
    lines: Any
    map: Any
    windows: list
    ends_known: bool

    def _windowed(self, start: float, minutes: int | None) -> int: ...
    def _choose(self, job: Pending, free: int, req: int, k: int, t: int) -> int: ...


def search(cycle: Cycle, job: Pending, sig: Sig, k: int, usable: int, req: int,
           minutes: int | None, t: int) -> tuple[int, int] | str:
    """Walk the moments something comes free (a running job's end bound, a reservation's
    end) from slot `t` to the window's end; the first where enough nodes hold the job,
    free of the reservations over [t, t + span) only, as Slurm tests a later start
    (backfill.c _test_resv_overlap: `begin_time < end_reserve`; a start now: _now)."""
    lines, smap, last = cycle.lines, cycle.map, cycle.clock.slots
    span = cycle.clock.span(minutes)
    spread = job.need.spread
    tables = lines.tables_of(sig)  # no job starts during a search: read them as they are
    windows = cycle.windows
    walk = not spread and k > 0 and cycle.ends_known
    while t < last:
        held, grows = holding(tables, t)
        held &= usable
        if held.bit_count() < k or req & ~held:
            if grows is None:
                break
            t = _skip_full(smap, tables, k, usable, req, span, grows) if walk else grows
            continue
        free = smap.free(t, t + span)
        if windows:
            free &= ~cycle._windowed(cycle.clock.wall(t), minutes)
        cand = free & held
        if walk:
            if cand.bit_count() >= k and not req & ~cand:
                return t, cycle._choose(job, cand, req, k, t)
            nxt = _walk(smap, held, grows, cand, k, req, span, t)
            if nxt is None:
                break
            # a start at an end found is tested next; at `grows` more nodes may hold it
            t = nxt if nxt != grows else _skip_full(smap, tables, k, usable, req, span, nxt)
            continue
        chosen = cycle._choose(job, cand, req, k, t)
        if chosen:
            return t, chosen
        if spread:  # how many tasks a node takes grows at each of its releases
            more = lines.next_release(held, t)
            if more is not None and (grows is None or more < grows):
                grows = more
        nxt = smap.next_end(t)
        if grows is None and nxt is None:
            break
        t = min(x for x in (grows, nxt) if x is not None)
        t = _skip_full(smap, tables, k, usable, req, span, t)
    return BEYOND


def _walk(smap: Any, held: int, grows: int | None, have: int, k: int, req: int, span: int,
          t: int) -> int | None:
    """The first slot after `t` and before `grows` (else `grows`) at which a job on `k`
    whole nodes (`req` among them) for `span` slots may start, windows aside (the caller
    tests them): until more nodes hold the job (`grows`), one of `held` joins the nodes
    `have` free over the run from `t` only where something on it ends (the map's `ends`,
    windows' ends among them: Cycle.ends_known), so an end that leaves too few of them free
    over the run from it is passed without a full test."""
    ends, freed, tree, leaf, last = smap.ends, smap.freed, smap.tree, smap.size, smap.slots
    for i in range(bisect_right(ends, t), len(ends)):
        e = ends[i]
        if grows is not None and e >= grows:
            return grows
        have |= freed[e] & held
        if have.bit_count() < k or req & ~have:
            continue
        ok = have & tree[leaf + min(e + span, last) - 1]  # the run's last slot: cheap
        if ok.bit_count() < k or req & ~ok:
            continue
        ok &= smap.free(e, e + span)
        if ok.bit_count() >= k and not req & ~ok:
            return e
    return grows


def _skip_full(smap: Any, tables: list, k: int, usable: int, req: int, span: int,
               t: int) -> int:
    """Skip the stretches where the job cannot start: for every start in [t, u) with
    u <= t + span, its nodes must hold it by u (resources only grow) and be free in slot
    u - 1 (inside every such run), so too few such nodes rule the whole stretch out."""
    last = smap.slots
    tree, leaf = smap.tree, smap.size - 1
    while t < last:
        u = min(t + span, last)
        free = tree[leaf + u] & usable  # the map's slot u - 1
        if free.bit_count() >= k and not req & ~free:
            held = holding(tables, u)[0] & free
            if held.bit_count() >= k and not req & ~held:
                return t
        t = u
    return t


def holding(tables: list, slot: int) -> tuple[int, int | None]:
    """Timelines.holding over the tables of one request, read as they are."""
    mask, nxt = -1, None
    for slots, masks in tables:
        j = bisect_right(slots, slot)
        mask &= masks[j - 1] if j else 0
        if j < len(slots) and (nxt is None or slots[j] < nxt):
            nxt = slots[j]
    return mask, nxt
