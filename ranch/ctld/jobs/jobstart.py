"""The scheduling pass: pending jobs in priority order, placed by the pure scheduling core
(ranch/sched/fifo.py) on their partition's nodes, and launched (the job table's Launch:
ctld/jobs/launches.py) once those nodes are up."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ranch.conf import hostlist
from ranch.ctld.jobs import partlimits, schedviews
from ranch.ctld.jobs.decisions import AHEAD, Decisions
from ranch.ctld.jobs.dependbook import CANCELLED
from ranch.ctld.jobs.jobrecord import (
    ACTIVE,
    BEGIN_KEY,
    CONFIGURING,
    PENDING,
    Job,
    held_reason,
)
from ranch.ctld.jobs.limitpass import RECOUNT_S, LimitScope, RuleOf
from ranch.protocol import messages as m
from ranch.sched.fifo import Cluster, Pass
from ranch.sched.model import Pending, Share, Wait
from ranch.statemachine import jobevents as je
from ranch.statemachine.model import Flag

if TYPE_CHECKING:
    from ranch.ctld.deadlines import Deadlines
    from ranch.ctld.jobs.ports import NodesForJobs, NodeView, Queue
    from ranch.ctld.jobs.settings import JobSettings


class JobStarts:
    """The scheduling pass over the pending queue."""

    def __init__(self, jobs: Queue, settings: JobSettings, nodes: NodesForJobs, *,
                 clock: Callable[[], float], wall: Callable[[], float], deadlines: Deadlines,
                 check: Callable[[m.SubmitJob], Any],
                 dependency_reason: Callable[[Job, float], str],
                 measured: Callable[[int, int, int], None],
                 limits: Callable[[], RuleOf | None] = lambda: None,
                 decisions: Decisions | None = None,
                 preempt: Callable[[Job, Pending, Cluster], bool] | None = None,
                 preempted: Callable[[], None] = lambda: None,
                 order: Callable[[Sequence[Job]], Iterable[Job]] = lambda jobs: jobs) -> None:
        """`check`: a submission's checks (ctld/jobs/jobsubmit.py), for a job of several
        partitions; `dependency_reason`: why a job's dependencies hold it
        (ctld/jobs/dependbook.py); `measured`: each pass's µs, depth and queue length
        (sdiag's main scheduler, ctld/jobs/schedstats.py); `limits`: the accounting limits'
        rules while AccountingStorageEnforce has `limits` (None: not enforced); `decisions`:
        where each start is recorded with its inputs (ctld/jobs/decisions.py); `preempt`: a
        job that waits on Resources may stop lower QOS' jobs (ctld/jobs/preemption.py), which
        `preempted` does once the pass is over; `order`: the pending jobs in the order the
        pass tries them (preemptors first)."""
        self._jobs = jobs
        self._settings = settings
        self._nodes = nodes
        self._clock = clock
        self._wall = wall
        self._deadlines = deadlines
        self._check = check
        self._dependency_reason = dependency_reason
        self._measured = measured
        self._limits = limits
        self._decisions = decisions if decisions is not None else Decisions(lambda *a, **k: None)
        self._preempt, self._preempted, self._order = preempt, preempted, order
        self._scope: LimitScope | None = None  # the limits' tally, kept from pass to pass
        self._rule_of: tuple[Any, ...] | None = None  # (the limits' resolver,) during a pass
        self._members: dict[str, tuple[tuple[int, int], list[NodeView]]] = {}
        self._sizes = partlimits.Sizes()  # each partition's node count and CPUs
        self._views = schedviews.Views()  # the records as the core reads them (ranch/sched)
        self._passed: Callable[[], None] = lambda: None  # after each pass: backfill's poke

    def run(self) -> None:
        """The scheduling pass, when something happened that may let a job start."""
        if self._jobs.take_kick():
            began, queue = time.perf_counter(), len(self._jobs.pending)
            # the limits' resolver is the same for every job of one pass: asked once
            self._rule_of = (self._limits(),)
            try:
                depth = self._pass()
            finally:
                self._rule_of = None
            self._measured(int((time.perf_counter() - began) * 1e6), depth, queue)
            self._passed()

    def after_each_pass(self, call: Callable[[], None]) -> None:
        """`call` after every pass (sched/backfill's loop learns of each change)."""
        self._passed = call

    def _pass(self) -> int:
        """One pass; the number of jobs it looked at (sdiag's depth)."""
        cfg = self._settings.config
        self._jobs.tidy()
        started = 0
        wall = self._wall()
        wake = math.inf  # the earliest BeginTime still ahead
        run = Pass(self.cluster(cfg, wall))
        if self._scope is not None:
            self._scope.refresh()  # the jobs that ended since the last pass hold nothing
        running: dict[int, int] = {}  # throttled array -> its tasks holding resources
        depth = 0
        ahead: list[tuple[int, int, str]] = []  # the jobs ahead that wait: a start's inputs
        waited = 0
        for job in self._order(self._jobs.pending):  # preemptors before their victims
            if job.state != PENDING:
                continue
            if run.stopped:
                break  # every partition waits on a job ahead: nothing below may start
            depth += 1
            why = self.waits(job, wall, running)
            if why is None:
                started += 1  # ended (--kill-on-invalid-dep): off the pending list below
                continue
            if why == "BeginTime":
                wake = min(wake, job.req.begin_time or wall)
            elif not why:
                why = self._start(job, run)
                if not why:
                    started += 1
                    self._decisions.started(job, "main", ahead, waited, "fits now" + (
                        ", the jobs ahead wait for their own reasons" if ahead else ""))
                    if job.array_job_id in running:
                        running[job.array_job_id] += 1
                    continue
            waited += 1
            if len(ahead) < AHEAD:
                ahead.append((job.id, job.priority, why))
            if job.reason != why:
                job.reason = why
                self._jobs.touch(job, durable=False)  # recomputed by every pass, after restarts
        self._preempted()  # the victims this pass chose, stopped off its walk of the queue
        if run.stopped:
            started += self._behind(wall, running)
        # salloc -I: an immediate allocation this pass could not start is refused (FAILED)
        refused = [j for j in self._jobs.pending if j.state == PENDING and j.req.immediate]
        for job in refused:
            job.reason = "BadConstraints"  # what slurmctld's job_allocate leaves on it
            self._jobs.apply(job, je.NotNow())
        if started or refused:
            self._jobs.tidy()  # each of them left PENDING
        self._views.prune(self._jobs.pending)
        if wake < math.inf:  # the deadline task runs a pass when the first BeginTime comes
            due = self._clock() + (wake - wall)
            when = self._deadlines.when(BEGIN_KEY)
            if when is None or due < when:
                self._deadlines.schedule(BEGIN_KEY, due)
        return depth

    def _behind(self, wall: float, running: dict[int, int]) -> int:
        """The jobs below the pass's stop that no pass looked at yet (just submitted, released,
        requeued: Reason=None; or whose BeginTime came) get their reason, as slurmctld's scan
        marks the jobs of a partition that waits (Priority) or gives their own (held,
        dependency, limits...): every pending job has a reason after every pass. The rest
        keep theirs (cheap: a compare a job). The number that ended (--kill-on-invalid-dep)."""
        ended = 0
        for job in self._jobs.pending:
            # a BeginTime given at submission hides a -d that slurmctld tests first
            if job.state != PENDING or not (job.reason == "None" or (
                    job.reason == "BeginTime" and (
                        (job.req.begin_time or 0) <= wall or job.req.dependency))):
                continue
            why = self.waits(job, wall, running)
            if why is None:
                ended += 1
                continue
            job.reason = why or "Priority"
            self._jobs.touch(job, durable=False)
        return ended

    def cluster(self, cfg: Any, wall: float) -> Cluster:
        """The nodes, partitions and allocations as the scheduling core reads them (live
        views: a start applied shows in the next job's placement)."""
        parts = {p.name: p for p in cfg.partitions}  # a dict: config.partition() scans a list
        return Cluster(
            nodes=self._views.nodes.over(self._nodes.nodes),
            partitions=schedviews.Partitions(parts, self.members, self._sizes),
            members=self._views.members.over(parts, self.members),
            uses=self._jobs.uses, holders=schedviews.Holders(self._jobs.jobs),
            pending_parts=self._jobs.pending_parts,
            # reservations (issue 33): no node whose window the job's time limit would cross
            windows=schedviews.Windows(self._nodes.blocked, wall))

    def waits(self, job: Job, wall: float, running: dict[int, int]) -> str | None:
        """Why the job waits whatever the nodes (held, -d, BeginTime, array limit), "" when
        it may be placed, None when its dependency ended it."""
        begin = job.req.begin_time
        if job.held:
            return held_reason(job.held)
        if why := self._dependency_reason(job, wall):  # -d (issue 22)
            return None if why == CANCELLED else why
        if begin is not None and begin > wall:
            return "BeginTime"
        if job.array_throttle and self._running(job, running) >= job.array_throttle:
            return "JobArrayTaskLimit"  # --array=...%N: N of its tasks run already
        return self._limit(job, wall)

    def _limit(self, job: Job, wall: float) -> str:
        """The accounting limit that holds the job (acct_policy: skipped, it blocks no one).
        The tally is counted again whole when the tree changed, and every RECOUNT_S."""
        rule_of = self._rule_of[0] if self._rule_of is not None else self._limits()
        if rule_of is None:
            self._scope = None
            return ""
        scope = self._scope
        # abs: backfill's commit asks at its snapshot's time, which may precede the scope's
        if scope is None or scope.rule_of is not rule_of or abs(wall - scope.built) >= RECOUNT_S:
            scope = self._scope = LimitScope(rule_of, self._jobs.jobs.values(), wall)
        return scope.reason(job, wall)

    def _start(self, job: Job, run: Pass) -> str:
        """Start the job now if the core places it (in its first partition or, with -p a,b,
        the first other one that can), or why it waits."""
        view = self._views.pending(job)
        if job.alt_parts:
            checked: dict[str, Any] = {}
            decision = run.consider(view, self._elsewhere(job, checked))
        else:
            decision = run.consider(view)
        if isinstance(decision, Wait):
            if decision.reason == "Resources" and self._preempt is not None:
                self._preempt(job, view, run.cluster)  # it waits while its victims end
            return decision.reason
        first = (job.partition, job.need, job.time_limit, job.req_nodes, job.exc_nodes)
        if decision.partition != job.partition:  # where it runs from now on
            got = checked[decision.partition]
            job.partition, job.need, job.time_limit = decision.partition, got.need, got.time_limit
            job.req_nodes, job.exc_nodes = got.req_nodes, got.exc_nodes
        why = self.allocate(job, decision.shares)
        if why:
            (job.partition, job.need, job.time_limit, job.req_nodes, job.exc_nodes) = first
        elif job.alt_parts:
            job.alt_parts = ()  # it runs in this partition
            self._jobs.touch(job)
        return why

    def _elsewhere(self, job: Job, checked: dict[str, Any]) -> Iterator[Pending]:
        """A job of several partitions (`-p a,b`): its request resolved for each other one in
        turn, as it would be submitted there (asked only once its first cannot start it)."""
        for name in job.alt_parts:
            got = self._check(attrs.evolve(job.req, partition=name, array=""))
            if isinstance(got, m.Error):
                continue
            checked[name] = got
            yield attrs.evolve(schedviews.pending(job), partition=name, need=got.need,
                               time_limit=got.time_limit, req_nodes=got.req_nodes,
                               exc_nodes=got.exc_nodes)

    def _running(self, job: Job, running: dict[int, int]) -> int:
        """Tasks of the job's array that hold resources (counted once a pass)."""
        got = running.get(job.array_job_id)
        if got is None:
            got = running[job.array_job_id] = sum(
                1 for j in self._jobs.jobs.values()
                if j.array_job_id == job.array_job_id and j.state in ACTIVE)
        return got

    def allocate(self, job: Job, shares: dict[str, Share]) -> str:
        """Apply the core's start: the shares counted, the job allocated (off pending in
        _pass), its nodes told; "JobHeldUser" if the table refused (held meanwhile)."""
        nodes = self._nodes.nodes
        self._jobs.hold(job, shares)
        job.reason = "None"
        # hostlist order, as SLURM_JOB_NODELIST lists them; the first is the batch host
        order = tuple(hostlist.expand(hostlist.fold(list(shares))))
        booting = not all(self.ready(nodes[n]) for n in order)
        err = self._jobs.apply(job, je.Allocate(order, booting=booting))
        if err:  # give the resources back
            for name in list(shares):
                self._jobs.release(job, name)
            return "JobHeldUser"
        if self._scope is not None:  # the next job's limits count this one
            self._scope.started(job)
        return ""  # the table's new state told the node side what the job holds of each

    def members(self, pc: Any) -> list[NodeView]:
        """The partition's nodes now, dynamic ones (issue 13) included, in placement order (by
        Weight, then config order). Kept until the config or a partition's membership changes:
        building and sorting it for each job cost O(nodes) a submission. Callers only read it."""
        c = self._nodes
        token = (c.members_gen, id(c.nodes))
        hit = self._members.get(pc.name)
        if hit is not None and hit[0] == token:
            return hit[1]
        live = c.partition_nodes(pc.name)
        names: Iterable[str] = pc.nodes if live is None else live
        nodes = c.nodes
        index = self._settings.index
        out = sorted((nodes[n] for n in dict.fromkeys(names) if n in nodes),
                     key=lambda n: (n.cfg.weight, index.get(n.name, len(index))))
        self._members[pc.name] = (token, out)
        return out

    def ready(self, node: NodeView) -> bool:
        flags = node.state.flags
        return node.conn is not None and not (
            flags & {Flag.POWERING_UP, Flag.POWERED_DOWN, Flag.NO_RESPOND})

    def try_launch(self, job: Job) -> None:
        """CONFIGURING -> RUNNING once every node of the job is up and connected."""
        nodes = self._nodes.nodes
        if job.state == CONFIGURING and all(
                (n := nodes.get(name)) is not None and self.ready(n) for name in job.nodes):
            self._jobs.apply(job, je.NodesReady())
