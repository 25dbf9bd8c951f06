"""sbatch --signal=[B:]SIG[@SECS]: rnoded sends SIG to a job SECS seconds before its time limit.

`B:` sends it to the batch shell only. Without it Slurm signals the job's steps and not the
batch shell; Ranch has no steps, so it signals every process the script started (the whole
job but the shell itself, which would otherwise die of an untrapped SIGUSR2 and end the job).
The warning counts from the script's start like the limit, so a re-adopted job keeps it; a
file in the job's directory records that it was sent, so an rnoded restart never sends twice.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import psutil
import trio

log = logging.getLogger("rnoded.jobs")
SENT = "warn_signal.sent"


def due_in(spec: Any, started_at: float, now: float) -> float | None:
    """Seconds until the warning is due (0 when due now), None when the job gets none."""
    if not spec.warn_signal or spec.time_limit is None:
        return None
    return max(0.0, started_at + spec.time_limit - spec.warn_time - now)


def deliver(script_pid: int, shim_pid: int, signum: int, batch_only: bool) -> int:
    """Send the warning; how many processes got it."""
    if batch_only:
        try:
            os.kill(script_pid, signum)
            return 1
        except (OSError, ValueError):  # gone, or a number the kernel has no signal for
            return 0
    sent = 0
    try:
        procs = psutil.Process(shim_pid).children(recursive=True)
    except psutil.Error:
        procs = []
    for proc in procs:
        if proc.pid == script_pid:
            continue
        try:
            proc.send_signal(signum)
            sent += 1
        except (psutil.Error, OSError, ValueError):  # as above: --signal=65 is Slurm's too
            pass
    return sent


async def warn_before_limit(job: Any) -> None:
    """Run beside a job's watcher (noded/jobs.py): wait for the moment, send once, return;
    returns at once when the job ends first."""
    spec = job.spec
    wait = due_in(spec, job.started_at, time.time())
    marker = Path(job.path) / SENT
    if wait is None or await trio.to_thread.run_sync(marker.exists):
        return
    with trio.move_on_after(wait):
        await job.done.wait()
        return  # ended before the warning was due
    if job.done.is_set() or job.ending:
        return
    sent = await trio.to_thread.run_sync(deliver, job.script_pid, job.shim_pid,
                                         spec.warn_signal, spec.warn_batch)
    log.info("job %d: signal %d sent to %s (%d process(es)), %ds before its time limit",
             spec.job_id, spec.warn_signal, "the batch shell" if spec.warn_batch else "its tasks",
             sent, spec.warn_time)
    try:
        await trio.to_thread.run_sync(marker.write_text, f"{time.time()}\n")
    except OSError as exc:  # only a restart would send it again
        log.warning("job %d: cannot record the --signal warning: %s", spec.job_id, exc)
