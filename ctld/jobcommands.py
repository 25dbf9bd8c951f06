"""User requests on jobs: cancel/signal (rcancel) and requeue/hold/release/begin (rcontrol),
with who may act on which job."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ctld import logs
from ctld.jobrecord import ACTIVE, COMPLETING, PENDING, REQUEUE, RUNNING, Job
from protocol import messages as m


class JobCommands:
    """Mixed into ctld.jobs.Jobs."""

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
        """Root (uid 0; the name "root" proves nothing, the client picks it) or the job's own."""
        return uid == 0 or uid == job.req.uid or bool(user and user == job.req.user)

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
        left_pending = False
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
                self._finish(job, "CANCELLED")  # off the pending list after the loop
                left_pending = True
            elif job.state == COMPLETING:
                job.outcome = "CANCELLED"
                self._touch(job)
            else:
                self._end_with(job, "CANCELLED", "cancelled")
            done.append(job.id)
        if left_pending:
            self._rebuild_pending()
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
