"""Allocations whose command is gone, ended as slurmctld 22.05 ends them (measured): one whose
ralloc/rrun never spoke after it started (killed while the job pended) FAILED 1:0; one whose
ralloc has not said it is alive for InactiveLimit seconds TIMEOUT, Reason InactiveLimit; rrun's
own allocation (rrun outside a job) CANCELLED once rrun is silent with no step running. An
allocation nobody holds (salloc --no-shell: SubmitJob.held_by "") is not watched, as in Slurm.

Unlike slurmctld, an allocation is watched even with InactiveLimit=0 (issue 30): its holder's
silence for HOLDER_GONE seconds then ends it the same way, so that a ralloc that died, or whose
release never got through, cannot hold its CPUs for ever.

The commands say so themselves (JobControl "alive", every second while their command runs):
the controller never connects back to them. Their last word is soft state: after a restart
every running allocation starts afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ranch.ctld import logs
from ranch.statemachine import jobevents as je
from ranch.statemachine import steptable as st
from ranch.statemachine.jobstates import CONFIGURING, RUNNING

if TYPE_CHECKING:
    from ranch.ctld.deadlines import Deadlines
    from ranch.ctld.jobs.jobrecord import Job
    from ranch.ctld.jobs.ports import JobDoor
    from ranch.ctld.jobs.settings import JobSettings

KIND = "inactive"  # Cluster.deadlines key (job id, KIND): InactiveLimit's look
ORPHAN = "orphan"  # Cluster.deadlines key (job id, ORPHAN): is rrun still there?
REASON = "InactiveLimit"
# seconds (at least; MessageTimeout when longer) a holder has to speak once its job runs, and
# of silence after which rrun, with no step running, is taken to be gone: they speak as soon
# as they see the job run, then every second until they have released it
ORPHAN_GRACE = 5.0
# InactiveLimit's stand-in when it is 0 (unset): two minutes without a word from a holder that
# speaks every second (and is taken to have just spoken after an rctld restart) means it is gone
HOLDER_GONE = 120.0


class InactiveWatch:
    """The allocations whose holder speaks, and when each last spoke."""

    def __init__(self, jobs: JobDoor, settings: JobSettings, *, clock: Callable[[], float],
                 deadlines: Deadlines) -> None:
        self._jobs = jobs
        self._settings = settings
        self._clock = clock
        self._deadlines = deadlines
        self.since: dict[int, float] = {}  # allocation -> its start, or its command's last word
        self.spoke: dict[int, float] = {}  # allocation -> its command's last word, if any

    @property
    def limit(self) -> float:
        """InactiveLimit, or HOLDER_GONE where it is unset."""
        return float(self._settings.config.jobs.inactive_limit) or HOLDER_GONE

    @property
    def grace(self) -> float:
        """ORPHAN_GRACE, or MessageTimeout when longer (slurmctld gives up on telling salloc
        of its start after about that long)."""
        return max(ORPHAN_GRACE, float(self._settings.config.timeouts.message_timeout))

    def watched(self, job: Job) -> bool:
        """A running allocation whose holder speaks (not --no-shell's)."""
        return job.req.allocation and bool(job.req.held_by) and job.state in (RUNNING,
                                                                               CONFIGURING)

    def started(self, job: Job, *, restart: bool = False) -> None:
        """The allocation runs: its holder has `grace` seconds to say it is there (it
        speaks once it sees the job run), InactiveLimit from now. After an rctld restart the
        words before it are lost: the holder is taken to have just spoken."""
        if not self.watched(job):
            return
        self._heard(job)
        if restart:
            self.spoke[job.id] = self._clock()
        self._orphan_look(job.id, self._clock() + self.grace)

    def alive(self, job: Job) -> None:
        """JobControl "alive": the job's command still runs."""
        if self.watched(job):
            self.spoke[job.id] = self._clock()
            self._heard(job)

    def _heard(self, job: Job) -> None:
        now = self._clock()
        self.since[job.id] = now
        if self.limit > 0:
            key = (job.id, KIND)
            due = self._deadlines.when(key)
            if due is None or due < now:  # an entry still ahead fires and looks again
                self._deadlines.schedule(key, now + self.limit)

    def _orphan_look(self, job_id: int, when: float) -> None:
        key = (job_id, ORPHAN)
        due = self._deadlines.when(key)
        if due is None or due < when:
            self._deadlines.schedule(key, when)

    def fired(self, job_id: int) -> None:
        """InactiveLimit's look: end the job if its command is still silent, else look again
        when the limit of its last word is over."""
        job = self._jobs.jobs.get(job_id)
        if job is None or not self.watched(job) or self.limit <= 0:
            return
        due = self.since.get(job_id, self._clock()) + self.limit
        if due > self._clock():
            self._deadlines.schedule((job_id, KIND), due)
            return
        job.reason = REASON  # kept through COMPLETING into the end (jobstates.end_reason)
        if self._jobs.apply(job, je.Inactive()) is None:
            logs.event("allocation inactive", job=job.id, limit=int(self.limit))

    def step_ended(self, job: Job) -> None:
        """A step of `job` ended: rrun's own allocation is released by rrun right after, or
        rrun is gone (its SIGKILL ended the step: rnoded lost its I/O)."""
        if job.req.held_by == "rrun" and self.watched(job):
            self._orphan_look(job.id, self._clock() + self.grace)

    def orphaned(self, job_id: int) -> None:
        """Is the holder there? One that never spoke since the job started was gone before
        (killed while its job pended): the job ends FAILED 1:0, as slurmctld ends one whose
        salloc/srun it cannot tell of its start ("Communication connection failure"). rrun's
        allocation is then cancelled when it has no step running and rrun has been silent for
        `grace` seconds; ralloc's is InactiveLimit's."""
        job = self._jobs.jobs.get(job_id)
        if job is None or not self.watched(job):
            return
        now = self._clock()
        last = self.spoke.get(job_id)
        if last is None:
            if self._jobs.apply(job, je.Complete(exit_code=1)) is None:
                logs.event("allocation unclaimed", job=job.id, holder=job.req.held_by)
            return
        if job.req.held_by != "rrun" or any(s.state == st.RUNNING for s in job.steps):
            return  # ralloc: InactiveLimit's; rrun's step: its end looks again
        if last > now - self.grace:
            self._orphan_look(job_id, last + self.grace)
            return
        if self._jobs.apply(job, je.Cancel()) is None:
            logs.event("allocation orphaned", job=job.id)

    def forget(self, job: Job) -> None:
        """The job ended."""
        self.since.pop(job.id, None)
        self.spoke.pop(job.id, None)
        self._deadlines.cancel((job.id, KIND))
        self._deadlines.cancel((job.id, ORPHAN))
