"""sbatch --test-only: when and where a job would start, without submitting it (slurmctld's
will-run test). The running jobs are taken to end at their time limits, earliest first (one
without a limit a year from now); the answer is the first moment the job then fits, on the
nodes first fit would give it (ranch/sched/willrun.py). Pending jobs and dependencies are not
weighed, as slurmctld's will-run does not weigh them either."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ranch.conf import hostlist
from ranch.ctld.jobs import schedviews
from ranch.protocol import messages as m
from ranch.sched import willrun
from ranch.sched.fifo import Cluster
from ranch.sched.model import Ending

if TYPE_CHECKING:
    from ranch.ctld.jobs.ports import JobReader, NodesForJobs
    from ranch.ctld.jobs.settings import JobSettings

YEAR = 365 * 86400.0


def running_ends(jobs: JobReader, wall: float) -> list[Ending]:
    """Each running job's end at its time limit; a COMPLETING job's now: it has ended, and
    Slurm frees an ended job's resources at once, a job placed on its COMPLETING nodes
    starting at now + 1 (backfill.c _attempt_backfill: `job_ptr->start_time = now + 1` where
    avail_bitmap overlaps cg_node_bitmap), not at the ended job's limit (issue 44: one node
    of a two-node job freed first let a one-node job backfill there)."""
    from ranch.ctld.jobs.jobrecord import ACTIVE, COMPLETING

    ends = []
    for job in jobs.jobs.values():
        if job.state not in ACTIVE or not job.shares:
            continue
        if job.state == COMPLETING:
            ends.append(Ending(wall, job.id, job.shares))
            continue
        limit = job.time_limit * 60.0 if job.time_limit is not None else YEAR
        if job.req.time_limit_s is not None and job.req.time_limit is not None:
            limit = job.req.time_limit_s  # the seconds rnoded enforces
        ends.append(Ending((job.start_time or wall) + limit, job.id, job.shares))
    return ends


class WillRun:
    """sbatch --test-only's answers."""

    def __init__(self, jobs: JobReader, settings: JobSettings, nodes: NodesForJobs, *,
                 wall: Callable[[], float], next_id: Callable[[], int],
                 check: Callable[[m.SubmitJob], Any], members: Callable[[Any], list[Any]]) -> None:
        """`next_id`: the id the next job would get; `check`: a submission's checks; `members`:
        a partition's nodes in placement order."""
        self._jobs = jobs
        self._settings = settings
        self._nodes = nodes
        self._wall = wall
        self._next_id = next_id
        self._check = check
        self._members = members

    def answer(self, req: m.SubmitJob) -> m.SubmitReply | m.Error:
        """When and where `req` would start now (its id: the next one given), or why never."""
        from ranch.ctld.jobs.jobrecord import Job

        jobs, index = self._jobs, self._settings.index
        next_id = self._next_id()
        checked = self._check(req)
        if isinstance(checked, m.Error):
            return checked
        pc = self._settings.config.partition(checked.partition)
        wall = self._wall()
        probe = Job(id=next_id, req=req, partition=checked.partition,
                    time_limit=checked.time_limit, priority=1, submit_time=wall, need=checked.need,
                    req_nodes=checked.req_nodes, exc_nodes=checked.exc_nodes)
        members = self._members(pc)
        cluster = Cluster(nodes=schedviews.NodeViews().over(self._nodes.nodes), partitions={},
                          members={checked.partition: [n.name for n in members]},
                          uses=jobs.uses, holders=schedviews.Holders(jobs.jobs), pending_parts=())
        got = willrun.will_run(schedviews.pending(probe), cluster, running_ends(jobs, wall),
                               wall)
        if isinstance(got, str):
            return m.Error("bad_request", "Requested node configuration is not available: "
                           "required nodes are down, drained or reserved" if got != "Resources"
                           else "Requested nodes are busy", field="nodelist")
        start, shares = got
        if req.begin_time is not None and req.begin_time > start:
            start = req.begin_time
        start = math.floor(start)
        return m.SubmitReply(job_id=next_id, start_time=start,
                             nodes=hostlist.fold(sorted(shares, key=lambda n: index.get(n, 0))),
                             cpus=sum(s.cpus for s in shares.values()),
                             partition=checked.partition)
