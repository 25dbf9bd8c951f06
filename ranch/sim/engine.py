"""The simulator: a workload's jobs through the pure scheduling core in virtual time, as the
controller runs it (ctld/jobs/jobstart.py, ctld/jobs/backfill.py): the FIFO pass
(ranch/sched/fifo.py) after every submission and job end, and under sched/backfill the
planner (ranch/sched/backfill.py) every bf_interval."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

import attrs

from ranch.conf.model import ClusterConfig
from ranch.sched import backfill as planner
from ranch.sched.fifo import Cluster, Queued, schedule
from ranch.sched.model import (
    Ending,
    Holder,
    Need,
    Node,
    NodeUse,
    Partition,
    Pending,
    Share,
    Start,
    take,
)
from ranch.sim.trace import TraceJob

TOP_PRIORITY = 4294901760  # Slurm's priority/basic, as ctld/jobs/jobrecord.py's

# A job's priority now: the queue is taken by (-priority, id), as the controller's store
# orders it. A closure may keep state of its own (fair share from the runs that ended).
Priority = Callable[[TraceJob, float], int]


def basic_priority(job: TraceJob, now: float) -> int:
    """priority/basic: each later job one less (TOP - id - nice)."""
    return TOP_PRIORITY - job.id - job.nice


class Order:
    """How the queue is ordered: `priority` each job's now, `key` its place (lowest first).
    This one is priority/basic's, over a priority callable; ranch/sim/multifactor.py's
    recomputes every `period` seconds (`tick`, given the runs running and those ended since
    the last tick), as the controller's priorities owner does."""

    period: float = 0.0  # seconds between ticks (0: none)

    def __init__(self, priority: Priority = basic_priority) -> None:
        self._priority = priority

    def submitted(self, job: TraceJob, now: float) -> None:
        """A job entered the queue."""

    def priority(self, job: TraceJob, now: float) -> int:
        return self._priority(job, now)

    def key(self, job: TraceJob, priority: int) -> tuple:
        return (-priority, job.id)

    def tick(self, now: float, running: Sequence[Run], ended: Sequence[Run]) -> None:
        """A calc period fell due."""


@attrs.define
class Run:
    """What became of one job in the simulation."""

    job: TraceJob
    partition: str
    nodes: int
    cpus: int  # CPUs allocated, on all its nodes
    start: float | None = None
    end: float | None = None
    by: str = ""  # "fifo" (the event pass) or "backfill" (the planner)


@attrs.frozen
class Outcome:
    """A simulation's result: each job's run (in submission order), those refused (no node of
    their partition could ever hold them, or no such partition), and the cluster's CPUs."""

    runs: tuple[Run, ...]
    refused: tuple[tuple[TraceJob, str], ...]
    total_cpus: int
    scheduler: str
    cycles: int  # backfill cycles run
    priority: str = "priority/basic"  # PriorityType


def cluster_of(cfg: ClusterConfig) -> tuple[dict[str, Node], dict[str, Partition],
                                            dict[str, list[str]], str]:
    """The config's nodes (all up), partitions and their members in placement order (by
    Weight, then config order), and the default partition's name."""
    nodes = {n.name: Node(n.name, n.cpus, n.real_memory, n.gpus, frozenset(n.features))
             for n in cfg.nodes}
    index = {n.name: i for i, n in enumerate(cfg.nodes)}
    weight = {n.name: n.weight for n in cfg.nodes}
    parts: dict[str, Partition] = {}
    members: dict[str, list[str]] = {}
    for p in cfg.partitions:
        names = sorted((n for n in dict.fromkeys(p.nodes) if n in nodes),
                       key=lambda n: (weight[n], index[n]))
        members[p.name] = names
        parts[p.name] = Partition(p.name, p.state == "UP", p.max_time,
                                  (len(names), sum(nodes[n].cpus for n in names)))
    default = next((p.name for p in cfg.partitions if p.default),
                   cfg.partitions[0].name if cfg.partitions else "")
    return nodes, parts, members, default


