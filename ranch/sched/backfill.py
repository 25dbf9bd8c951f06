"""sched/backfill's planning cycle over plain data: each pending job, in priority order, starts
now where that delays no reservation ahead of it, or gets the earliest start and the whole
nodes that are then reserved for it (Slurm 22.05's backfill.c, over a bitmask map)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Generator, Iterator, Sequence

from ranch.sched.bffit import NEVER, Sig, Timelines, releases, sig_of
from ranch.sched.bfmap import Clock, SlotMap, bits, lowest
from ranch.sched.bfparams import Params, node_order
from ranch.sched.bfpreempt import Preempting, planned_now
from ranch.sched.bfsearch import BEYOND, search
from ranch.sched.bfstart import second
from ranch.sched.features import NodeFilter, matches_features
from ranch.sched.fifo import RESERVED, Cluster, Queued
from ranch.sched.limits import job_over
from ranch.sched.model import (
    Ending,
    Estimate,
    Holder,
    Node,
    Pending,
    Planned,
    Start,
    Unplanned,
    Window,
    take,
)
from ranch.sched.place import place
from ranch.sched.slices import to_end

NEVER_FITS = "no start in sight"  # nodes too small or held by jobs with no time limit
SKIPPED = ("bf_max_job_test", "bf_max_job_user", "bf_max_job_part")  # untested: no estimate
__all__ = ["BEYOND", "NEVER_FITS", "SKIPPED", "Cycle", "Params", "node_order", "plan",
           "steps"]
DEFAULTS = Params()


def plan(cluster: Cluster, queue: Sequence[Queued], ends: Sequence[Ending], now: float,
         params: Params = DEFAULTS, windows: Sequence[Window] = (),
         preempting: Preempting | None = None) -> tuple[Estimate, ...]:
    """One backfill cycle: an estimate for each queued job (in priority order), from the
    running jobs' end bounds (`ends`); with `preempting`, a job that starts now once
    preemptable jobs are gone is Planned now with its victims. `cluster` is not changed."""
    return to_end(steps(cluster, queue, ends, now, params, windows, lambda: False, preempting))


def steps(cluster: Cluster, queue: Sequence[Queued], ends: Sequence[Ending], now: float,
          params: Params, windows: Sequence[Window], due: Callable[[], bool],
          preempting: Preempting | None = None
          ) -> Generator[None, None, tuple[Estimate, ...]]:
    """plan() in slices: after each job it asks `due()` (the caller's clock: this core reads
    none) and yields when it says so, so that a caller on an event loop lets the loop run
    in between (`await trio.sleep(0)` at each yield); it returns plan()'s estimates. The
    snapshot it plans over must stay unchanged until it is done."""
    cycle = Cycle(cluster, ends, now, params, windows)
    cycle.preempting = preempting
    out: list[Estimate] = []
    for q in queue:
        out.append(cycle.consider(q))
        if due():
            yield
    if params.estimate_all:
        for i, (q, e) in enumerate(zip(queue, out, strict=True)):
            if isinstance(e, Unplanned) and e.why in SKIPPED:
                out[i] = cycle.display(q, e)
                if due():
                    yield
    return tuple(out)


class Cycle:
    """A planning cycle in progress: the map, what running jobs free when, and the counts the
    bf_max_* limits read."""

    def __init__(self, cluster: Cluster, ends: Sequence[Ending], now: float, params: Params,
                 windows: Sequence[Window]) -> None:
        self.cluster, self.params = cluster, params
        self.clock = clock = Clock.of(now, params.resolution, params.window * 60)
        self.nodes = node_order(cluster)
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.uses = {n: u.copy() for n, u in cluster.uses.items()}
        self.holders = dict(cluster.holders)
        # nodes in use (bf_busy_nodes' preference): running now or started by this cycle
        self.busy = self.mask(n for n, u in self.uses.items() if u.jobs)
        self.lines = Timelines(self.nodes, self.uses, releases(ends, self.uses, clock.freed),
                               releases(ends, self.uses, clock.second))
        self.map = SlotMap(clock.slots, (1 << len(self.nodes)) - 1)
        # the map holds each window from the first slot that begins after it does (never more
        # than it holds: a window's edge is to the second, _windowed)
        self.windows = [(w.begin, w.end, self.mask(w.nodes)) for w in windows if w.end > now]
        for b, e, m in self.windows:
            self.map.block(max(0, math.floor((b - clock.origin) / clock.res) + 1),
                           clock.after(e), m)
        # whether every window's end is an end in the map (one within a slot blocks no slot
        # of it): then a search may walk the map's ends alone (bfsearch.py)
        self.ends_known = all(clock.after(e) >= clock.slots or not m or max(
            0, math.floor((b - clock.origin) / clock.res) + 1) < clock.after(e)
            for b, e, m in self.windows)
        self.eligible: dict[tuple, int] = {}
        self.low: dict[tuple, int] = {}  # a request's earliest start can only move later
        self.gone: dict[tuple, str] = {}  # requests that found none: why
        self.failed: dict[tuple, list[tuple]] = {}
        self.blocked: set[str] = set()  # partitions where a job already waits
        self.tested = 0
        self.per_user: dict[int, int] = {}
        self.per_part: dict[str, int] = {}
        self.preempting: Preempting | None = None  # preemption configured: what it may stop
        self.taken: set[int] = set()  # jobs this cycle's preemptors stop
        self.no_victims: set[tuple] = set()  # requests that found none (later ones won't)

    def fork(self) -> Cycle:
        """A copy of the cycle so far that plans on without changing this one (rqueue --why
        tries a changed job in its place: the jobs ahead are planned once, not once a try)."""
        other = copy.copy(self)
        other.uses = {n: u.copy() for n, u in self.uses.items()}
        other.holders = dict(self.holders)
        other.lines = self.lines.fork()
        other.map = self.map.fork()
        other.low, other.gone = dict(self.low), dict(self.gone)
        other.failed = {k: list(v) for k, v in self.failed.items()}
        other.blocked = set(self.blocked)
        other.per_user, other.per_part = dict(self.per_user), dict(self.per_part)
        other.taken, other.no_victims = set(self.taken), set(self.no_victims)
        return other

    def mask(self, names) -> int:
        out = 0
        for name in names:
            i = self.index.get(name)
            if i is not None:
                out |= 1 << i
        return out

    def consider(self, q: Queued) -> Estimate:
        job = q.job
        if q.waits:
            return Unplanned(job.id, q.waits, "not runnable")
        part = self.cluster.partitions.get(job.partition)
        if part is None or not part.up:
            return Unplanned(job.id, "PartitionDown", "partition down")
        why = job_over(job, part)
        if why:
            return Unplanned(job.id, why, "partition limit")
        limit = self._skip(job)
        if limit:
            return Unplanned(job.id, "", limit)
        if any(n not in self.index for n in job.req_nodes):  # -w names a node out of service
            return Unplanned(job.id, "ReqNodeNotAvail", NEVER_FITS)
        if job.constraint and not all(matches_features(job.constraint, self.cluster.nodes[n])
                                      for n in job.req_nodes):
            return Unplanned(job.id, "Resources", NEVER_FITS)  # as the FIFO pass says
        for j in (job, *q.alternatives):
            started = self._now(j)
            if started is not None:
                return started
        reason = self._reason(job)
        if self.preempting is not None:  # _try_sched with the preemptable jobs gone: "now"
            now = planned_now(self, job, reason)
            if now is not None:
                return now
        if job.priority < self.params.min_prio_reserve:
            return Unplanned(job.id, reason, "bf_min_prio_reserve")
        got = self._plan(job)
        if isinstance(got, str):
            return Unplanned(job.id, reason, got)
        start = self._reserve(job, *got)
        nodes = tuple(self.nodes[i].name for i in bits(got[1]))
        return Planned(job.id, job.partition, start, nodes, reason)

    def display(self, q: Queued, skipped: Unplanned) -> Estimate:
        """ranch_estimate_all: the estimate of a job a bf_max_* limit left untested, planned
        behind every tested job from now on (slot 0: it could start now; the next cycle that
        tests it starts it). Its reservation only weighs on the other untested jobs."""
        job = q.job
        if any(n not in self.index for n in job.req_nodes) or (job.constraint and not all(
                matches_features(job.constraint, self.cluster.nodes[n]) for n in job.req_nodes)):
            return Unplanned(job.id, skipped.reason, NEVER_FITS)
        got = self._plan(job, earliest=0)
        if isinstance(got, str):
            return Unplanned(job.id, skipped.reason, got)
        start = self._reserve(job, *got)
        nodes = tuple(self.nodes[i].name for i in bits(got[1]))
        return Planned(job.id, job.partition, start, nodes, skipped.reason)

    def _reserve(self, job: Pending, t: int, chosen: int) -> float:
        """Reserve `chosen` for a job planned at slot `t`; the second it is shown to start.
        Slurm's start_time is will_run's, the end_time of the running job whose end lets it
        fit (or now + 1 for one already ended), unless a node_space boundary (start_res, on
        the bf_resolution grid) is later; its reservation is that second and its end, both
        rounded down (backfill.c). A slot-0 plan (ranch_estimate_all) is now."""
        clock, minutes = self.clock, self._minutes(job)
        at = second(self, job, t, chosen, minutes) if t else clock.now
        a, b = clock.held(at, minutes)
        self.map.block(a, b, chosen)
        return at

    def _skip(self, job: Pending) -> str:
        """The bf_max_* limit that leaves the job untested, or "" (and the job counted)."""
        p = self.params
        if p.max_job_test and self.tested >= p.max_job_test:
            return "bf_max_job_test"
        if p.max_job_user and self.per_user.get(job.uid, 0) >= p.max_job_user:
            return "bf_max_job_user"
        if p.max_job_part and self.per_part.get(job.partition, 0) >= p.max_job_part:
            return "bf_max_job_part"
        self.tested += 1
        self.per_user[job.uid] = self.per_user.get(job.uid, 0) + 1
        self.per_part[job.partition] = self.per_part.get(job.partition, 0) + 1
        return ""

    def _minutes(self, job: Pending) -> int | None:
        if job.time_limit is not None:
            return job.time_limit
        return self.cluster.partitions[job.partition].max_time

    def _sig(self, job: Pending) -> tuple[Sig, int]:
        return sig_of(job.need)

    def _masks(self, job: Pending) -> tuple[int, int]:
        """(the partition's nodes the job may use, the nodes it names with -w)."""
        key = (job.partition, job.constraint, job.exc_nodes)
        got = self.eligible.get(key)
        if got is None:
            names = self.cluster.members.get(job.partition, ())
            exc = set(job.exc_nodes)
            got = self.mask(n for n in names if n not in exc and n in self.index
                            and matches_features(job.constraint, self.nodes[self.index[n]]))
            self.eligible[key] = got
        return got, self.mask(job.req_nodes)

    def _ending(self, job: Pending) -> int:
        minutes = self._minutes(job)
        return NEVER if minutes is None else self.clock.after(self.clock.now + minutes * 60)

    def _of(self, mask: int) -> Iterator[Node]:
        nodes = self.nodes
        while mask:
            low = mask & -mask
            mask ^= low
            yield nodes[low.bit_length() - 1]

    def _now(self, job: Pending) -> Start | None:
        """Start the job now on nodes no reservation holds before it would end, if it fits."""
        part = self.cluster.partitions.get(job.partition)
        if part is None or not part.up or job_over(job, part):
            return None
        sig, k = self._sig(job)
        elig, req = self._masks(job)
        if job.req_nodes and req.bit_count() < len(set(job.req_nodes)):
            return None  # a named node out of service
        until = self._ending(job)
        minutes, now = self._minutes(job), self.clock.now
        way = NEVER if minutes is None else self.clock.through(now + minutes * 60)
        cand = (elig | req) & self.lines.now(sig) & self.map.free(0, way) \
            & ~self._windowed(now, minutes)
        if cand.bit_count() < k or req & ~cand:
            return None
        ok = NodeFilter(job, self.uses, self.holders)
        required = list(self._of(req))
        if not all(ok(n) for n in required):
            return None
        shares, _ = place(job.need, required, (n for n in self._of(cand & ~req) if ok(n)),
                          self.uses)
        if shares is None:
            return None
        take(self.uses, job.id, shares)
        self.holders[job.id] = Holder(job.uid, job.user_exclusive)
        self.busy |= self.mask(shares)
        for name, share in shares.items():
            self.lines.start(self.index[name], share, until,
                             None if minutes is None else int(now) + minutes * 60)
        return Start(job.id, job.partition, shares)

    def _windowed(self, start: float, minutes: int | None) -> int:
        """The nodes a window holds at some moment of a run from `start`. A window is not a
        node_space entry in Slurm but job_test_resv's test, to the second: one that begins as
        the run's limit ends is NOT in its way (reservation.c: `if ((start_relative >=
        job_end_time_use) || (end_relative <= job_start_time)) continue;`), unlike a job
        ahead's reservation (Clock.through)."""
        end = math.inf if minutes is None else start + minutes * 60
        held = 0
        for b, e, m in self.windows:
            if b < end and e > start:
                held |= m
        return held

    def _reason(self, job: Pending) -> str:
        """Why a job that cannot start now waits: nodes that would hold it now are reserved
        (a window: slurmctld's RESERVED words; a job ahead: Priority), or too few hold it now:
        Resources for the first such job of its partition, Priority behind it."""
        sig, k = self._sig(job)
        elig, req = self._masks(job)
        now = (elig | req) & self.lines.now(sig)
        if now.bit_count() >= k and not req & ~now:
            held = self._windowed(self.clock.now, self._minutes(job))
            return RESERVED if (now & ~held).bit_count() < k or req & held else "Priority"
        if job.partition in self.blocked:
            return "Priority"
        if not job.req_nodes:
            self.blocked.add(job.partition)
        return "Resources"

    def _plan(self, job: Pending, earliest: int = 1) -> tuple[int, int] | str:
        """(the earliest slot after now the job fits on nodes free of reservations for its
        whole limit, those nodes) or why there is none in the window."""
        sig, k = self._sig(job)
        elig, req = self._masks(job)
        minutes = self._minutes(job)
        span = self.clock.span(minutes)
        need = job.need
        key = (job.partition, job.constraint, job.exc_nodes, job.req_nodes, sig, k, span,
               need.spread and (need.tasks, need.max_nodes))
        group, shape = key[:4], (*sig, span, k)
        if key in self.gone:
            return self.gone[key]
        ever_held = self.lines.ever(sig) & (elig | req)
        if ever_held.bit_count() < k or req & ~ever_held:
            return NEVER_FITS
        if not need.spread and _dominated(shape, self.failed.get(group, ())):
            return BEYOND
        got = search(self, job, sig, k, elig | req, req, minutes, self.low.get(key, earliest))
        if isinstance(got, str):
            self.gone[key] = got
            if got == BEYOND and not need.spread:  # kept minimal: none within another
                rest = [f for f in self.failed.get(group, ()) if not _within(shape, f)]
                self.failed[group] = [*rest, shape]
            return got
        self.low[key] = got[0]
        return got

    def _choose(self, job: Pending, free: int, req: int, k: int, t: int) -> int:
        """The nodes the job would take at slot `t` among `free`: first fit (0: none)."""
        if req & ~free:
            return 0
        need, rest = job.need, free & ~req
        # bf_busy_nodes: the nodes in use first, then the idle ones, each in node order
        first, then = (rest & self.busy, rest & ~self.busy) if self.params.busy_nodes \
            else (rest, 0)
        if not need.spread:
            if free.bit_count() < k:
                return 0
            more = lowest(first, k - req.bit_count())
            return req | more | lowest(then, k - req.bit_count() - more.bit_count())
        chosen, tasks, count = 0, 0, 0
        for i in [*bits(req), *bits(first), *bits(then)]:
            if need.max_nodes and count >= need.max_nodes:
                break
            fc, fm, fg, fj = self.lines.free_at(i, t)
            if need.exclusive:
                held = self.nodes[i].cpus // need.cpus_per_task if fj == 0 else 0
            else:
                held = fc // need.cpus_per_task if fm >= need.mem else 0
            if need.gpus_per_task:
                held = min(held, fg // need.gpus_per_task)
            if fg < need.gpus:  # the GPUs each node gives it (place.share_on's test)
                held = 0
            if held:
                chosen, tasks, count = chosen | 1 << i, tasks + held, count + 1
            if tasks >= need.tasks and count >= need.nodes:
                return chosen
        return 0


def _dominated(shape: tuple, failed: Sequence[tuple]) -> bool:
    """Whether any of `failed` is _within `shape` (inlined: every job a cycle gives no
    estimate reads the whole list)."""
    c, m, g, whole, span, k = shape
    for fc, fm, fg, fwhole, fspan, fk in failed:
        if fc <= c and fm <= m and fg <= g and (whole or not fwhole) and fspan <= span \
                and fk <= k:
            return True
    return False


def _within(failed: tuple, shape: tuple) -> bool:
    """A request no smaller in any way than one that found no start cannot find one."""
    c, m, g, whole, span, k = shape
    fc, fm, fg, fwhole, fspan, fk = failed
    return fc <= c and fm <= m and fg <= g and (whole or not fwhole) and fspan <= span \
        and fk <= k

