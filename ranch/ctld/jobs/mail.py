"""sbatch --mail-type/--mail-user: rctld runs MailProg as slurmctld 22.05 does
(src/slurmctld/agent.c mail_job_info): `MailProg -s "Slurm Job_id=12 Name=x Began, Queued
time 00:00:01" USER`, with the job's SLURM_JOB_* variables in its environment.

Which events mail: BEGIN when the job starts; END when it ends COMPLETED or CANCELLED; FAIL
when it ends FAILED, TIMEOUT, NODE_FAIL or OUT_OF_MEMORY; REQUEUE; INVALID_DEPEND when its
dependency can never be satisfied; TIME_LIMIT when it ends TIMEOUT. An array mails once for
the whole array (its first task's start, the summary at the end) unless ARRAY_TASKS is asked.
MailProg (default /usr/bin/mail) and MailDomain come from cluster.conf.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from ranch.ctld import logs
from ranch.statemachine.jobstates import FINAL

if TYPE_CHECKING:
    from ranch.ctld.jobs.ports import JobReader
    from ranch.ctld.jobs.settings import JobSettings

DEFAULT_PROG = "/usr/bin/mail"
TIMEOUT = 120.0  # seconds a MailProg run may take before it is killed
_TITLE = {"BEGIN": "Began", "END": "Ended", "FAIL": "Failed", "REQUEUE": "Requeued",
          "INVALID_DEPEND": "Invalid dependency", "TIME_LIMIT": "Reached time limit"}
FAIL_STATES = frozenset({"FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                         "DEADLINE"})


def clock_text(seconds: float) -> str:
    """slurmctld's secs2time_str: HH:MM:SS, D-HH:MM:SS."""
    s = max(0, int(seconds))
    days, s = divmod(s, 86400)
    text = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}-{text}" if days else text


def _name(job: Any) -> str:
    from ranch.ctld.jobs.jobrecord import job_name

    return job_name(job.req)


def message(event: str, job: Any, *, summary: list[Any] | None = None) -> tuple[str, dict]:
    """(subject, the extra environment) of one mail."""
    title = _TITLE[event]
    env: dict[str, str] = {}
    times = ""
    if event == "BEGIN" and job.start_time:
        queued = clock_text(job.start_time - job.submit_time)
        times, env["SLURM_JOB_QUEUED_TIME"] = f", Queued time {queued}", queued
    elif event in ("END", "FAIL", "REQUEUE", "TIME_LIMIT") and job.start_time and job.end_time:
        ran = clock_text(job.end_time - job.start_time)
        times, env["SLURM_JOB_RUN_TIME"] = f", Run time {ran}", ran
    term = ""
    if event in ("END", "FAIL"):
        if summary:
            codes = [j.exit_code for j in summary]
            low, high = min(codes), max(codes)
            state = "Mixed" if low == 0 and high > 0 else job.state
            term = f", {state}, ExitCode [{low}-{high}]"
            env.update(SLURM_JOB_EXIT_CODE_MIN=str(low), SLURM_JOB_EXIT_CODE_MAX=str(high))
        elif job.signal:
            term = f", {job.state}"
            env["SLURM_JOB_EXIT_CODE_MAX"] = "0"
        else:
            term = f", {job.state}, ExitCode {job.exit_code}"
            env["SLURM_JOB_EXIT_CODE_MAX"] = str(job.exit_code)
    name = _name(job)
    if summary is not None:
        subject = (f"Slurm Array Summary Job_id={job.array_job_id}_* ({job.array_job_id}) "
                   f"Name={name} {title}{term}")
    elif job.array_job_id:
        subject = (f"Slurm Array Task Job_id={job.array_job_id}_{job.array_task_id} "
                   f"({job.id}) Name={name} {title}{times}{term}")
    else:
        subject = f"Slurm Job_id={job.id} Name={name} {title}{times}{term}"
    return subject, env


