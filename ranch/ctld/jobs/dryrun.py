"""`rcontrol reconfigure --dry-run [FILE]` (issue 44): the pending queue under a candidate config,
nothing applied: each job's priority and place now and as the priorities owner would set them
(ctld/jobs/priorities.py Priorities.under), and the jobs the scheduling core (ranch/sched/fifo.py,
then under sched/backfill the planner's first cycle) would start at once, over backfill's
snapshot of the live nodes and jobs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ranch.conf import hostlist
from ranch.conf.build import load_config
from ranch.conf.errors import ConfigError
from ranch.ctld import logs
from ranch.ctld.jobs.backfill import params_of
from ranch.ctld.jobs.jobrecord import PENDING, Job
from ranch.ctld.jobs.willrun import YEAR
from ranch.protocol import messages as m
from ranch.sched import backfill as planner
from ranch.sched.fifo import schedule
from ranch.sched.model import Ending, Holder, Start, take

if TYPE_CHECKING:
    from ranch.conf.model import ClusterConfig
    from ranch.ctld.jobs.backfill import Snapshot
    from ranch.ctld.jobs.ports import Queue
    from ranch.ctld.jobs.settings import JobSettings

Under = Callable[[Job], tuple[int, tuple]]


class DryRuns:
    """Answers ReconfigureDryRun from the live queue and nodes."""

    def __init__(self, jobs: Queue, settings: JobSettings, *,
                 under: Callable[[ClusterConfig], Under],
                 snapshot: Callable[[Any, Under], Snapshot]) -> None:
        """`under`: the priorities owner's computation under a config; `snapshot`: backfill's
        snapshot of the nodes and the queue, in the order and with the priorities given."""
        self._jobs = jobs
        self._settings = settings
        self._under = under
        self._snapshot = snapshot

    async def answer(self, msg: m.ReconfigureDryRun) -> m.ReconfigureDryRunReply:
        """Read the candidate (the config in force's own file unless a path is given) in a
        worker thread, then compare; a config that does not load is answered with its errors
        (file:line:col), and nothing is changed either way."""
        path = msg.path or self._settings.config.path
        try:
            candidate = await trio.to_thread.run_sync(load_config, path)
        except ConfigError as exc:
            errors = tuple(d.format().splitlines()[0] for d in exc.errors)  # file:line:col
            return m.ReconfigureDryRunReply(False, errors, path)
        except OSError as exc:
            return m.ReconfigureDryRunReply(False, (f"{path}: {exc.strerror or exc}",), path)
        reply = self.compare(candidate)
        logs.event("reconfigure dry run", logging.INFO, by=msg.user, path=path,
                   reordered=sum(1 for r in reply.rows if r.position_now != r.position_after),
                   would_start=len(reply.starts))
        return reply

    def compare(self, candidate: ClusterConfig) -> m.ReconfigureDryRunReply:
        """The queue now against under `candidate`, and what it would start at once."""
        now = [j for j in self._jobs.pending if j.state == PENDING]
        under = self._under(candidate)
        after = {j.id: under(j) for j in now}
        order = sorted(now, key=lambda j: after[j.id][1])
        place = {j.id: i for i, j in enumerate(order, 1)}
        rows = tuple(m.DryRunRow(j.id, j.req.user, j.partition, j.priority, after[j.id][0],
                                 i, place[j.id]) for i, j in enumerate(now, 1))
        return m.ReconfigureDryRunReply(
            True, (), candidate.path, self._settings.config.priority.type,
            candidate.priority.type, tuple(sorted(rows, key=lambda r: r.position_after)),
            self.starts(candidate, under))

    def starts(self, candidate: ClusterConfig, under: Under) -> tuple[m.DryRunStart, ...]:
        """The event pass a reconfigure runs, then under sched/backfill one planner cycle,
        over a snapshot: the jobs they would start, in order."""
        snap = self._snapshot(candidate, under)
        index = self._settings.index
        out = []
        uses = {n: u.copy() for n, u in snap.cluster.uses.items()}
        holders = dict(snap.cluster.holders)
        ends = list(snap.ends)
        started = set()
        queued = {q.job.id: q for q in snap.queue}
        for d in schedule(snap.cluster, snap.queue):
            if not isinstance(d, Start):
                continue
            out.append(m.DryRunStart(d.job_id, _nodes(d, index), "main"))
            take(uses, d.job_id, d.shares)
            job = queued[d.job_id].job
            holders[d.job_id] = Holder(job.uid, job.user_exclusive)
            limit = job.time_limit * 60.0 if job.time_limit is not None else YEAR
            ends.append(Ending(snap.now + limit, d.job_id, dict(d.shares)))
            started.add(d.job_id)
        if candidate.scheduler.backfill:
            cluster = attrs.evolve(snap.cluster, uses=uses, holders=holders)
            rest = [q for q in snap.queue if q.job.id not in started]
            for e in planner.plan(cluster, rest, ends, snap.now, params_of(candidate.scheduler),
                                  snap.windows):
                if isinstance(e, Start):
                    out.append(m.DryRunStart(e.job_id, _nodes(e, index), "backfill"))
        return tuple(out)


def _nodes(d: Start, index: dict[str, int]) -> str:
    return hostlist.fold(sorted(d.shares, key=lambda n: index.get(n, 0)))
