"""The scheduling pass: pending jobs in priority order placed on their partition's nodes, and
launched (LaunchJob to every node) once those nodes are up."""

from __future__ import annotations

import logging
import math
import shlex
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import attrs

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.jobs import jobextras, partlimits, schedviews
from ranch.ctld.jobs.jobrecord import (
    ACTIVE,
    BEGIN_KEY,
    CONFIGURING,
    PENDING,
    Job,
    held_reason,
    job_env,
    job_name,
)
from ranch.ctld.state import bulkfiles
from ranch.protocol import messages as m
from ranch.sched.fifo import Cluster, Pass
from ranch.sched.model import Pending, Share, Wait, take
from ranch.statemachine import jobevents as je
from ranch.statemachine.model import Flag

if TYPE_CHECKING:
    from ranch.ctld.nodes.node import NodeRecord
    from ranch.ctld.ports import JobStore


class JobStarts:
    """The scheduling pass over the job store, and launches."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.c = store.c
        self._members: dict[str, tuple[tuple[int, int], list[NodeRecord]]] = {}
        # node -> runs this rctld launched there that the node has not yet named (in a beat, a
        # registration, a JobStarted): soft state, empty after a restart (then no run is taken
        # for never delivered, and a missing one is requeued as before)
        self._unheard: dict[str, set[tuple[int, int]]] = {}
        self._sizes = partlimits.Sizes()  # each partition's node count and CPUs
        self._views = schedviews.Views()  # the records as the core reads them (ranch/sched)

    def run(self) -> None:
        """The scheduling pass, when something happened that may let a job start."""
        if self.store.take_kick():
            self._pass()

    def _pass(self) -> None:
        cfg = self.c.config
        if self.store.pending_stale:
            self.store.rebuild_pending()
        started = 0
        wall = self.c.wall()
        wake = math.inf  # the earliest BeginTime still ahead
        run = Pass(self._cluster(cfg, wall))
        running: dict[int, int] = {}  # throttled array -> its tasks holding resources
        for job in self.store.pending:
            if job.state != PENDING:
                continue
            if run.stopped:
                break  # every partition waits on a job ahead: nothing below may start
            why = self._waits(job, wall, running)
            if why is None:
                started += 1  # ended (--kill-on-invalid-dep): off the pending list below
                continue
            if why == "BeginTime":
                wake = min(wake, job.req.begin_time or wall)
            elif not why:
                why = self._start(job, run)
                if not why:
                    started += 1
                    if job.array_job_id in running:
                        running[job.array_job_id] += 1
                    continue
            if job.reason != why:
                job.reason = why
                self.store.touch(job, durable=False)  # recomputed by every pass, after restarts
        # salloc -I: an immediate allocation this pass could not start is refused (FAILED)
        refused = [j for j in self.store.pending if j.state == PENDING and j.req.immediate]
        for job in refused:
            job.reason = "BadConstraints"  # what slurmctld's job_allocate leaves on it
            self.store.apply(job, je.NotNow())
        if started or refused:
            self.store.rebuild_pending()
        self._views.prune(self.store.pending)
        if wake < math.inf:  # the deadline task runs a pass when the first BeginTime comes
            due = self.c.clock() + (wake - wall)
            when = self.c.deadlines.when(BEGIN_KEY)
            if when is None or due < when:
                self.c.deadlines.schedule(BEGIN_KEY, due)

    def _cluster(self, cfg: Any, wall: float) -> Cluster:
        """The nodes, partitions and allocations as the scheduling core reads them (live
        views: a start applied shows in the next job's placement)."""
        parts = {p.name: p for p in cfg.partitions}  # a dict: config.partition() scans a list
        return Cluster(
            nodes=self._views.nodes.over(self.c.nodes),
            partitions=schedviews.Partitions(parts, self.members, self._sizes),
            members=self._views.members.over(parts, self.members),
            uses=self.store.uses, holders=schedviews.Holders(self.store.jobs),
            pending_parts=self.store.pending_parts,
            # reservations (issue 33): no node whose window the job's time limit would cross
            windows=schedviews.Windows(self.c.reservations.blocked, wall))

    def _waits(self, job: Job, wall: float, running: dict[int, int]) -> str | None:
        """Why the job waits whatever the nodes (held, -d, BeginTime, array limit), "" when
        it may be placed, None when its dependency ended it."""
        begin = job.req.begin_time
        if job.held:
            return held_reason(job.held)
        if why := jobextras.dependency_reason(self.store, job, wall):  # -d (issue 22)
            return None if why == jobextras.CANCELLED else why
        if begin is not None and begin > wall:
            return "BeginTime"
        if job.array_throttle and self._running(job, running) >= job.array_throttle:
            return "JobArrayTaskLimit"  # --array=...%N: N of its tasks run already
        return ""

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
            return decision.reason
        first = (job.partition, job.need, job.time_limit, job.req_nodes, job.exc_nodes)
        if decision.partition != job.partition:  # where it runs from now on
            got = checked[decision.partition]
            job.partition, job.need, job.time_limit = decision.partition, got.need, got.time_limit
            job.req_nodes, job.exc_nodes = got.req_nodes, got.exc_nodes
        why = self._allocate(job, decision.shares)
        if why:
            (job.partition, job.need, job.time_limit, job.req_nodes, job.exc_nodes) = first
        elif job.alt_parts:
            job.alt_parts = ()  # it runs in this partition
            self.store.touch(job)
        return why

    def _elsewhere(self, job: Job, checked: dict[str, Any]) -> Iterator[Pending]:
        """A job of several partitions (`-p a,b`): its request resolved for each other one in
        turn, as it would be submitted there (asked only once its first cannot start it)."""
        for name in job.alt_parts:
            got = self.store.submission.check(attrs.evolve(job.req, partition=name, array=""))
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
                1 for j in self.store.jobs.values()
                if j.array_job_id == job.array_job_id and j.state in ACTIVE)
        return got

    def _allocate(self, job: Job, shares: dict[str, Share]) -> str:
        """Apply the core's start: the shares counted, the job allocated (off pending in
        _pass), its nodes told; "JobHeldUser" if the table refused (held meanwhile)."""
        nodes = self.c.nodes
        take(self.store.uses, job.id, shares)
        job.shares = dict(shares)
        job.reason = "None"
        # hostlist order, as SLURM_JOB_NODELIST lists them; the first is the batch host
        order = tuple(hostlist.expand(hostlist.fold(list(shares))))
        booting = not all(self.ready(nodes[n]) for n in order)
        err = self.store.apply(job, je.Allocate(order, booting=booting))
        if err:  # give the resources back
            for name in list(shares):
                self.store.release(job, name)
            return "JobHeldUser"
        for name in order:
            self.store.sync_node(name)
        return ""

    def members(self, pc: Any) -> list[NodeRecord]:
        """The partition's nodes now, dynamic ones (issue 13) included, in placement order (by
        Weight, then config order). Kept until the config or a partition's membership changes:
        building and sorting it for each job cost O(nodes) a submission. Callers only read it."""
        c = self.c
        token = (c.members_gen, id(c.nodes))
        hit = self._members.get(pc.name)
        if hit is not None and hit[0] == token:
            return hit[1]
        live = c.partition_nodes(pc.name)
        names: Iterable[str] = pc.nodes if live is None else live
        nodes = c.nodes
        index = self.store.index
        out = sorted((nodes[n] for n in dict.fromkeys(names) if n in nodes),
                     key=lambda n: (n.cfg.weight, index.get(n.name, len(index))))
        self._members[pc.name] = (token, out)
        return out

    def ready(self, node: NodeRecord) -> bool:
        flags = node.state.flags
        return node.conn is not None and not (
            flags & {Flag.POWERING_UP, Flag.POWERED_DOWN, Flag.NO_RESPOND})

    def try_launch(self, job: Job) -> None:
        """CONFIGURING -> RUNNING once every node of the job is up and connected."""
        if job.state == CONFIGURING and all(
                (n := self.c.nodes.get(name)) is not None and self.ready(n) for name in job.nodes):
            self.store.apply(job, je.NodesReady())

    def _bulk(self, job: Job) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The job's script and environment: in memory until a snapshot put them in their
        files (one small read per launch then)."""
        if not job.bulk_on_disk or self.c.site.state_dir is None:
            return job.req.script, job_env(job)
        try:
            if job.bulk_at is not None:
                return bulkfiles.read_packed(self.c.site.state_dir, job.id, job.bulk_at)
            return bulkfiles.read(self.c.site.state_dir, job.id)
        except (OSError, ValueError) as exc:
            logs.event("job script unreadable", logging.ERROR, job=job.id, error=str(exc))
            why = f"rctld: the batch script of job {job.id} cannot be read: {exc}"
            return f"#!/bin/sh\necho {shlex.quote(why)} >&2\nexit 1\n", ()

    def heard(self, name: str, runs: Iterable[tuple[int, int]]) -> None:
        """The node named these runs: it has them (or had them and reported their end)."""
        unheard = self._unheard.get(name)
        if unheard:
            runs = set(runs)
            any_run = {jid for jid, run in runs if run == -1}  # an older rnoded's job ids
            unheard.difference_update({r for r in unheard if r in runs or r[0] in any_run})
            if not unheard:
                del self._unheard[name]

    def never_delivered(self, name: str, job: Job) -> bool:
        """Whether the node has never named the job's current run since this rctld launched
        it there: a node whose registration lists neither it nor its ending never had it (its
        LaunchJob went to a dead connection, or the node refused the frame: a controller clock
        stepped forward, issue 30), so the same run can be sent again without a requeue."""
        return (job.id, job.restarts) in self._unheard.get(name, ())

    def forget_unheard(self, name: str, keep: Iterable[tuple[int, int]]) -> None:
        """Drop the node's entries for runs that are no longer current there."""
        unheard = self._unheard.get(name)
        if unheard:
            unheard.intersection_update(keep)
            if not unheard:
                del self._unheard[name]

    def launch(self, job: Job, names: tuple[str, ...]) -> None:
        """The table's Launch effect: LaunchJob for the current run to each node, sent once the
        run is on disk (a crash after it never forgets a launch the node acted on)."""
        nodelist = hostlist.fold(list(job.nodes))
        req = job.req
        name = job_name(req)
        limit = None if job.time_limit is None else job.time_limit * 60.0
        if req.time_limit_s is not None and req.time_limit is not None:
            limit = req.time_limit_s
        script, env = self._bulk(job)
        job.run_limit = ()  # this run's node enforces the limit as it is now
        per_node = tuple(job.shares[n].cpus if n in job.shares else 0
                         for n in hostlist.expand(nodelist))
        for node_name in names:
            self._unheard.setdefault(node_name, set()).add((job.id, job.restarts))
            share = job.shares.get(node_name)
            if share is None:
                continue
            spec = m.JobSpec(
                job_id=job.id, name=name, user=req.user, uid=req.uid, gid=req.gid,
                script=script, workdir=req.workdir, stdout=job.stdout, stderr=req.stderr,
                argv=req.argv, env=env, nodelist=nodelist, num_nodes=len(job.nodes),
                ntasks=req.ntasks, cpus_per_task=req.cpus_per_task, cpus=share.cpus,
                mem_mib=share.mem, gpus=share.gpus, time_limit=limit,
                kill_wait=self.store.kill_wait,
                restarts=job.restarts, partition=job.partition, submit_host=req.submit_host,
                array_job_id=job.array_job_id, array_task_id=job.array_task_id,
                cluster_name=self.c.config.cluster_name, cpus_per_node=per_node,
                **jobextras.spec_fields(req),
            )
            # not connected: its silence is seen as a lost job after the grace time
            self.c.push(node_name, m.LaunchJob(spec, epoch=self.c.epoch))
        logs.event("job started", job=job.id, nodes=nodelist, restarts=job.restarts)
