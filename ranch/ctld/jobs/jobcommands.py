"""User requests on jobs: cancel/signal (rcancel) and requeue/hold/release/begin (rcontrol),
with who may act on which job."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from ranch.ctld import logs
from ranch.ctld.jobs.jobrecord import ACTIVE, PENDING, RUNNING, Job, held_reason
from ranch.ctld.jobs.steps import NO_JOB, NOT_YOURS
from ranch.ctld.rights import DENIED, Identity, acting, may_act_on
from ranch.protocol import messages as m
from ranch.statemachine import jobevents as je

if TYPE_CHECKING:
    from ranch.ctld.jobs.jobupdate import JobUpdate
    from ranch.ctld.jobs.ports import JobDoor
    from ranch.ctld.jobs.settings import JobSettings


class JobCommands:
    """rcancel's and rcontrol's job commands on the job store."""

    def __init__(self, jobs: JobDoor, settings: JobSettings, updates: JobUpdate, *,
                 cancel_step: Callable[[Job, int, int], str | None],
                 watched: Callable[[Job], bool], alive: Callable[[Job], None],
                 run_pass: Callable[[], None], programs: Callable[[], None],
                 top: Callable[[tuple[int, ...], Identity], m.JobResult] | None = None) -> None:
        """`cancel_step`: rcancel N.S (ctld/jobs/steps.py); `watched`, `alive`: an allocation's
        holder (ctld/jobs/inactive.py); `run_pass`: the scheduling pass, if one is due;
        `programs`: then the node side's programs it asked for; `top`: rcontrol top
        (ctld/jobs/priorities.py)."""
        self._jobs = jobs
        self._settings = settings
        self.updates = updates
        self._cancel_step = cancel_step
        self._watched = watched
        self._alive = alive
        self._run_pass = run_pass
        self._programs = programs
        self._top = top

    def _actor(self, msg: m.CancelJobs | m.JobControl, actor: Identity | None) -> Identity:
        """Who asks (ctld/rpc/permissions.py acting); None: the user the request names."""
        return actor or acting(self._settings.config, None, msg.uid, msg.user)

    def _targets(self, ids: Sequence[int]) -> tuple[list[Job], list[str]]:
        jobs, errors = [], []
        for jid in ids:
            job = self._jobs.jobs.get(jid)
            if job is None:
                errors.append(f"Invalid job id specified: {jid}")
            else:
                jobs.append(job)
                # an array job's id names all its tasks, as in Slurm
                if job.array_job_id == jid:
                    jobs += [j for j in self._jobs.jobs.values()
                             if j.array_job_id == jid and j.id != jid]
        return jobs, errors

    def _cancel_steps(self, msg: m.CancelJobs, actor: Identity) -> m.JobResult:
        """rcancel N.S: end (or signal) steps; the job's owner or an admin (ctld/jobs/steps.py)."""
        errors, done = [], []
        for jid, sid in msg.steps:
            job = self._jobs.jobs.get(jid)
            if job is not None and job.state == PENDING:
                continue  # scancel N.S of a pending job: nothing to end, and no error
            if job is None or job.state not in ACTIVE:
                errors.append(NO_JOB.format(job=jid, step=sid))
            elif not may_act_on(actor, job.req.uid, job.req.user):
                errors.append(NOT_YOURS.format(job=jid))
            elif (err := self._cancel_step(job, sid, msg.signal)) is not None:
                errors.append(err)
            else:
                done.append(jid)
        return m.JobResult(ok=not errors, job_ids=tuple(done), errors=tuple(errors))

    def cancel(self, msg: m.CancelJobs, actor: Identity | None = None) -> m.JobResult:
        """`actor`: who asks (ctld/rpc/permissions.py acting): the job's owner or an admin may;
        None: the user the request names."""
        actor = self._actor(msg, actor)
        if not 0 <= msg.signal <= 64:
            return m.JobResult(ok=False, errors=(f"invalid signal {msg.signal}",))
        if msg.steps:  # rcancel N.S (with whole jobs, if any, after them)
            stepped = self._cancel_steps(msg, actor)
            if not (msg.job_ids or msg.only_user):
                return stepped
            rest = self.cancel(attrs.evolve(msg, steps=()), actor)
            return m.JobResult(ok=stepped.ok and rest.ok, job_ids=stepped.job_ids + rest.job_ids,
                               errors=stepped.errors + rest.errors)
        if msg.job_ids:
            jobs, errors = self._targets(msg.job_ids)
        elif msg.only_user:
            jobs, errors = list(self._jobs.jobs.values()), []
        else:
            return m.JobResult(ok=False, errors=("no job id given",))
        if msg.only_user:
            jobs = [j for j in jobs if j.req.user == msg.only_user]
        done: list[int] = []
        for job in jobs:
            if not may_act_on(actor, job.req.uid, job.req.user):
                errors.append(f"Kill job error on job id {job.id}: Access/permission denied")
                continue
            if job.state not in ACTIVE and job.state != PENDING:
                if msg.job_ids:
                    errors.append(f"Kill job error on job id {job.id}: Job/step already "
                                  "completing or completed")
                continue
            if msg.signal:
                if job.state == RUNNING:
                    self._jobs.kill(job, sorted(job.awaiting), msg.signal, "signal")
                    done.append(job.id)
                else:
                    errors.append(f"Signal job error on job id {job.id}: job is {job.state}")
                continue
            err = self._jobs.apply(job, je.Cancel())
            if err:
                if msg.job_ids:  # rcancel -u passes over what is already ending
                    errors.append(err)
            else:
                done.append(job.id)
        self._jobs.tidy()
        logs.event("cancel", jobs=",".join(map(str, done)) or "-", user=msg.user or "-",
                   signal=msg.signal, refused=len(errors))
        self._run_pass()
        self._programs()
        return m.JobResult(ok=not errors, job_ids=tuple(done), errors=tuple(errors))

    def alive(self, msg: m.JobControl, actor: Identity) -> m.JobResult:
        """ralloc/rrun: the command holding these allocations still runs (ctld/jobs/inactive.py).
        Nothing durable changes, nothing is logged: it comes every second from each one."""
        jobs, errors = self._targets(msg.job_ids)
        done = []
        for job in jobs:
            if not may_act_on(actor, job.req.uid, job.req.user):
                errors.append(f"job {job.id}: Access/permission denied")
            elif not self._watched(job):
                errors.append(f"job {job.id}: Job/step already completing or completed")
            else:
                self._alive(job)
                done.append(job.id)
        return m.JobResult(ok=not errors, job_ids=tuple(done), errors=tuple(errors))

    def update(self, msg: m.JobControl, actor: Identity) -> m.JobResult:
        """rcontrol update JobId=... Key=Value...: each error as scontrol prints it, "TEXT for
        job ID" (ctld/jobs/jobupdate.py)."""
        if not msg.updates:
            return m.JobResult(ok=False, errors=("No changes specified",))
        errors, done = [], []
        for jid in msg.job_ids:
            jobs, _ = self._targets((jid,))
            if not jobs:
                errors.append(f"Invalid job id specified for job {jid}")
                continue
            for job in jobs:
                if not may_act_on(actor, job.req.uid, job.req.user):
                    err: str | None = DENIED
                else:
                    err = self.updates.update(job, msg.updates, actor)
                if err:
                    errors.append(f"{err} for job {jid}")
                    if len(jobs) > 1:
                        break  # one line for an array, as slurmctld answers for it
                else:
                    done.append(job.id)
        self._jobs.tidy()
        logs.event("job update", jobs=",".join(map(str, done)) or "-", user=msg.user or "-",
                   keys=",".join(k for k, _ in msg.updates), refused=len(errors))
        self._run_pass()
        self._programs()
        return m.JobResult(ok=not errors, job_ids=tuple(done), errors=tuple(dict.fromkeys(errors)))

    def control(self, msg: m.JobControl, actor: Identity | None = None) -> m.JobResult:
        """rcontrol requeue|hold|release|...|update and ralloc's alive and complete; `actor`: who
        asks, None: the user the request names."""
        actor = self._actor(msg, actor)
        action = msg.action.lower()
        if action == "alive":
            return self.alive(msg, actor)
        if action == "update":
            return self.update(msg, actor)
        if action == "top" and self._top is not None:
            result = self._top(msg.job_ids, actor)
            self._run_pass()
            self._programs()
            return result
        refused = _refusal(action, msg)
        if refused:
            return m.JobResult(ok=False, errors=(refused,))
        jobs, errors = self._targets(msg.job_ids)
        done: list[int] = []
        for job in jobs:
            if not may_act_on(actor, job.req.uid, job.req.user):
                errors.append(f"job {job.id}: Access/permission denied")
                continue
            if action in ("complete", "requeue", "requeuehold") and (
                    (action == "complete") != job.req.allocation):
                # Slurm: an allocation is released by its owner, a batch job never is; only
                # batch jobs are requeued (ESLURM_BATCH_ONLY)
                errors.append(f"job {job.id}: " + (
                    "Only batch jobs are accepted or processed" if action == "requeue" else
                    "a batch job ends with its script; only an allocation (ralloc, rrun) is "
                    "released by its owner"))
                continue
            if action == "release" and not job.held:
                continue  # scontrol release of a job not held: nothing to do, and no error
            err = self._jobs.apply(job, _event(action, msg, actor))
            if err:
                errors.append(err)
                continue
            if action in ("hold", "uhold"):
                job.reason = held_reason(job.held)
            elif action in ("begin", "release"):
                if action == "begin":
                    job.req = attrs.evolve(job.req, begin_time=msg.begin_time)
                job.reason = "None"  # the next pass says BeginTime again if still ahead
                if action == "release" and not job.direct_prio:
                    self._jobs.reprioritize(job)  # multifactor: recomputed, as Slurm's release
            self._jobs.touch(job)
            self._jobs.kick()
            done.append(job.id)
        self._jobs.tidy()
        logs.event("job control", action=action, jobs=",".join(map(str, done)) or "-",
                   user=msg.user or "-", refused=len(errors))
        self._run_pass()
        self._programs()
        return m.JobResult(ok=not errors, job_ids=tuple(done), errors=tuple(errors))


