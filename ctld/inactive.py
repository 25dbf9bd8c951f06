"""InactiveLimit: an allocation (ralloc, rrun outside a job) whose command has not said it is
alive for that many seconds ends TIMEOUT, Reason InactiveLimit, as slurmctld ends one whose
salloc no longer answers its pings.

The commands say so themselves (JobControl "alive", every second while their command runs):
the controller never connects back to them. The time of the last word is soft state: after a
restart every running allocation starts a full limit afresh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctld import logs
from statemachine import jobtable as jt
from statemachine.jobstates import CONFIGURING, RUNNING

if TYPE_CHECKING:
    from ctld.jobrecord import Job
    from ctld.jobs import Jobs

KIND = "inactive"  # Cluster.deadlines key: (job id, KIND)
REASON = "InactiveLimit"


class InactiveWatch:
    def __init__(self, store: Jobs) -> None:
        self.store = store
        self.c = store.c
        self.last: dict[int, float] = {}  # allocation job id -> when its command last spoke

    @property
    def limit(self) -> float:
        return float(self.c.config.jobs.inactive_limit)

    def watched(self, job: Job) -> bool:
        return job.req.allocation and job.state in (RUNNING, CONFIGURING)

    def alive(self, job: Job) -> None:
        """The job's command spoke (or the job just started, or rctld did): a full limit."""
        if not self.watched(job):
            self.last.pop(job.id, None)
            return
        now = self.c.clock()
        self.last[job.id] = now
        if self.limit > 0:
            key = (job.id, KIND)
            due = self.c.deadlines.when(key)
            if due is None or due < now:  # an entry still ahead fires and looks again
                self.c.deadlines.schedule(key, now + self.limit)

    def fired(self, job_id: int) -> None:
        """Its deadline came: end it if its command is still silent, else look again later."""
        job = self.store.jobs.get(job_id)
        if job is None or not self.watched(job) or self.limit <= 0:
            self.last.pop(job_id, None)
            return
        last = self.last.get(job_id, self.c.clock())
        due = last + self.limit
        if due > self.c.clock():
            self.c.deadlines.schedule((job_id, KIND), due)
            return
        self.last.pop(job_id, None)
        job.reason = REASON  # kept through COMPLETING into the end (jobstates.end_reason)
        err = self.store.apply(job, jt.Inactive())
        if err is None:
            logs.event("allocation inactive", job=job.id, limit=int(self.limit))

    def forget(self, job: Job) -> None:
        self.last.pop(job.id, None)
        self.c.deadlines.cancel((job.id, KIND))
