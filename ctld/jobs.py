"""Batch jobs in the controller: their records and lifecycle, the queue, what each node holds,
and reconciliation with what nodes report (JobEnd, the job ids in heartbeats).

Node state is never set here: allocations and the COMPLETING flag reach a node as statemachine
events through the Cluster, whose table decides IDLE/MIXED/ALLOCATED and drng/drain.
"""

from __future__ import annotations

import bisect
import logging
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from conf import hostlist
from ctld import logs
from ctld.scheduler import (
    Need,
    NodeUse,
    Share,
    capacity_fits,
    cpus_per_node,
    place,
    task_capacity,
)
from ctld.wire import kept
from protocol import messages as m
from protocol.codec import converter
from statemachine import Flag, events

if TYPE_CHECKING:
    from ctld.cluster import Cluster
    from ctld.node import NodeRecord

PENDING, CONFIGURING, RUNNING, COMPLETING = "PENDING", "CONFIGURING", "RUNNING", "COMPLETING"
ACTIVE = frozenset({CONFIGURING, RUNNING, COMPLETING})
REQUEUE = "REQUEUE"  # a COMPLETING job's outcome: back to PENDING once its processes are gone
# What a node's JobEnd.state makes of the job (LAUNCH_FAILED: the job could not start: FAILED).
END_STATES = {"COMPLETED": "COMPLETED", "FAILED": "FAILED", "TIMEOUT": "TIMEOUT",
              "CANCELLED": "CANCELLED", "OUT_OF_MEMORY": "OUT_OF_MEMORY",
              "LAUNCH_FAILED": "FAILED"}
TOP_PRIORITY = 4294901760  # Slurm's priority/basic: each later job one less
DEFAULT_KILL_WAIT = 30.0
DEFAULT_MIN_JOB_AGE = 300.0  # seconds a finished job stays listed (Slurm's MinJobAge)
NOT_AVAILABLE = "Requested node configuration is not available"
MAX_ARRAY = 10000  # tasks of one --array (Slurm's MaxArraySize default is 1001)
BEGIN_KEY = ("", "begin")  # Cluster.deadlines key: a pending job's BeginTime has come


@attrs.define(eq=False, slots=True)
class Job:
    id: int
    req: m.SubmitJob
    partition: str
    time_limit: int | None  # minutes; None = UNLIMITED
    priority: int
    submit_time: float  # wall clock
    need: Need
    req_nodes: tuple[str, ...] = ()  # -w, expanded
    exc_nodes: tuple[str, ...] = ()  # -x, expanded
    stdout: str = ""
    state: str = PENDING
    reason: str = "None"
    held: str = ""  # "" | "user" | "admin"
    start_time: float | None = None
    end_time: float | None = None
    nodes: tuple[str, ...] = ()
    shares: dict[str, Share] = attrs.Factory(dict)
    awaiting: set[str] = attrs.Factory(set)  # nodes whose JobEnd of this run is still due
    outcome: str = ""  # the state a COMPLETING job takes when `awaiting` empties
    restarts: int = 0
    exit_code: int = 0
    signal: int = 0
    message: str = ""
    array_job_id: int = 0
    array_task_id: int | None = None
    launched_at: float | None = None  # trio clock, for the submit->start figures
    submitted_at: float = 0.0  # trio clock
    saved: orjson.Fragment | None = None
    record: dict | None = None

    @property
    def batch_host(self) -> str:
        return self.nodes[0] if self.nodes else ""


def parse_array(text: str) -> list[int]:
    """sbatch --array: "1-8", "0,4,7-9", "1-9:2", with an ignored "%limit"."""
    spec = text.split("%", 1)[0].strip()
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"empty element in --array={text}")
        rng, _, step_s = part.partition(":")
        lo_s, dash, hi_s = rng.partition("-")
        lo = int(lo_s)
        hi = int(hi_s) if dash else lo
        step = int(step_s) if step_s else 1
        if lo < 0 or hi < lo or step < 1:
            raise ValueError(f"bad range {part!r} in --array={text}")
        span = range(lo, hi + 1, step)
        if len(out) + len(span) > MAX_ARRAY:  # counted before anything is built
            raise ValueError(f"--array={text} makes more than {MAX_ARRAY} jobs")
        out.extend(span)
    return sorted(set(out))


def _setting(cfg: Any, key: str, default: float) -> float:
    for k, v in cfg.settings:
        if k.lower() == key.lower():
            try:
                return float(v)
            except (TypeError, ValueError):
                return default
    return default