def job_env(job: Any, cluster_name: str, event: str) -> dict[str, str]:
    """The SLURM_JOB_* variables MailProg gets (job_common_env_vars + the mail's own)."""
    import grp

    req = job.req
    try:
        group = grp.getgrgid(req.gid).gr_name
    except (KeyError, OverflowError):
        group = str(req.gid)
    env = {
        "SLURM_CLUSTER_NAME": cluster_name,
        "SLURM_JOB_ACCOUNT": req.account,
        "SLURM_JOB_ID": str(job.id),
        "SLURM_JOBID": str(job.id),
        "SLURM_JOB_NAME": _name(job),
        "SLURM_JOB_USER": req.user,
        "SLURM_JOB_UID": str(req.uid),
        "SLURM_JOB_GID": str(req.gid),
        "SLURM_JOB_GROUP": group,
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_JOB_NODELIST": ",".join(job.nodes),
        "SLURM_JOB_WORK_DIR": req.workdir,
        "SLURM_JOB_STATE": job.state,
        "SLURM_JOB_MAIL_TYPE": _TITLE[event],
    }
    if job.nodes:
        from ranch.conf import hostlist

        env["SLURM_JOB_NODELIST"] = hostlist.fold(list(job.nodes))
    if req.comment:
        env["SLURM_JOB_COMMENT"] = req.comment
    if job.array_job_id:
        env["SLURM_ARRAY_JOB_ID"] = str(job.array_job_id)
        env["SLURM_ARRAY_TASK_ID"] = str(job.array_task_id)
    if job.state in FINAL:
        env["SLURM_JOB_EXIT_CODE2"] = f"{job.exit_code}:{job.signal}"
        env["SLURM_JOB_EXIT_CODE"] = str(job.exit_code << 8 if not job.signal else job.signal)
    return env


def recipient(req: Any, settings: Mapping[str, str]) -> str:
    user = req.mail_user or req.user
    domain = settings.get("MailDomain", "")
    if domain and "@" not in user:
        user = f"{user}@{domain}"
    return user


class Mail:
    """The job side's mails: which events of a job mail, and MailProg's run for each."""

    def __init__(self, jobs: JobReader, settings: JobSettings,
                 spawn: Callable[..., None] | None) -> None:
        """`spawn` starts MailProg in the daemon's nursery (None: no event loop runs the daemon,
        in-process tests)."""
        self._jobs = jobs
        self._settings = settings
        self._spawn = spawn

    def ended(self, job: Any) -> None:
        """A job reached its final state: END, FAIL and TIME_LIMIT mails, as slurmctld's
        job_completion_logger sends them (an array: one summary once its last task ended)."""
        types = job.req.mail_type
        if not types:
            return
        if job.array_job_id and "ARRAY_TASKS" not in types:
            tasks = [j for j in self._jobs.jobs.values() if j.array_job_id == job.array_job_id]
            if any(j.state not in FINAL for j in tasks):
                return  # the summary goes out when the last task ends
            failed = any(j.exit_code for j in tasks)
            if failed and "FAIL" in types:
                self._send(job, "FAIL", summary=tasks)
            elif "END" in types:
                self._send(job, "END", summary=tasks)
            return
        if "FAIL" in types and job.state in FAIL_STATES:
            self._send(job, "FAIL")
        if "END" in types and job.state in ("COMPLETED", "CANCELLED"):
            self._send(job, "END")
        if "TIME_LIMIT" in types and job.state == "TIMEOUT":
            self._send(job, "TIME_LIMIT")

    def notify(self, job: Any, event: str) -> None:
        """BEGIN (the job started), REQUEUE, INVALID_DEPEND: mail if the job asked for it."""
        types = job.req.mail_type
        if event not in types:
            return
        if event == "BEGIN" and job.array_job_id and "ARRAY_TASKS" not in types and any(
                j.start_time and j is not job for j in self._jobs.jobs.values()
                if j.array_job_id == job.array_job_id):
            return  # only the array's first task to start mails
        self._send(job, event)

    def _send(self, job: Any, event: str, summary: list[Any] | None = None) -> None:
        config = self._settings.config
        settings = dict(config.settings)
        subject, extra = message(event, job, summary=summary)
        env = {**job_env(job, config.cluster_name, event), **extra}
        program = settings.get("MailProg") or DEFAULT_PROG
        argv = [program, "-s", subject, recipient(job.req, settings)]
        logs.event("mail", job=job.id, type=event, to=argv[3], subject=subject)
        if self._spawn is not None:
            self._spawn(run, argv, env)


async def run(argv: list[str], env: dict[str, str], timeout: float = TIMEOUT) -> int | None:
    """Run MailProg once; its failure is logged, never raised (as slurmctld only logs it)."""
    from ranch.ctld.programs import clean_signals

    base = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")}
    try:
        with trio.move_on_after(timeout) as scope:
            done = await trio.run_process(
                argv, stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True,
                check=False, env={**base, **env}, start_new_session=True,
                preexec_fn=clean_signals,
            )
    except OSError as exc:
        logs.event("MailProg could not run", logging.ERROR, program=argv[0], error=str(exc))
        return None
    if scope.cancelled_caught:
        logs.event("MailProg killed", logging.ERROR, program=argv[0],
                   error=f"timed out after {timeout:g} s")
        return None
    if done.returncode:
        output = (done.stdout + done.stderr).decode(errors="replace").strip()[:500]
        logs.event("MailProg returned error", logging.ERROR, program=argv[0],
                   rc=done.returncode, output=output)
    return done.returncode
