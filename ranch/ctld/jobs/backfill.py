"""sched/backfill's cycle (issue 44): every bf_interval the pure planner (ranch/sched/backfill.py)
runs over a snapshot of the queue and the nodes; a start it finds is applied through the FIFO
pass's allocation only if the nodes are still as it saw them, and each waiting job gets its
StartTime estimate and SchedNodeList (or none)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import trio

from ranch.conf.timefmt import slurm_timestamp
from ranch.ctld import gctune
from ranch.ctld.jobs import schedviews
from ranch.ctld.jobs.decisions import Decisions, ahead_of
from ranch.ctld.jobs.jobrecord import COMPLETING, PENDING, Job
from ranch.ctld.jobs.willrun import running_ends
from ranch.sched import backfill as planner
from ranch.sched.bfpreempt import Preempt, Preempting
from ranch.sched.fifo import Cluster, Queued
from ranch.sched.model import (
    Ending,
    Estimate,
    NodeUse,
    Planned,
    Start,
    Unplanned,
    Window,
    take,
)
from ranch.sched.slices import to_end

if TYPE_CHECKING:
    from ranch.conf.model import SchedulerSettings
    from ranch.ctld.jobs.ports import Queue
    from ranch.ctld.jobs.preemption import Preemptions
    from ranch.ctld.jobs.settings import JobSettings

T = TypeVar("T")

# a cycle with nothing new to plan waits at most this long (its estimates' times refresh)
IDLE = 30.0
# a cycle with news waits for the event passes to pause this long, at most SETTLE in all
QUIET, SETTLE = 0.2, 1.0
# an estimate's `why` for a job the cycle tried to place (sdiag's "try sched" depth)
TRIED = (planner.BEYOND, planner.NEVER_FITS, "bf_min_prio_reserve")


@attrs.frozen
class Snapshot:
    """What one cycle plans over: plain data copied out of the store and the node views."""

    cluster: Cluster
    queue: tuple[Queued, ...]
    ends: tuple[Ending, ...]
    now: float
    params: planner.Params
    windows: tuple[Window, ...] = ()  # the reservations' (maintenance) windows
    preempting: Preempting | None = None  # what its preemptors may stop (None: no preemption)

    def plan(self) -> tuple[Estimate, ...]:
        return planner.plan(self.cluster, self.queue, self.ends, self.now, self.params,
                            self.windows, self.preempting)


def params_of(s: SchedulerSettings) -> planner.Params:
    return planner.Params(window=s.bf_window, resolution=s.bf_resolution,
                          max_job_test=s.bf_max_job_test, max_job_user=s.bf_max_job_user,
                          max_job_part=s.bf_max_job_part, min_prio_reserve=s.bf_min_prio_reserve,
                          estimate_all=s.estimate_all, busy_nodes=s.bf_busy_nodes)


class Backfill:
    """The backfill loop of the job side: snapshot, plan, commit."""

    def __init__(self, jobs: Queue, settings: JobSettings, *,
                 clock: Callable[[], float], wall: Callable[[], float],
                 cluster: Callable[[Any, float], Cluster],
                 waits: Callable[[Job, float, dict[int, int]], str | None],
                 allocate: Callable[[Job, dict[str, Any]], str],
                 programs: Callable[[], None],
                 windows: Callable[[], Sequence[Window]],
                 measured: Callable[[float, int, int, int, int, int], None],
                 active: Callable[[bool], None],
                 decisions: Decisions | None = None,
                 preemptions: Preemptions | None = None) -> None:
        """`clock`: the controller's (trio's), when an event pass ran; `cluster`, `waits`,
        `allocate`: the FIFO pass's live views, its reasons that hold a job whatever the nodes,
        and its allocation (ctld/jobs/jobstart.py); `programs`: the node side's programs a
        start asked for (power save's flush); `windows`: the reservations' windows not yet
        over (the node side's), kept out of the plan;
        `measured`: each cycle's start, µs, depth, jobs tried, queue length and starts, and
        `active`: a plan under way in a thread (sdiag's backfill block, jobs/schedstats.py);
        `decisions`: where starts and the top jobs' reservations are recorded with their inputs
        (ctld/jobs/decisions.py); `preemptions`: preempt/qos's victims for a job the plan
        starts once they are gone, stopped by the commit (ctld/jobs/preemption.py)."""
        self._jobs = jobs
        self._settings = settings
        self._clock = clock  # trio's: when the last event pass ran (the cycle's pause)
        self._wall = wall
        self._cluster = cluster
        self._waits = waits
        self._allocate = allocate
        self._programs = programs
        self._windows = windows
        self._measured = measured
        self._active = active
        self._decisions = decisions if decisions is not None else Decisions(lambda *a, **k: None)
        self._preemptions = preemptions
        self._views = schedviews.Views()
        self._pokes, self._seen = 0, -1  # event passes run; the count the last cycle saw
        self._poked_at = -QUIET  # trio time of the last event pass
        self._poked = trio.Event()
        self.cycles = 0
        self.backfilled = 0  # jobs this loop started (sdiag's "Total backfilled jobs")

    def poke(self) -> None:
        """An event pass ran (a job ended or was submitted, a node changed...): what the next
        cycle plans over changed (slurmctld's _more_work)."""
        self._pokes += 1
        self._poked_at = self._clock()
        self._poked.set()

    async def run(self) -> None:
        """Forever: a cycle bf_interval after the last one began, once the queue or the nodes
        changed since that one's snapshot, the event passes paused and no ended job is still
        half-released, while SchedulerType=sched/backfill (read again each time: a
        reconfigure may change it).

        A free-running timer drifts through the second; jobs tend to end on the same
        fraction of it, and where the timer sat just before their ends each hole they opened
        waited a whole interval, and the job backfilled there then started a second late (the
        replay of tests/conformance/test_replay.py under CPU load); a timer that does not
        drift can lock amid such ends as well. A cycle that falls due waits for the changes
        and runs once their event passes pause."""
        last = trio.current_time()  # the first cycle a bf_interval after the start
        while True:
            s = self._settings.config.scheduler
            if not s.backfill:
                await trio.sleep(30)  # off: look again later
                continue
            await trio.sleep_until(last + s.bf_interval)
            with trio.move_on_after(max(IDLE, s.bf_interval)):  # estimates refresh anyway
                await self._news(s.bf_interval)
            if self._settings.config.scheduler.backfill:
                last = trio.current_time()
                await self.cycle()

    async def _news(self, interval: float) -> None:
        """Until an event pass the last cycle did not see has run; then until the passes
        have paused for QUIET (at most SETTLE: jobs that end on one second report over a
        tenth of it, and a cycle amid them would leave the later ones' holes for the next
        interval) and the jobs that ended have released their nodes (at most `interval`: a
        node may not answer), so the cycle sees the holes the ends opened whole."""
        while self._pokes == self._seen:
            await self._pass()
        # the pause counts from the last pass, not from now: a cycle that fell due after its
        # news had paused runs at once (counted from now, each cycle began QUIET later in the
        # second than the last, and drifted onto the jobs' ends)
        with trio.move_on_after(min(SETTLE, interval)):
            while (wait := self._poked_at + QUIET - self._clock()) > 0:
                await trio.sleep(wait)
        with trio.move_on_after(interval):
            while self._releasing():
                await self._pass()

    async def _pass(self) -> None:
        self._poked = trio.Event()
        await self._poked.wait()

    def _releasing(self) -> bool:
        return any(j.state == COMPLETING and j.shares for j in self._jobs.jobs.values())

    async def cycle(self) -> int:
        """One cycle; the number of jobs it started. Its time is its own work, not the event
        loop's in between: the snapshot and the plan run in slices of SLICE seconds with the
        loop let run between them (no stall longer than a slice at 50,000 pending), and the
        commit checks that what a start uses is as the plan saw it. The collector waits until
        the cycle has let its snapshot go (ctld/gctune.py paused)."""
        with gctune.paused():
            return await self._cycle()

    async def _cycle(self) -> int:
        began = self._wall()
        self._seen = self._pokes  # what it plans over: a pass after this is news
        snap, spent = await _sliced(lambda due: self._snapshot_steps(None, None, due))
        self._active(True)
        try:
            estimates, took = await _sliced(lambda due: planner.steps(
                snap.cluster, snap.queue, snap.ends, snap.now, snap.params, snap.windows, due,
                snap.preempting))
        finally:
            self._active(False)
        t1 = time.perf_counter()
        started = self.commit(snap, estimates)
        spent += took + time.perf_counter() - t1
        self.cycles += 1
        # as slurmctld's backfill, a queue of no runnable job is no cycle of sdiag's
        runnable = [e for e, q in zip(estimates, snap.queue, strict=True) if not q.waits]
        if runnable:
            depth = [e for e in runnable
                     if not (isinstance(e, Unplanned) and e.why == "bf_max_job_test")]
            tried = sum(1 for e in depth if not isinstance(e, Unplanned) or e.why in TRIED)
            self._measured(began, int(spent * 1e6), len(depth), tried, len(runnable), started)
        if started:
            self._programs()  # a start may power nodes up
        return started

    def snapshot(self, cfg: Any = None, under: Callable[[Job], tuple[int, tuple]] | None = None
                 ) -> Snapshot:
        """The live views copied to plain data, at once. `cfg` and `under` (each job's
        priority and place: Priorities.under): a candidate config's queue over the same nodes
        and jobs, for a reconfigure's dry run."""
        return to_end(self._snapshot_steps(cfg, under, lambda: False))

    def _snapshot_steps(self, cfg: Any, under: Callable[[Job], tuple[int, tuple]] | None,
                        due: Callable[[], bool]) -> Generator[None, None, Snapshot]:
        """snapshot() in slices, yielding between pending jobs when `due()`: a job that
        changes meanwhile is seen as it was or as it is, and the commit finds any start on
        nodes the plan saw otherwise."""
        wall = self._wall()
        cfg = cfg if cfg is not None else self._settings.config
        live = self._cluster(cfg, wall)
        parts = {p.name: live.partitions[p.name] for p in cfg.partitions}
        uses = {n: u.copy() for n, u in live.uses.items()}
        holders = {jid: live.holders[jid] for u in uses.values() for jid in u.jobs
                   if jid in self._jobs.jobs}
        cluster = Cluster(nodes=dict(live.nodes.items()), partitions=parts,
                          members={p: list(live.members[p]) for p in parts}, uses=uses,
                          holders=holders, pending_parts=())
        running: dict[int, int] = {}
        queue = []
        jobs = list(self._jobs.pending)
        got = {j.id: under(j) for j in jobs} if under is not None else {}
        if got:
            jobs.sort(key=lambda j: got[j.id][1])
        for job in jobs:
            if job.state != PENDING:
                continue
            why = self._waits(job, wall, running)
            if why is not None:
                view = self._views.pending(job)
                if got:
                    view = attrs.evolve(view, priority=got[job.id][0])
                queue.append(Queued(view, why))
            if due():
                yield
        self._views.prune(self._jobs.pending)
        # each end with its own copy of the shares (a job's dict changes as its nodes free)
        ends = tuple(Ending(e.at, e.job_id, dict(e.shares))
                     for e in running_ends(self._jobs, wall))
        preempting = None if self._preemptions is None else self._preemptions.planning(jobs)
        return Snapshot(cluster, tuple(queue), ends, wall, params_of(cfg.scheduler),
                        tuple(self._windows()), preempting)

    def commit(self, snap: Snapshot, estimates: Sequence[Estimate]) -> int:
        """Apply the plan to the jobs still pending as the plan saw them: its starts on nodes
        still as it saw them, its estimates; the number started."""
        expected = {n: u.copy() for n, u in snap.cluster.uses.items()}
        seen = {q.job.id: q.job for q in snap.queue}
        live = self._cluster(self._settings.config, self._wall())
        started = 0
        for i, est in enumerate(estimates):
            job = self._jobs.jobs.get(est.job_id)
            if job is None or job.state != PENDING:
                continue
            if isinstance(est, Start):
                if self._unchanged(job, est, seen, snap, live, expected) and \
                        not self._allocate(job, dict(est.shares)):
                    take(expected, job.id, est.shares)
                    started += 1
                    self._started(job, estimates, i, snap)
                    _estimate(job, None, ())
                    self._jobs.touch(job, durable=False)
            elif isinstance(est, Planned):
                if isinstance(est, Preempt) and self._preemptions is not None and \
                        self._views.pending(job) is seen.get(job.id):
                    self._preemptions.carry(job, est.victims)  # it starts once they are gone
                self._planned(job, est)
            elif isinstance(est, Unplanned) and _estimate(job, None, ()):
                self._jobs.touch(job, durable=False)
        if started:
            self._jobs.tidy()  # they left PENDING
            self.backfilled += started
        self._decisions.planned(estimates, self._priority)
        return started

    def _priority(self, job_id: int) -> int:
        job = self._jobs.jobs.get(job_id)
        return job.priority if job is not None else 0

    def _started(self, job: Job, estimates: Sequence[Estimate], i: int, snap: Snapshot) -> None:
        """Record a backfilled start with its inputs: the jobs ahead it passed, and the bound
        by which it ends (no reservation ahead holds its nodes before then)."""
        ahead, passed = ahead_of(estimates, i, self._priority)
        limit = job.time_limit
        ends = "no time limit" if limit is None else \
            f"ends by {slurm_timestamp(snap.now + limit * 60)}"
        self._decisions.started(job, "backfill", ahead, passed,
                                f"backfilled: {ends}, before any reservation of a job ahead "
                                "on its nodes")

    def _planned(self, job: Job, est: Planned) -> None:
        changed = _estimate(job, est.start, est.nodes)
        if est.reason and job.reason != est.reason and not job.held:
            job.reason = est.reason
            changed = True
        if changed:
            self._jobs.touch(job, durable=False)  # recomputed every cycle

    def _unchanged(self, job: Job, est: Start, seen: dict[int, Any], snap: Snapshot,
                   live: Cluster, expected: dict[str, NodeUse]) -> bool:
        """Whether a planned start still holds: the job asks what it asked, nothing new holds
        it back, and each of its nodes is in the state, and holds the jobs, the plan saw
        (less the starts this commit made), and no reservation took it since."""
        if self._views.pending(job) is not seen.get(job.id) or est.partition != job.partition:
            return False
        if self._waits(job, snap.now, {}) != "":
            return False
        try:  # the nodes a reservation keeps a job of this limit off now
            held = live.windows[job.time_limit]
        except KeyError:
            held = frozenset()
        for name in est.shares:
            if name in held or live.nodes.get(name) is not snap.cluster.nodes.get(name):
                return False
            if self._jobs.uses.get(name, NodeUse()) != expected.get(name, NodeUse()):
                return False
        return True


SLICE = 0.01  # the longest stretch a cycle holds the event loop (the issue: no stall > 50 ms)


async def _sliced(make: Callable[[Callable[[], bool]], Generator[None, None, T]]
                  ) -> tuple[T, float]:
    """Run a generator of slices (made with the `due` it asks) to its end, letting the event
    loop run between slices; its value and the seconds the slices themselves took."""
    began = [0.0]
    steps = make(lambda: time.perf_counter() - began[0] >= SLICE)
    took = 0.0
    while True:
        began[0] = t = time.perf_counter()
        try:
            next(steps)
        except StopIteration as done:
            return done.value, took + time.perf_counter() - t
        took += time.perf_counter() - t
        await trio.sleep(0)


def _estimate(job: Job, start: float | None, nodes: tuple[str, ...]) -> bool:
    """Set the job's estimate; whether it changed."""
    if job.est_start == start and job.sched_nodes == nodes:
        return False
    job.est_start, job.sched_nodes = start, nodes
    return True