def _spread_need(req: m.SubmitJob, part: str, num_nodes: int, members: dict[str, Any],
                 req_nodes: Sequence[str], exc_nodes: Sequence[str]) -> Need | str:
    """-n without -N (or -N min-max): the tasks go over as many nodes as they need. Refused
    (the message returned) only when no set of the partition's nodes could ever hold them."""
    top = req.max_nodes or 0
    if top and top < num_nodes:
        return f"--nodes {num_nodes}-{top}: the maximum is below the minimum"
    need = Need(num_nodes, req.cpus_per_task, req.mem_mib, req.gpus, req.exclusive,
                spread=True, tasks=req.ntasks, cpus_per_task=req.cpus_per_task,
                max_nodes=top)
    held = [task_capacity(members[n].cfg, need) for n in dict.fromkeys(req_nodes)]
    excluded = set(exc_nodes) | set(req_nodes)
    rest = sorted((task_capacity(n.cfg, need) for name, n in members.items()
                   if name not in excluded), reverse=True)
    rest = [c for c in rest if c > 0]
    best = held + rest[: max(0, top - len(held))] if top else held + rest
    if len(best) >= num_nodes and sum(best) < req.ntasks:  # too few nodes: the caller says so
        upto = f"{top} " if top else ""
        return (f"{NOT_AVAILABLE}: {req.ntasks} task(s) of {req.cpus_per_task} CPU(s) each; "
                f"{upto}node(s) of partition {part} hold {sum(best)} such task(s) at most")
    # the fewest nodes that could hold the tasks (each node's CPUs counted): rqueue's NODES
    held_tasks = fewest = 0
    while fewest < len(best) and held_tasks < req.ntasks:
        held_tasks += best[fewest]
        fewest += 1
    return attrs.evolve(need, nodes=max(num_nodes, fewest))


