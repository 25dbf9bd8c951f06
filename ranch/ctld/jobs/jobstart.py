"""The scheduling pass: pending jobs in priority order placed on their partition's nodes, and
launched (the job table's Launch: ctld/jobs/launches.py) once those nodes are up."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs

from ranch.conf import hostlist
from ranch.ctld.jobs import partlimits
from ranch.ctld.jobs.constraints import placeable
from ranch.ctld.jobs.dependbook import CANCELLED
from ranch.ctld.jobs.jobrecord import (
    ACTIVE,
    BEGIN_KEY,
    CONFIGURING,
    PENDING,
    Job,
    held_reason,
)
from ranch.ctld.jobs.scheduler import place
from ranch.protocol import messages as m
from ranch.statemachine import jobevents as je
from ranch.statemachine.model import Flag
from ranch.statemachine.predicates import takes_new_work

if TYPE_CHECKING:
    from ranch.ctld.deadlines import Deadlines
    from ranch.ctld.jobs.ports import NodesForJobs, NodeView, Queue
    from ranch.ctld.jobs.settings import JobSettings


RESERVED = "ReqNodeNotAvail, May be reserved for other job"  # slurmctld's words


class JobStarts:
    """The scheduling pass over the pending queue."""

    def __init__(self, jobs: Queue, settings: JobSettings, nodes: NodesForJobs, *,
                 clock: Callable[[], float], wall: Callable[[], float], deadlines: Deadlines,
                 check: Callable[[m.SubmitJob], Any],
                 dependency_reason: Callable[[Job, float], str]) -> None:
        """`check`: a submission's checks (ctld/jobs/jobsubmit.py), for a job of several
        partitions; `dependency_reason`: why a job's dependencies hold it
        (ctld/jobs/dependbook.py)."""
        self._jobs = jobs
        self._settings = settings
        self._nodes = nodes
        self._clock = clock
        self._wall = wall
        self._deadlines = deadlines
        self._check = check
        self._dependency_reason = dependency_reason
        self._members: dict[str, tuple[tuple[int, int], list[NodeView]]] = {}
        self._sizes = partlimits.Sizes()  # each partition's node count and CPUs

    def run(self) -> None:
        """The scheduling pass, when something happened that may let a job start."""
        if self._jobs.take_kick():
            self._pass()

    def _pass(self) -> None:
        cfg = self._settings.config
        self._jobs.tidy()
        blocked: set[str] = set()
        started = 0
        wall = self._wall()
        wake = math.inf  # the earliest BeginTime still ahead
        parts = {p.name: p for p in cfg.partitions}  # a dict: config.partition() scans a list
        running: dict[int, int] = {}  # throttled array -> its tasks holding resources
        for job in self._jobs.pending:
            if job.state != PENDING:
                continue
            if blocked and blocked.issuperset(self._jobs.pending_parts):
                break  # every partition waits on a job ahead: nothing below may start
            pc = parts.get(job.partition)
            begin = job.req.begin_time
            if job.held:
                why = held_reason(job.held)
            elif why := self._dependency_reason(job, wall):  # -d (issue 22)
                if why == CANCELLED:
                    started += 1  # ended: off the pending list below
                    continue
            elif begin is not None and begin > wall:
                why = "BeginTime"
                wake = min(wake, begin)
            elif job.array_throttle and self._running(job, running) >= job.array_throttle:
                why = "JobArrayTaskLimit"  # --array=...%N: N of its tasks run already
            else:
                why = self._consider(job, pc, blocked)
                if why and job.alt_parts:  # -p a,b: the first partition that can start it
                    why = self._elsewhere(job, parts, blocked) and why
                elif not why and job.alt_parts:
                    job.alt_parts = ()  # it runs in its first partition
                    self._jobs.touch(job)
                if not why:
                    started += 1
                    if job.array_job_id in running:
                        running[job.array_job_id] += 1
                    continue
            if job.reason != why:
                job.reason = why
                self._jobs.touch(job, durable=False)  # recomputed by every pass, after restarts
        # salloc -I: an immediate allocation this pass could not start is refused (FAILED)
        refused = [j for j in self._jobs.pending if j.state == PENDING and j.req.immediate]
        for job in refused:
            job.reason = "BadConstraints"  # what slurmctld's job_allocate leaves on it
            self._jobs.apply(job, je.NotNow())
        if started or refused:
            self._jobs.tidy()  # each of them left PENDING
        if wake < math.inf:  # the deadline task runs a pass when the first BeginTime comes
            due = self._clock() + (wake - wall)
            when = self._deadlines.when(BEGIN_KEY)
            if when is None or due < when:
                self._deadlines.schedule(BEGIN_KEY, due)

    def _consider(self, job: Job, pc: Any, blocked: set[str]) -> str:
        """Start the job in partition `pc` now, or why it waits there."""
        if pc is None or pc.state != "UP":
            return "PartitionDown"
        members = self.members(pc)
        size = self._sizes.of(pc.name, members, (n.cfg.cpus for n in members))
        why = partlimits.job_over(job, pc, size)  # EnforcePartLimits=NO let it wait
        if why:
            return why
        if pc.name in blocked:
            return "Priority"
        why = self._try_place(job, pc)
        if why == "Resources" and not job.req_nodes:
            blocked.add(pc.name)
        return why

    def _elsewhere(self, job: Job, parts: dict[str, Any], blocked: set[str]) -> str:
        """A job of several partitions (`-p a,b`) that cannot start in its first: each other
        in turn, as it would be submitted there; "" once one started it (its partition from
        then on), else "no"."""
        first = (job.partition, job.need, job.time_limit, job.req_nodes, job.exc_nodes)
        for name in job.alt_parts:
            checked = self._check(attrs.evolve(job.req, partition=name, array=""))
            if isinstance(checked, m.Error):
                continue
            job.partition, job.need, job.time_limit = name, checked.need, checked.time_limit
            job.req_nodes, job.exc_nodes = checked.req_nodes, checked.exc_nodes
            if not self._consider(job, parts.get(name), blocked):
                job.alt_parts = ()  # where it runs from now on
                self._jobs.touch(job)
                return ""
            (job.partition, job.need, job.time_limit, job.req_nodes, job.exc_nodes) = first
        return "no"

    def _running(self, job: Job, running: dict[int, int]) -> int:
        """Tasks of the job's array that hold resources (counted once a pass)."""
        got = running.get(job.array_job_id)
        if got is None:
            got = running[job.array_job_id] = sum(
                1 for j in self._jobs.jobs.values()
                if j.array_job_id == job.array_job_id and j.state in ACTIVE)
        return got

    def _try_place(self, job: Job, pc: Any) -> str:
        nodes = self._nodes.nodes
        required = [nodes[n] for n in dict.fromkeys(job.req_nodes) if n in nodes]
        excluded = set(job.exc_nodes)
        ok = placeable(self._jobs, job)  # -C Features, --exclusive=user (ctld/jobs/constraints.py)
        if not all(ok(n) for n in required):
            return "Resources"
        # Reservations (issue 33): no node whose window the job's time limit would cross
        limit = None if job.time_limit is None else job.time_limit * 60.0
        held = self._nodes.blocked(limit, self._wall())
        if held and any(n.name in held for n in required):
            return RESERVED
        others = (n for n in self.members(pc) if n.name not in excluded and ok(n)
                  and n.name not in held)
        shares, why = place(job.need, required, others, self._jobs.uses)
        if shares is None:
            why = ok.explain(why)
            if held and why in ("Resources", "ReqNodeNotAvail") and any(
                    n.name in held for n in self.members(pc)):
                return RESERVED
            if why == "ReqNodeNotAvail" and required:
                down = [n.name for n in required
                        if n.state.flags or not takes_new_work(n.state)]
                if down:
                    why = f"ReqNodeNotAvail, UnavailableNodes:{hostlist.fold(down)}"
            return why
        self._jobs.hold(job, shares)
        job.reason = "None"
        # hostlist order, as SLURM_JOB_NODELIST lists them; the first is the batch host
        order = tuple(hostlist.expand(hostlist.fold(list(shares))))
        booting = not all(self.ready(nodes[n]) for n in order)
        err = self._jobs.apply(job, je.Allocate(order, booting=booting))  # off pending in _pass
        if err:  # the table refused (held meanwhile): give the resources back
            for name in list(shares):
                self._jobs.release(job, name)
            return "JobHeldUser"
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
