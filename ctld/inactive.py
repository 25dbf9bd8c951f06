"""Allocations whose command is gone: InactiveLimit ends one whose ralloc (salloc) has not said
it is alive for that many seconds (TIMEOUT, Reason InactiveLimit, as slurmctld's inactivity
limit ends a silent salloc's), and rrun's own allocation (rrun outside a job) is cancelled once
rrun is silent with no step running, as slurmctld cancels a killed srun's job at once. An
allocation nobody holds (salloc --no-shell: SubmitJob.held_by "") is not watched, as in Slurm.

The commands say so themselves (JobControl "alive", every second while their command runs):
the controller never connects back to them. Their last word is soft state: after a restart
every running allocation starts afresh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctld import logs
from statemachine import jobtable as jt
from statemachine import steptable as st
from statemachine.jobstates import CONFIGURING, RUNNING

if TYPE_CHECKING:
    from ctld.jobrecord import Job
    from ctld.jobs import Jobs

KIND = "inactive"  # Cluster.deadlines key (job id, KIND): InactiveLimit's look
ORPHAN = "orphan"  # Cluster.deadlines key (job id, ORPHAN): is rrun still there?
REASON = "InactiveLimit"
# seconds of silence after which rrun, with no step running, is taken to be gone: it speaks
# every second from the moment it sees its job run until it has released it
ORPHAN_GRACE = 5.0


class InactiveWatch:
    def __init__(self, store: Jobs) -> None:
        self.store = store
        self.c = store.c
        self.since: dict[int, float] = {}  # allocation -> its start, or its command's last word
        self.spoke: dict[int, float] = {}  # allocation -> its command's last word, if any

    @property
    def limit(self) -> float:
        return float(self.c.config.jobs.inactive_limit)

    def watched(self, job: Job) -> bool:
        """A running allocation whose holder speaks (not --no-shell's)."""
        return job.req.allocation and bool(job.req.held_by) and job.state in (RUNNING,
                                                                               CONFIGURING)

    def started(self, job: Job) -> None:
        """The allocation runs (or rctld restarted): its command has a full limit to speak."""
        if not self.watched(job):
            return
        self._heard(job)
        if job.req.held_by == "rrun":
            self._orphan_look(job.id, self.c.clock() + ORPHAN_GRACE)

    def alive(self, job: Job) -> None:
        """JobControl "alive": the job's command still runs."""
        if self.watched(job):
            self.spoke[job.id] = self.c.clock()
            self._heard(job)

    def _heard(self, job: Job) -> None:
        now = self.c.clock()
        self.since[job.id] = now
        if self.limit > 0:
            key = (job.id, KIND)
            due = self.c.deadlines.when(key)
            if due is None or due < now:  # an entry still ahead fires and looks again
                self.c.deadlines.schedule(key, now + self.limit)

    def _orphan_look(self, job_id: int, when: float) -> None:
        key = (job_id, ORPHAN)
        due = self.c.deadlines.when(key)
        if due is None or due < when:
            self.c.deadlines.schedule(key, when)

    def fired(self, job_id: int) -> None:
        """InactiveLimit's look: end the job if its command is still silent, else look again
        when the limit of its last word is over."""
        job = self.store.jobs.get(job_id)
        if job is None or not self.watched(job) or self.limit <= 0:
            return
        due = self.since.get(job_id, self.c.clock()) + self.limit
        if due > self.c.clock():
            self.c.deadlines.schedule((job_id, KIND), due)
            return
        job.reason = REASON  # kept through COMPLETING into the end (jobstates.end_reason)
        if self.store.apply(job, jt.Inactive()) is None:
            logs.event("allocation inactive", job=job.id, limit=int(self.limit))

    def step_ended(self, job: Job) -> None:
        """A step of `job` ended: rrun's own allocation is released by rrun right after, or
        rrun is gone (its SIGKILL ended the step: rnoded lost its I/O)."""
        if job.req.held_by == "rrun" and self.watched(job):
            self._orphan_look(job.id, self.c.clock() + ORPHAN_GRACE)

    def orphaned(self, job_id: int) -> None:
        """Is rrun still there? Cancel its allocation when it has no step running and rrun has
        been silent for ORPHAN_GRACE seconds."""
        job = self.store.jobs.get(job_id)
        if job is None or not self.watched(job):
            return
        if any(s.state == st.RUNNING for s in job.steps):
            return  # the step's end looks again
        now = self.c.clock()
        last = self.spoke.get(job_id)
        if last is not None and last > now - ORPHAN_GRACE:
            self._orphan_look(job_id, last + ORPHAN_GRACE)
            return
        if self.store.apply(job, jt.Cancel()) is None:
            logs.event("allocation orphaned", job=job.id)

    def forget(self, job: Job) -> None:
        """The job ended."""
        self.since.pop(job.id, None)
        self.spoke.pop(job.id, None)
        self.c.deadlines.cancel((job.id, KIND))
        self.c.deadlines.cancel((job.id, ORPHAN))