class Jobs:
    """Every job the controller holds, and the node allocations they make."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self.jobs: dict[int, Job] = {}
        self.pending: list[Job] = []  # by (-priority, id)
        self.pending_parts: Counter[str] = Counter()
        self.uses: dict[str, NodeUse] = {}
        self.next_id = 1
        self.kicked = False  # a scheduling pass is due
        self.gen = 0  # bumped by every change a job listing shows
        self._list: tuple[int, bytes] | None = None
        self.config_changed()

    # -- configuration ---------------------------------------------------------------------

    def config_changed(self) -> None:
        cfg = self.c.config
        self.index = {n.name: i for i, n in enumerate(cfg.nodes)}
        self.kill_wait = _setting(cfg, "KillWait", DEFAULT_KILL_WAIT)
        self.min_job_age = _setting(cfg, "MinJobAge", DEFAULT_MIN_JOB_AGE)
        # A running job a node's heartbeats leave out for this long was lost there (its
        # LaunchJob went astray, the node lost it without an ending...).
        t = cfg.timeouts
        self.missing_grace = 3.0 * t.heartbeat_interval + t.message_timeout
        self.kicked = True

    # -- bookkeeping -------------------------------------------------------------------------

    def _touch(self, job: Job) -> None:
        job.saved = None
        job.record = None
        self.gen += 1
        c = self.c
        if not c.dirty:
            c.dirty = True
            c.on_dirty()

    def _add_pending(self, job: Job) -> None:
        bisect.insort(self.pending, job, key=lambda j: (-j.priority, j.id))
        self.pending_parts[job.partition] += 1

    def _drop_pending(self, job: Job) -> None:
        try:
            self.pending.remove(job)
        except ValueError:
            return
        self.pending_parts[job.partition] -= 1
        if self.pending_parts[job.partition] <= 0:
            del self.pending_parts[job.partition]

    def _sync_node(self, name: str) -> None:
        """Feed the node's allocation and COMPLETING flag to the state machine as events."""
        node = self.c.nodes.get(name)
        if node is None:
            return
        use = self.uses.get(name) or NodeUse()
        wall = self.c.wall()
        cpus = min(use.cpus, node.state.cpus_total)
        if node.state.cpus_alloc != cpus:
            _, err = self.c.apply_event(node, events.AllocationChanged(now=wall, cpus_alloc=cpus))
            if err:
                logs.event("allocation not applied", logging.WARNING, node=name, error=err)
            elif cpus:
                node.last_busy = wall
        completing = any(
            self.jobs[j].state == COMPLETING and name in self.jobs[j].awaiting
            for j in use.jobs if j in self.jobs
        )
        if (Flag.COMPLETING in node.state.flags) != completing:
            self.c.apply_event(node, events.Completing(now=wall, active=completing))
        gpus = tuple(sorted(use.gpus))
        if node.alloc_mem != use.mem or node.gpus_used != gpus:
            node.alloc_mem = use.mem
            node.gpus_used = gpus
            self.c.touch(node)
        if not use.jobs:
            self.uses.pop(name, None)

    def _release(self, job: Job, name: str) -> None:
        share = job.shares.pop(name, None)
        use = self.uses.get(name)
        if share is not None and use is not None and job.id in use.jobs:
            use.jobs.discard(job.id)
            use.cpus -= share.cpus
            use.mem -= share.mem
            use.gpus.difference_update(share.gpus)
        self._sync_node(name)

    def _release_all(self, job: Job) -> None:
        job.awaiting.clear()  # first, so that no node keeps COMPLETING for this job
        for name in list(job.shares):
            self._release(job, name)

    # -- submission ------------------------------------------------------------------------

    def submit(self, req: m.SubmitJob) -> m.SubmitReply | m.Error:
        checked = self._check(req)
        if isinstance(checked, m.Error):
            return checked
        part, need, req_nodes, exc_nodes, limit, tasks = checked
        wall, now = self.c.wall(), self.c.clock()
        ids: list[int] = []
        first = self.next_id
        for task in tasks:
            jid = self.next_id
            self.next_id += 1
            stdout = req.stdout or ("slurm-%A_%a.out" if task is not None else "slurm-%j.out")
            job = Job(
                id=jid, req=req, partition=part, time_limit=limit,
                priority=max(1, TOP_PRIORITY - jid), submit_time=wall, need=need,
                req_nodes=req_nodes, exc_nodes=exc_nodes, stdout=stdout,
                held="user" if req.hold else "",
                array_job_id=first if task is not None else 0, array_task_id=task,
                submitted_at=now,
            )
            if job.held:
                job.reason = "JobHeldUser"
            elif self.pending_parts.get(part):
                job.reason = "Priority"
            self.jobs[jid] = job
            self._add_pending(job)
            self._touch(job)
            ids.append(jid)
        logs.event("job submitted", job=first, jobs=len(ids), user=req.user, partition=part,
                   nodes=need.nodes, cpus=need.cpus)
        self.kicked = True
        self.c.flush_programs()  # runs the scheduling pass, then any resume program it asked for
        return m.SubmitReply(job_id=first, job_ids=tuple(ids))

    def _check(self, req: m.SubmitJob) -> Any:
        cfg = self.c.config

        def bad(message: str, fld: str) -> m.Error:
            return m.Error("bad_request", message, field=fld)

        for fld, value in (("num_nodes", req.num_nodes), ("ntasks", req.ntasks),
                           ("cpus_per_task", req.cpus_per_task)):
            if value < 1:
                return bad(f"{fld} must be 1 or more, got {value}", fld)
        for fld, value in (("uid", req.uid), ("gid", req.gid)):
            if value < 0:
                return bad(f"{fld} must be 0 or more, got {value}", fld)
        if req.mem_mib < 0:
            return bad(f"mem_mib must be 0 or more, got {req.mem_mib}", "mem_mib")
        if req.gpus < 0:
            return bad(f"gpus must be 0 or more, got {req.gpus}", "gpus")
        if req.time_limit_s is not None and req.time_limit_s <= 0:
            return bad(f"time_limit_s must be above 0, got {req.time_limit_s}", "time_limit_s")
        if req.time_limit is not None and req.time_limit < 0:
            return bad(f"time_limit must be 0 or more minutes, got {req.time_limit}",
                       "time_limit")
        if req.begin_time is not None and not 0 <= req.begin_time < 1e11:  # NaN fails too
            return bad(f"begin_time must be seconds since the epoch, got {req.begin_time}",
                       "begin_time")
        if not req.script.strip():
            return bad("the batch script is empty", "script")
        if not req.workdir.startswith("/"):
            return bad(f"workdir must be an absolute path, got {req.workdir!r}", "workdir")
        if req.partition:
            pc = cfg.partition(req.partition)
            if pc is None:
                return bad(f"invalid partition specified: {req.partition}", "partition")
        else:
            pc = cfg.default_partition
            if pc is None:
                return bad("no partition given (-p) and the config names no Default=YES "
                           "partition", "partition")
        if pc.state in ("DRAIN", "INACTIVE"):
            return bad(f"partition {pc.name} is {pc.state}: it accepts no new jobs",
                       "partition")
        members = {n.name: n for n in self._members(pc)}
        try:
            req_nodes = tuple(hostlist.expand(req.nodelist)) if req.nodelist.strip() else ()
            exc_nodes = tuple(hostlist.expand(req.exclude)) if req.exclude.strip() else ()
        except ValueError as exc:
            return bad(f"bad hostlist: {exc}", "nodelist")
        for fld, names in (("nodelist", req_nodes), ("exclude", exc_nodes)):
            unknown = [n for n in names if n not in self.c.nodes]
            if unknown:
                return bad(f"invalid node name specified: {hostlist.fold(unknown)}", fld)
        outside = [n for n in req_nodes if n not in members]
        if outside:
            return bad(f"{NOT_AVAILABLE}: node(s) {hostlist.fold(outside)} are not in partition "
                       f"{pc.name}", "nodelist")
        both = set(req_nodes) & set(exc_nodes)
        if both:
            return bad(f"node(s) {hostlist.fold(sorted(both))} are both required (-w) and "
                       "excluded (-x)", "exclude")
        num_nodes = max(req.num_nodes, len(set(req_nodes)))
        if req.max_nodes is not None and req.max_nodes != num_nodes:
            spread = _spread_need(req, pc.name, num_nodes, members, req_nodes, exc_nodes)
            if isinstance(spread, str):
                return bad(spread, "ntasks" if req.max_nodes == 0 else "max_nodes")
            need = spread
        else:
            need = Need(num_nodes, cpus_per_node(req.ntasks, req.cpus_per_task, num_nodes),
                        req.mem_mib, req.gpus, req.exclusive)
        cpus = need.cpus
        fitting = [n for name, n in members.items()
                   if name not in exc_nodes and capacity_fits(n.cfg, need)]
        short = [n for n in req_nodes if not capacity_fits(members[n].cfg, need)]
        if short:
            return bad(f"{NOT_AVAILABLE}: node(s) {hostlist.fold(short)} have fewer than {cpus} "
                       f"CPUs, {req.mem_mib} MB or {req.gpus} GPU(s)", "nodelist")
        if len(fitting) < num_nodes:
            what = f"{cpus} CPU(s)"
            if req.mem_mib:
                what += f", {req.mem_mib} MB of memory"
            if req.gpus:
                what += f", {req.gpus} GPU(s)"
            return bad(f"{NOT_AVAILABLE}: the job needs {num_nodes} node(s) with {what} each; "
                       f"partition {pc.name} has {len(fitting)} such node(s)", "num_nodes")
        limit = req.time_limit
        if limit is None:
            limit = pc.default_time if pc.default_time is not None else pc.max_time
        tasks: list[int | None] = [None]
        if req.array:
            try:
                tasks = list(parse_array(req.array))
            except ValueError as exc:
                return bad(str(exc) if "array" in str(exc) else f"--array={req.array}: {exc}",
                           "array")
        return pc.name, need, req_nodes, exc_nodes, limit, tasks

    # -- scheduling ------------------------------------------------------------------------

    def run(self) -> None:
        """The scheduling pass, when something happened that may let a job start."""
        if not self.kicked:
            return
        self.kicked = False
        self._pass()

    def _pass(self) -> None:
        cfg = self.c.config
        blocked: set[str] = set()
        started = 0
        wall = self.c.wall()
        wake = math.inf  # the earliest BeginTime still ahead
        for job in self.pending:
            if job.state != PENDING:
                continue
            if blocked and blocked.issuperset(self.pending_parts):
                break  # every partition waits on a job ahead: nothing below may start
            pc = cfg.partition(job.partition)
            begin = job.req.begin_time
            if job.held:
                why = "JobHeldUser" if job.held == "user" else "JobHeldAdmin"
            elif begin is not None and begin > wall:
                why = "BeginTime"
                wake = min(wake, begin)
            elif pc is None:
                why = "PartitionDown"
            elif pc.state != "UP":
                why = "PartitionDown"
            elif job.time_limit is not None and pc.max_time is not None and (
                    job.time_limit > pc.max_time):
                why = "PartitionTimeLimit"
            elif job.partition in blocked:
                why = "Priority"
            else:
                why = self._try_place(job, pc)
                if not why:
                    started += 1
                    continue
                if why == "Resources" and not job.req_nodes:
                    blocked.add(job.partition)
            if job.reason != why:
                job.reason = why
                self._touch(job)
        if started:  # one rebuild, not a list.remove per started job
            self.pending = [j for j in self.pending if j.state == PENDING]
            self.pending_parts = Counter(j.partition for j in self.pending)
        if wake < math.inf:  # the deadline task runs a pass when the first BeginTime comes
            due = self.c.clock() + (wake - wall)
            when = self.c.deadlines.when(BEGIN_KEY)
            if when is None or due < when:
                self.c.deadlines.schedule(BEGIN_KEY, due)

    def _try_place(self, job: Job, pc: Any) -> str:
        nodes = self.c.nodes
        required = [nodes[n] for n in dict.fromkeys(job.req_nodes) if n in nodes]
        excluded = set(job.exc_nodes)
        others = (n for n in self._members(pc) if n.name not in excluded)
        shares, why = place(job.need, required, others, self.uses, self.index)
        if shares is None:
            if why == "ReqNodeNotAvail" and required:
                down = [n.name for n in required if n.state.flags or not n.state.schedulable]
                if down:
                    why = f"ReqNodeNotAvail, UnavailableNodes:{hostlist.fold(down)}"
            return why
        job.state = CONFIGURING  # _pass drops it from the pending list
        job.reason = "None"
        # hostlist order, as SLURM_JOB_NODELIST lists them; the first is the batch host
        job.nodes = tuple(hostlist.expand(hostlist.fold(list(shares))))
        job.shares = dict(shares)
        for name, share in shares.items():
            use = self.uses.setdefault(name, NodeUse())
            use.cpus += share.cpus
            use.mem += share.mem
            use.gpus.update(share.gpus)
            use.jobs.add(job.id)
            self._sync_node(name)
        self._touch(job)
        self._try_launch(job)
        return ""

    def _members(self, pc: Any) -> list[NodeRecord]:
        """The partition's nodes now, dynamic ones (issue 13) included."""
        names: Iterable[str] = pc.nodes
        for part in self.c._partitions:
            if part["name"] == pc.name:
                names = part["nodes"]
                break
        nodes = self.c.nodes
        return [nodes[n] for n in names if n in nodes]

    def _ready(self, node: NodeRecord) -> bool:
        flags = node.state.flags
        return node.conn is not None and not (
            flags & {Flag.POWERING_UP, Flag.POWERED_DOWN, Flag.NO_RESPOND})

    def _try_launch(self, job: Job) -> None:
        """CONFIGURING -> RUNNING once every node of the job is up and connected."""
        nodes = [self.c.nodes.get(n) for n in job.nodes]
        if any(n is None or not self._ready(n) for n in nodes):
            return
        wall = self.c.wall()
        nodelist = hostlist.fold(list(job.nodes))
        req = job.req
        name = req.name or (os.path.basename(req.command) if req.command else "wrap")
        limit = None if job.time_limit is None else job.time_limit * 60.0
        if req.time_limit_s is not None and req.time_limit is not None:
            limit = req.time_limit_s
        for node in nodes:
            assert node is not None
            share = job.shares[node.name]
            spec = m.JobSpec(
                job_id=job.id, name=name, user=req.user, uid=req.uid, gid=req.gid,
                script=req.script, workdir=req.workdir, stdout=job.stdout, stderr=req.stderr,
                argv=req.argv, env=req.env, nodelist=nodelist, num_nodes=len(job.nodes),
                ntasks=req.ntasks, cpus_per_task=req.cpus_per_task, cpus=share.cpus,
                mem_mib=share.mem, gpus=share.gpus, time_limit=limit, kill_wait=self.kill_wait,
                restarts=job.restarts, partition=job.partition, submit_host=req.submit_host,
                array_job_id=job.array_job_id, array_task_id=job.array_task_id,
            )
            node.conn.push(m.LaunchJob(spec))  # type: ignore[union-attr]
        job.state = RUNNING
        job.start_time = wall
        job.launched_at = self.c.clock()
        job.awaiting = set(job.nodes)
        self._touch(job)
        logs.event("job started", job=job.id, nodes=nodelist, restarts=job.restarts)

    # -- endings ---------------------------------------------------------------------------

    def _finish(self, job: Job, state: str) -> None:
        self._release_all(job)
        if state == REQUEUE:
            self._requeue(job)
            return
        job.state = state
        job.outcome = ""
        job.end_time = self.c.wall()
        job.reason = "None"
        if job.start_time is None:
            job.start_time = job.end_time
        self._touch(job)
        self.kicked = True
        logs.event("job ended", job=job.id, state=state, exit_code=job.exit_code,
                   signal=job.signal)

    def _requeue(self, job: Job) -> None:
        job.restarts += 1
        job.state = PENDING
        job.reason = "None"
        job.nodes = ()
        job.shares = {}
        job.awaiting = set()
        job.outcome = ""
        job.start_time = job.end_time = None
        job.launched_at = None
        self._add_pending(job)
        self._touch(job)
        self.kicked = True
        logs.event("job requeued", job=job.id, restarts=job.restarts)

    def _kill(self, job: Job, names: Iterable[str], signal: int = 0, why: str = "") -> None:
        for name in names:
            node = self.c.nodes.get(name)
            if node is not None and node.conn is not None:
                node.conn.push(m.KillJob(job_id=job.id, signal=signal, reason=why))

    def _end_with(self, job: Job, outcome: str, why: str) -> None:
        """Stop a job's processes everywhere; `outcome` once all of them are gone."""
        if job.state == CONFIGURING or (job.state == RUNNING and not job.awaiting):
            self._finish(job, outcome)
            return
        job.outcome = outcome
        if job.state != COMPLETING:
            job.state = COMPLETING
            self._kill(job, sorted(job.awaiting), 0, why)
        for name in job.awaiting:
            self._sync_node(name)
        self._touch(job)

    def ended(self, node: NodeRecord, ends: Sequence[m.JobEnd]) -> None:
        """JobEnd reports (at least once each: a repeat is a no-op)."""
        for end in ends:
            job = self.jobs.get(end.job_id)
            if job is None or end.restarts != job.restarts or node.name not in job.awaiting:
                continue
            job.awaiting.discard(node.name)
            outcome = END_STATES.get(end.state, "FAILED")
            if job.state == RUNNING and (node.name == job.batch_host or outcome in (
                    "FAILED", "OUT_OF_MEMORY")):
                job.exit_code, job.signal = end.exit_code, end.signal
                job.message = end.message
                if end.state == "LAUNCH_FAILED":
                    job.message = f"launch failed on {node.name}: {end.message}"
                self._release(job, node.name)
                self._end_with(job, outcome, "ended")
                continue
            self._release(job, node.name)
            if job.state == COMPLETING and not job.awaiting:
                self._finish(job, job.outcome or outcome)
            else:
                self._touch(job)

    def _expected(self, name: str, job_id: int) -> bool:
        job = self.jobs.get(job_id)
        return job is not None and job.state in (RUNNING, COMPLETING) and name in job.awaiting

    def heartbeat(self, node: NodeRecord, msg: m.Heartbeat) -> tuple[int, ...]:
        """Endings in a heartbeat, jobs it should run and does not (lost after a grace time),
        and the jobs it runs that are not its own any more."""
        if msg.jobs_ended:
            self.ended(node, msg.jobs_ended)
        name = node.name
        use = self.uses.get(name)
        if use is not None and use.jobs:
            now = self.c.clock()
            running = set(msg.job_ids)
            for jid in sorted(use.jobs):
                job = self.jobs.get(jid)
                if (job is not None and name in job.awaiting and jid not in running
                        and job.launched_at is not None
                        and now - job.launched_at > self.missing_grace):
                    self._gone_from(job, name)
        if not msg.job_ids:
            return ()
        return tuple(j for j in msg.job_ids if not self._expected(name, j))

    def _gone_from(self, job: Job, name: str) -> None:
        """The node does not run the job and reported no ending for it."""
        logs.event("node lost a job", logging.WARNING, node=name, job=job.id)
        job.awaiting.discard(name)
        self._release(job, name)
        if job.state == COMPLETING:
            if not job.awaiting:
                self._finish(job, job.outcome)
        else:
            self._lost(job, f"lost by node {name}")

    def registered(self, node: NodeRecord, msg: m.Register) -> tuple[int, ...]:
        """A (re)registration: endings, jobs the node lost, stale copies, launches that waited."""
        name = node.name
        if msg.jobs_ended:
            self.ended(node, msg.jobs_ended)
        running = set(msg.job_ids)
        use = self.uses.get(name)
        for jid in sorted(use.jobs) if use else ():
            job = self.jobs.get(jid)
            if job is None or name not in job.awaiting or jid in running:
                continue
            # The node does not run it and did not report its end: lost with the old rnoded
            # (or its LaunchJob went to a dead connection).
            self._gone_from(job, name)
        for jid in sorted(use.jobs) if (use := self.uses.get(name)) else ():
            job = self.jobs.get(jid)
            if job is not None and job.state == CONFIGURING:
                self._try_launch(job)
        self._sync_node(name)  # an allocation its earlier state refused (UNKNOWN at restart)
        self.kicked = True
        return tuple(j for j in msg.job_ids if not self._expected(name, j))

    def _lost(self, job: Job, why: str) -> None:
        """A job's node died under it: requeue (--requeue) or NODE_FAIL; its other nodes are
        told to stop what they hold."""
        self._kill(job, sorted(job.awaiting), 0, "node_down")
        if job.req.requeue:
            job.message = why
            self._finish(job, REQUEUE)
        else:
            job.message = why
            self._finish(job, "NODE_FAIL")

    def node_lost(self, node: NodeRecord, requeue: bool, wait: bool = False) -> None:
        """effects.KillJobs of the state machine (DOWN, ResumeTimeout, POWER_DOWN_FORCE...)."""
        use = self.uses.get(node.name)
        if use is None:
            return
        if wait:
            self._fail_jobs_on(node.name, use, requeue)
            return
        for jid in sorted(use.jobs):
            job = self.jobs.get(jid)
            if job is None:
                continue
            if job.state == COMPLETING:
                job.awaiting.discard(node.name)
                self._release(job, node.name)
                if not job.awaiting:
                    self._finish(job, job.outcome)
                continue
            self._kill(job, [node.name], 0, "node_down")
            job.awaiting.discard(node.name)
            if requeue:
                self._lost(job, f"node {node.name} failed")
            else:
                self._kill(job, sorted(job.awaiting), 0, "node_down")
                job.message = f"node {node.name} failed"
                self._finish(job, "NODE_FAIL")
        self.kicked = True

    def _fail_jobs_on(self, name: str, use: NodeUse, requeue: bool) -> None:
        """State=FAIL: the node is alive, so its jobs' processes are killed and awaited
        (COMPLETING, the node `failg`) before each job is requeued (--requeue) or NODE_FAIL."""
        for jid in sorted(use.jobs):
            job = self.jobs.get(jid)
            if job is None or job.state not in (CONFIGURING, RUNNING):
                continue  # a COMPLETING job already ends its own way
            job.message = f"node {name} failed"
            self._end_with(job, REQUEUE if requeue and job.req.requeue else "NODE_FAIL",
                           "node_fail")
        self.kicked = True

    # -- user requests ---------------------------------------------------------------------

    def _targets(self, ids: Sequence[int]) -> tuple[list[Job], list[str]]:
        jobs, errors = [], []
        for jid in ids:
            job = self.jobs.get(jid)
            if job is None:
                errors.append(f"Invalid job id specified: {jid}")
            else:
                jobs.append(job)
                # an array job's id names all its tasks, as in Slurm
                if job.array_job_id == jid:
                    jobs += [j for j in self.jobs.values()
                             if j.array_job_id == jid and j.id != jid]
        return jobs, errors

    @staticmethod
    def _may(job: Job, user: str, uid: int) -> bool:
        return uid == 0 or user == "root" or uid == job.req.uid or (user and user == job.req.user)

    def cancel(self, msg: m.CancelJobs) -> m.JobResult:
        if not 0 <= msg.signal <= 64:
            return m.JobResult(ok=False, errors=(f"invalid signal {msg.signal}",))
        if msg.job_ids:
            jobs, errors = self._targets(msg.job_ids)
        elif msg.only_user:
            jobs, errors = list(self.jobs.values()), []
        else:
            return m.JobResult(ok=False, errors=("no job id given",))
        if msg.only_user:
            jobs = [j for j in jobs if j.req.user == msg.only_user]
        done: list[int] = []
        for job in jobs:
            if not self._may(job, msg.user, msg.uid):
                errors.append(f"Kill job error on job id {job.id}: Access/permission denied")
                continue
            if job.state not in ACTIVE and job.state != PENDING:
                if msg.job_ids:
                    errors.append(f"Kill job error on job id {job.id}: Job/step already "
                                  "completing or completed")
                continue
            if msg.signal:
                if job.state == RUNNING:
                    self._kill(job, sorted(job.awaiting), msg.signal, "signal")
                    done.append(job.id)
                else:
                    errors.append(f"Signal job error on job id {job.id}: job is {job.state}")
                continue
            if job.state == PENDING:
                self._drop_pending(job)
                self._finish(job, "CANCELLED")
            elif job.state == COMPLETING:
                job.outcome = "CANCELLED"
                self._touch(job)
            else:
                self._end_with(job, "CANCELLED", "cancelled")
            done.append(job.id)
        logs.event("cancel", jobs=",".join(map(str, done)) or "-", user=msg.user or "-",
                   signal=msg.signal, refused=len(errors))
        self.c.flush_programs()
        return m.JobResult(ok=not errors, job_ids=tuple(done), errors=tuple(errors))

    def control(self, msg: m.JobControl) -> m.JobResult:
        action = msg.action.lower()
        if action not in ("requeue", "hold", "release", "begin"):
            return m.JobResult(ok=False, errors=(
                f"unknown action {msg.action!r}; valid: requeue, hold, release, begin",))
        if action == "begin" and not (
                msg.begin_time is not None and 0 <= msg.begin_time < 1e11):
            return m.JobResult(ok=False, errors=(
                f"begin needs begin_time in seconds since the epoch, got {msg.begin_time}",))
        jobs, errors = self._targets(msg.job_ids)
        done: list[int] = []
        for job in jobs:
            if not self._may(job, msg.user, msg.uid):
                errors.append(f"job {job.id}: Access/permission denied")
                continue
            if action == "hold":
                if job.state != PENDING:
                    errors.append(f"job {job.id}: Job is no longer pending execution")
                    continue
                job.held = "user" if msg.uid == job.req.uid else "admin"
                job.reason = "JobHeldUser" if job.held == "user" else "JobHeldAdmin"
            elif action == "begin":  # rcontrol update JobId=N StartTime=T
                if job.state != PENDING:
                    errors.append(f"job {job.id}: Job is no longer pending execution")
                    continue
                job.req = attrs.evolve(job.req, begin_time=msg.begin_time)
                job.reason = "None"  # the next pass says BeginTime again if still ahead
            elif action == "release":
                if not job.held:
                    errors.append(f"job {job.id}: Job is not held")
                    continue
                job.held = ""
                job.reason = "None"
            else:  # requeue
                if job.state == PENDING:
                    errors.append(f"job {job.id}: Job is pending execution")
                    continue
                if not job.req.requeue and job.state in ACTIVE:
                    errors.append(f"job {job.id}: Requeue of this job is disabled "
                                  "(--no-requeue)")
                    continue
                if job.state in ACTIVE:
                    self._end_with(job, REQUEUE, "requeued")
                else:
                    self._requeue(job)
            self._touch(job)
            self.kicked = True
            done.append(job.id)
        logs.event("job control", action=action, jobs=",".join(map(str, done)) or "-",
                   user=msg.user or "-", refused=len(errors))
        self.c.flush_programs()
        return m.JobResult(ok=not errors, job_ids=tuple(done), errors=tuple(errors))

    # -- queries ---------------------------------------------------------------------------

    def jobs_holding(self, names: Sequence[str]) -> list[tuple[int, list[str]]]:
        """(job id, every node of the job) for the active jobs holding any of `names` (the
        resume program's SLURM_RESUME_FILE)."""
        seen: dict[int, list[str]] = {}
        for name in names:
            use = self.uses.get(name)
            for jid in sorted(use.jobs) if use else ():
                job = self.jobs.get(jid)
                if job is not None and job.state in ACTIVE and jid not in seen:
                    seen[jid] = list(job.nodes)
        return sorted(seen.items())

    def record(self, job: Job) -> dict:
        rec = job.record
        if rec is not None:
            return rec
        req = job.req
        rec = job.record = {
            "job_id": job.id,
            "array_job_id": job.array_job_id,
            "array_task_id": job.array_task_id,
            "name": req.name or (os.path.basename(req.command) if req.command else "wrap"),
            "user": req.user,
            "uid": req.uid,
            "gid": req.gid,
            "partition": job.partition,
            "state": job.state,
            "reason": job.reason,
            "priority": job.priority,
            "submit_time": job.submit_time,
            "start_time": job.start_time,
            "end_time": job.end_time,
            "eligible_time": max(job.submit_time, req.begin_time or 0.0),
            "time_limit": job.time_limit,
            "nodes": hostlist.fold(list(job.nodes)) if job.nodes else "",
            "node_count": len(job.nodes) or job.need.nodes,
            "cpus": sum(s.cpus for s in job.shares.values()) or (
                req.ntasks * req.cpus_per_task if job.need.spread
                else job.need.cpus * job.need.nodes),
            "ntasks": req.ntasks,
            "cpus_per_task": req.cpus_per_task,
            "mem_per_node": req.mem_mib,
            "gpus_per_node": req.gpus,
            "gpu_indices": {n: list(s.gpus) for n, s in job.shares.items() if s.gpus},
            "req_nodes": hostlist.fold(list(job.req_nodes)) if job.req_nodes else "",
            "exc_nodes": hostlist.fold(list(job.exc_nodes)) if job.exc_nodes else "",
            "exclusive": req.exclusive,
            "workdir": req.workdir,
            "command": req.command or "(wrap)",
            "stdout": job.stdout,
            "stderr": req.stderr,
            "requeue": req.requeue,
            "restarts": job.restarts,
            "exit_code": job.exit_code,
            "signal": job.signal,
            "held": job.held,
            "batch_host": job.batch_host,
            "submit_host": req.submit_host,
            "message": job.message,
        }
        return rec

    def list_body(self, ids: Sequence[int] = ()) -> bytes:
        """The JobList body (orjson, the codec's shape); the full list is cached per change."""
        if not ids and self._list is not None and self._list[0] == self.gen:
            return self._list[1]
        wanted = [self.jobs[j] for j in ids if j in self.jobs] if ids else self.jobs.values()
        if ids:
            extra = [j for j in self.jobs.values() if j.array_job_id in ids and j.id not in ids]
            wanted = [*wanted, *extra]
        body = kept(orjson.dumps({"generated_at": self.c.wall(),
                                  "jobs": [self.record(j) for j in wanted]}))
        if not ids:
            self._list = (self.gen, body)
        return body

    # -- state file ------------------------------------------------------------------------

    def _purge(self) -> None:
        cutoff = self.c.wall() - self.min_job_age
        old = [j.id for j in self.jobs.values()
               if j.state not in ACTIVE and j.state != PENDING and (j.end_time or 0) < cutoff]
        for jid in old:
            del self.jobs[jid]
        if old:
            self.gen += 1

    def save_doc(self) -> dict[str, Any]:
        self._purge()
        out = []
        for job in self.jobs.values():
            if job.saved is None:
                job.saved = orjson.Fragment(kept(orjson.dumps(job_json(job))))
            out.append(job.saved)
        return {"next_id": self.next_id, "jobs": out}

    def restore(self, doc: dict[str, Any] | None, journal: Iterable[dict] = ()) -> None:
        doc = doc or {}
        self.next_id = max(self.next_id, int(doc.get("next_id", 1)))
        for entry in doc.get("jobs", ()):
            try:
                job = job_from_json(entry)
            except (KeyError, TypeError, ValueError) as exc:
                logs.event("saved job unreadable; dropped", logging.WARNING, error=repr(exc))
                continue
            self._adopt(job)
        replayed = 0
        for entry in journal:
            try:
                job = job_from_json(entry)
            except (KeyError, TypeError, ValueError) as exc:
                logs.event("journalled job unreadable; dropped", logging.WARNING, error=repr(exc))
                continue
            if job.id in self.jobs or job.id < int(doc.get("next_id", 1)):
                continue
            self._adopt(job)
            replayed += 1
        for name in list(self.c.nodes):
            self._sync_node(name)
        self.kicked = True
        logs.event("jobs restored", jobs=len(self.jobs), from_journal=replayed,
                   next_id=self.next_id)

    def _adopt(self, job: Job) -> None:
        self.jobs[job.id] = job
        if job.state in (RUNNING, COMPLETING):
            job.launched_at = self.c.clock()  # the missing-job grace counts from the restart
        self.next_id = max(self.next_id, job.id + 1)
        if job.state == PENDING:
            self._add_pending(job)
        for name, share in job.shares.items():
            use = self.uses.setdefault(name, NodeUse())
            use.cpus += share.cpus
            use.mem += share.mem
            use.gpus.update(share.gpus)
            use.jobs.add(job.id)