class Simulator:
    """One run of a workload under one config."""

    def __init__(self, cfg: ClusterConfig, priority: Priority | Order = basic_priority) -> None:
        self.cfg = cfg
        self.order = priority if isinstance(priority, Order) else Order(priority)
        self.ended: list[Run] = []  # since the last tick
        self.nodes, self.parts, self.members, self.default = cluster_of(cfg)
        self.uses: dict[str, NodeUse] = {}
        self.holders: dict[int, Holder] = {}
        self.pending: dict[int, tuple[TraceJob, Pending, Run]] = {}
        self.running: dict[int, tuple[Run, dict[str, Share], float]] = {}
        s = cfg.scheduler
        self.backfill = s.backfill
        self.interval = s.bf_interval
        self.params = planner.Params(
            window=s.bf_window, resolution=s.bf_resolution, max_job_test=s.bf_max_job_test,
            max_job_user=s.bf_max_job_user, max_job_part=s.bf_max_job_part,
            min_prio_reserve=s.bf_min_prio_reserve, busy_nodes=s.bf_busy_nodes)
        self.cycles = 0

    # -- a job as the core sees it ---------------------------------------------------------

    def request(self, job: TraceJob) -> tuple[Pending, Run] | str:
        """The job resolved against the config, as a submission is, or why it is refused. A
        job of processors alone takes as few nodes as the partition's smallest holds them on
        (sbatch -n P: P CPUs over ceil(P / CPUs) nodes); one of nodes takes those nodes."""
        name = job.partition or self.default
        part = self.parts.get(name)
        names = self.members.get(name, [])
        if part is None or not names:
            return "no such partition"
        if job.nodes:
            k = job.nodes
            per = job.cpus_per_node or math.ceil(job.procs / k)
        else:
            ppn = min(self.nodes[n].cpus for n in names)
            k = math.ceil(job.procs / ppn)
            per = math.ceil(job.procs / k)
        need = Need(k, per, 0, 0, exclusive=job.exclusive)
        fit = [n for n in names if self.nodes[n].cpus >= need.cpus]
        if len(fit) < k:
            return f"{k} node(s) of {need.cpus} CPUs asked, partition {name} has {len(fit)}"
        cpus = sum(sorted((self.nodes[n].cpus for n in fit), reverse=True)[:k]) \
            if need.exclusive else need.cpus * k
        pend = Pending(job.id, name, need, 0, job.time_limit, uid=job.uid,
                       ntasks=job.procs, num_nodes=k)
        return pend, Run(job, name, k, cpus)

    # -- the core's passes -----------------------------------------------------------------

    def _queue(self, now: float) -> list[Queued]:
        keyed = []
        for job, pend, _run in self.pending.values():
            prio = self.order.priority(job, now)
            keyed.append((self.order.key(job, prio), attrs.evolve(pend, priority=prio)))
        keyed.sort(key=lambda t: t[0])
        return [Queued(p) for _, p in keyed]

    def _cluster(self) -> Cluster:
        return Cluster(nodes=self.nodes, partitions=self.parts, members=self.members,
                       uses=self.uses, holders=self.holders,
                       pending_parts={p.partition for _, p, _ in self.pending.values()})

    def _start(self, job_id: int, shares: dict[str, Share], now: float, by: str) -> float:
        """Apply a start; the job's end (its runtime, or its limit if it runs past it)."""
        job, pend, run = self.pending.pop(job_id)
        take(self.uses, job_id, shares)
        self.holders[job_id] = Holder(job.uid)
        run.start, run.by = now, by
        limit = pend.time_limit if pend.time_limit is not None else \
            self.parts[pend.partition].max_time
        bound = now + limit * 60 if limit is not None else math.inf
        end = min(now + job.runtime, bound)
        self.running[job_id] = (run, shares, bound)
        return end

    def fifo(self, now: float) -> list[tuple[int, float]]:
        """The event pass; (job id, end) of each job it started."""
        out = []
        for d in schedule(self._cluster(), self._queue(now)):
            if isinstance(d, Start):
                out.append((d.job_id, self._start(d.job_id, dict(d.shares), now, "fifo")))
        return out

    def plan(self, now: float) -> list[tuple[int, float]]:
        """One backfill cycle; (job id, end) of each job it started."""
        self.cycles += 1
        ends = [Ending(bound, jid, shares) for jid, (_r, shares, bound) in self.running.items()]
        out = []
        for e in planner.plan(self._cluster(), self._queue(now), ends, now, self.params):
            if isinstance(e, Start):
                out.append((e.job_id, self._start(e.job_id, dict(e.shares), now, "backfill")))
        return out

    def _finish(self, job_id: int, now: float) -> None:
        run, shares, _ = self.running.pop(job_id)
        run.end = now
        if self.order.period:
            self.ended.append(run)
        for name, share in shares.items():
            self.uses[name].remove(job_id, share)
            if not self.uses[name].jobs:
                del self.uses[name]
        self.holders.pop(job_id, None)

    # -- virtual time ----------------------------------------------------------------------

    def run(self, jobs: Sequence[TraceJob]) -> Outcome:
        """Every job submitted at its time, scheduled until all have ended. Events at one
        instant: ends, then submissions, then a calc period's recompute (when the order has
        one: every `order.period` while jobs are still to come or to end), then the FIFO pass,
        then a backfill cycle if one is due. A cycle with nothing changed since the last one
        is skipped: with the same jobs on the same nodes it could start none (time only brings
        reservations closer)."""
        runs: list[Run] = []
        refused: list[tuple[TraceJob, str]] = []
        # (time, 0 end | 1 submit | 2 calc period, job index/id)
        events: list[tuple[float, int, int]] = []
        by_index = list(jobs)
        for i, job in enumerate(by_index):
            heapq.heappush(events, (job.submit, 1, i))
        period = self.order.period
        if period and by_index:
            first = min(j.submit for j in by_index)
            heapq.heappush(events, (math.floor(first / period) * period, 2, 0))
        changed = False
        next_cycle = 0.0
        while events or (self.pending and self.backfill and changed):
            if events:
                now = events[0][0]
                if self.backfill and changed and next_cycle < now:
                    now = next_cycle  # a cycle falls due before the next event
            else:
                now = next_cycle
            kicked = False
            while events and events[0][0] == now:
                _, kind, ref = heapq.heappop(events)
                if kind == 0:
                    self._finish(ref, now)
                elif kind == 2:
                    self.order.tick(now, [r for r, _, _ in self.running.values()], self.ended)
                    self.ended = []
                    if events:  # more to come or to end: the next period
                        heapq.heappush(events, (now + period, 2, 0))
                else:
                    job = by_index[ref]
                    got = self.request(job)
                    if isinstance(got, str):
                        refused.append((job, got))
                        continue
                    pend, run = got
                    runs.append(run)
                    self.pending[job.id] = (job, pend, run)
                    self.order.submitted(job, now)
                kicked = changed = True
            started = self.fifo(now) if kicked and self.pending else []
            if self.backfill and now >= next_cycle:
                if changed and self.pending:
                    started += self.plan(now)
                    changed = False
                next_cycle = (math.floor(now / self.interval) + 1) * self.interval
            for job_id, end in started:
                heapq.heappush(events, (end, 0, job_id))
            changed = changed or bool(started)
        total = sum(n.cpus for n in self.nodes.values())
        return Outcome(tuple(runs), tuple(refused), total, self.cfg.scheduler.type,
                       self.cycles, self.cfg.priority.type)