def _refusal(action: str, msg: m.JobControl) -> str:
    """What is wrong with the request as a whole (its action, its arguments), or ""."""
    if action not in ("requeue", "requeuehold", "hold", "uhold", "release", "begin",
                      "complete"):
        return (f"unknown action {msg.action!r}; valid: requeue, requeuehold, hold, uhold, "
                "release, begin, update, complete, alive")
    if action == "complete" and not (0 <= msg.exit_code <= 255 and 0 <= msg.signal <= 64):
        return (f"complete needs exit_code 0-255 and signal 0-64, got {msg.exit_code} and "
                f"{msg.signal}")
    if action == "begin" and not (
            msg.begin_time is not None and 0 <= msg.begin_time < 1e11):
        return f"begin needs begin_time in seconds since the epoch, got {msg.begin_time}"
    return ""


def _event(action: str, msg: m.JobControl, actor: Identity) -> je.Event:
    """The job table's event for one of rcontrol's actions."""
    if action == "hold":  # an admin's hold is an admin hold, as an operator's in Slurm
        return je.Hold(admin=actor.admin)
    if action == "uhold":  # a user hold, whoever asks (its owner may release it)
        return je.Hold(admin=False)
    if action == "complete":  # ralloc/rrun: the command that held it ended
        return je.Complete(msg.exit_code, msg.signal)
    if action == "begin":  # rcontrol update JobId=N StartTime=T
        return je.UpdateBegin()
    if action == "release":
        return je.Release()
    return je.Requeue(hold=action == "requeuehold")