def job_json(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "req": converter.unstructure(job.req),
        "partition": job.partition,
        "time_limit": job.time_limit,
        "priority": job.priority,
        "submit_time": job.submit_time,
        "need": attrs.asdict(job.need),
        "req_nodes": list(job.req_nodes),
        "exc_nodes": list(job.exc_nodes),
        "stdout": job.stdout,
        "state": job.state,
        "reason": job.reason,
        "held": job.held,
        "start_time": job.start_time,
        "end_time": job.end_time,
        "nodes": list(job.nodes),
        "shares": {n: [s.cpus, s.mem, list(s.gpus)] for n, s in job.shares.items()},
        "awaiting": sorted(job.awaiting),
        "outcome": job.outcome,
        "restarts": job.restarts,
        "exit_code": job.exit_code,
        "signal": job.signal,
        "message": job.message,
        "array_job_id": job.array_job_id,
        "array_task_id": job.array_task_id,
    }


def job_from_json(d: dict[str, Any]) -> Job:
    return Job(
        id=int(d["id"]),
        req=converter.structure(d["req"], m.SubmitJob),
        partition=d["partition"],
        time_limit=d.get("time_limit"),
        priority=int(d.get("priority", 1)),
        submit_time=float(d.get("submit_time") or 0.0),
        need=Need(**d["need"]),
        req_nodes=tuple(d.get("req_nodes", ())),
        exc_nodes=tuple(d.get("exc_nodes", ())),
        stdout=d.get("stdout", "slurm-%j.out"),
        state=d.get("state", PENDING),
        reason=d.get("reason", "None"),
        held=d.get("held", ""),
        start_time=d.get("start_time"),
        end_time=d.get("end_time"),
        nodes=tuple(d.get("nodes", ())),
        shares={n: Share(int(v[0]), int(v[1]), tuple(v[2])) for n, v in
                d.get("shares", {}).items()},
        awaiting=set(d.get("awaiting", ())),
        outcome=d.get("outcome", ""),
        restarts=int(d.get("restarts", 0)),
        exit_code=int(d.get("exit_code", 0)),
        signal=int(d.get("signal", 0)),
        message=d.get("message", ""),
        array_job_id=int(d.get("array_job_id", 0)),
        array_task_id=d.get("array_task_id"),
    )
