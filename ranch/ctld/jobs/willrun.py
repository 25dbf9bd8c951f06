"""sbatch --test-only: when and where a job would start, without submitting it (slurmctld's
will-run test). The running jobs are taken to end at their time limits, earliest first (one
without a limit a year from now); the answer is the first moment the job then fits, on the
nodes first fit would give it (ranch/sched/willrun.py). Pending jobs and dependencies are not
weighed, as slurmctld's will-run does not weigh them either."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ranch.conf import hostlist
from ranch.ctld.jobs import schedviews
from ranch.protocol import messages as m
from ranch.sched import willrun
from ranch.sched.fifo import Cluster
from ranch.sched.model import Ending

if TYPE_CHECKING:
    from ranch.ctld.ports import JobStore

YEAR = 365 * 86400.0


def _ends(jobs: JobStore, wall: float) -> list[Ending]:
    """Each running job's end at its time limit."""
    from ranch.ctld.jobs.jobrecord import ACTIVE

    ends = []
    for job in jobs.jobs.values():
        if job.state not in ACTIVE or not job.shares:
            continue
        limit = job.time_limit * 60.0 if job.time_limit is not None else YEAR
        if job.req.time_limit_s is not None and job.req.time_limit is not None:
            limit = job.req.time_limit_s  # the seconds rnoded enforces
        ends.append(Ending((job.start_time or wall) + limit, job.id, job.shares))
    return ends


def will_run(jobs: JobStore, req: m.SubmitJob) -> m.SubmitReply | m.Error:
    from ranch.ctld.jobs.jobrecord import Job

    checked = jobs.submission.check(req)
    if isinstance(checked, m.Error):
        return checked
    pc = jobs.c.config.partition(checked.partition)
    wall = jobs.c.wall()
    probe = Job(id=jobs.next_id, req=req, partition=checked.partition,
                time_limit=checked.time_limit, priority=1, submit_time=wall, need=checked.need,
                req_nodes=checked.req_nodes, exc_nodes=checked.exc_nodes)
    members = jobs.starts.members(pc)
    cluster = Cluster(nodes=schedviews.NodeViews().over(jobs.c.nodes), partitions={},
                      members={checked.partition: [n.name for n in members]}, uses=jobs.uses,
                      holders=schedviews.Holders(jobs.jobs), pending_parts=())
    got = willrun.will_run(schedviews.pending(probe), cluster, _ends(jobs, wall),
                           wall)
    if isinstance(got, str):
        return m.Error("bad_request", "Requested node configuration is not available: "
                       "required nodes are down, drained or reserved" if got != "Resources"
                       else "Requested nodes are busy", field="nodelist")
    start, shares = got
    if req.begin_time is not None and req.begin_time > start:
        start = req.begin_time
    start = math.floor(start)
    return m.SubmitReply(job_id=jobs.next_id, start_time=start,
                         nodes=hostlist.fold(sorted(shares, key=lambda n: jobs.index.get(n, 0))),
                         cpus=sum(s.cpus for s in shares.values()),
                         partition=checked.partition)
