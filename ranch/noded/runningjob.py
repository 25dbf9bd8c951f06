"""A running job's record and its processes: liveness, tree signals, its exit, its ending."""

from __future__ import annotations

import errno
import logging
import os
import signal
import time
from pathlib import Path

import attrs
import psutil
import trio

from ranch.conf.timefmt import slurm_timestamp
from ranch.noded import jobstore
from ranch.noded.jobenv import node_index, output_paths
from ranch.noded.usage import Track, usage_of
from ranch.protocol.messages import JobEnd, JobSpec
from ranch.protocol.usage import Usage

log = logging.getLogger("rnoded.jobs")

POLL_INTERVAL = 0.5  # where pidfd_open is missing, how often an adopted shim is looked at
# What a multi-node job runs on its nodes other than the batch host, and an allocation (ralloc,
# rrun outside a job: a job without a script) on every node: nothing but a wait.
HOLDER = "#!/bin/sh\nwhile :; do sleep 3600; done\n"


@attrs.define(eq=False)
class RunningJob:
    spec: JobSpec
    path: Path
    shim_pid: int
    shim_start: int
    script_pid: int
    started_at: float  # wall clock
    proc: trio.Process | None = None  # our child; None when adopted after a restart
    ending: str = ""  # CANCELLED | TIMEOUT once rnoded decided to end it
    silent: bool = False  # killed on the controller's kill list: no ending reported
    done: trio.Event = attrs.field(factory=trio.Event)
    # Held while its directory is written to (why it is being ended) or removed (a silent
    # ending): an unordered pair let the ending's file land as the directory was removed, and
    # the half-removed directory stayed in the spool.
    files: trio.Lock = attrs.field(factory=trio.Lock)


def alive(pid: int, start: int) -> bool:
    """Whether the process that had this pid and start time still runs (a zombie does not).
    Called on the event loop: one procfs read, which never waits on a disk."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2 :].split()
        return fields[0] != b"Z" and int(fields[19]) == start
    except (OSError, ValueError, IndexError):
        return False


def tree_signal(job: RunningJob, signum: int) -> int:
    """Signal the script's process group and every descendant of the shim that left it (a
    daemonised grandchild that called setsid); returns how many processes outside the group."""
    outside = 0
    try:
        shim = psutil.Process(job.shim_pid)
        kids = shim.children(recursive=True) if alive(job.shim_pid, job.shim_start) else []
    except psutil.Error:
        kids = []
    try:
        os.killpg(job.script_pid, signum)
    except OSError:
        pass
    for kid in kids:
        try:
            if os.getpgid(kid.pid) != job.script_pid:
                kid.send_signal(signum)
                outside += 1
        except (OSError, psutil.Error):
            pass
    return outside


async def wait_exit(job: RunningJob) -> None:
    """Until the job's shim is gone: our child's exit, or the adopted shim's pidfd."""
    if job.proc is not None:
        await job.proc.wait()
        return
    try:
        fd = os.pidfd_open(job.shim_pid)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return
        while alive(job.shim_pid, job.shim_start):  # no pidfd: look now and then
            await trio.sleep(POLL_INTERVAL)
        return
    try:
        if alive(job.shim_pid, job.shim_start):  # the pid might be another process's now
            await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


async def end_tree(job: RunningJob) -> None:
    """End the job's processes: SIGTERM to its tree, then SIGKILL once KillWait is over, until
    its shim is gone."""
    outside = await trio.to_thread.run_sync(tree_signal, job, signal.SIGTERM)
    if outside:
        log.info(
            "job %d: %d processes outside its group signalled too", job.spec.job_id, outside
        )
    with trio.move_on_after(job.spec.kill_wait):
        await job.done.wait()
    while not job.done.is_set():  # KillWait is over: SIGKILL whatever still lives
        await trio.to_thread.run_sync(tree_signal, job, signal.SIGKILL)
        with trio.move_on_after(1.0):
            await job.done.wait()


def note_end(job: RunningJob, node: str, timeout: bool) -> None:
    """The line slurmstepd writes into the job's error output when it cancels the job or
    its time limit ends it (tools and users grep for it)."""
    if node_index(job.spec, node) != 0 or job.spec.script == HOLDER:
        return  # no batch script here, so no output file of its own
    stdout, stderr = output_paths(job.spec, node)
    when = slurm_timestamp()
    why = " DUE TO TIME LIMIT" if timeout else ""
    line = (f"slurmstepd-{node}: error: *** JOB {job.spec.job_id} ON {node} "
            f"CANCELLED AT {when}{why} ***\n")
    try:  # only a file the job opened: never create one as rnoded's user
        fd = os.open(stderr or stdout, os.O_WRONLY | os.O_APPEND)
    except OSError:
        return
    try:
        os.write(fd, line.encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def measured(status: dict, track: Track | None) -> Usage | None:
    """What the run used: CPU from its cgroup, else the shim's wait4 sums; memory sampled."""
    cpu, source = None, "proc"
    if "cg_user_usec" in status:
        cpu, source = (status["cg_user_usec"] / 1e6, status["cg_system_usec"] / 1e6), "cgroup"
    elif "user_s" in status:
        cpu, source = (float(status["user_s"]), float(status["system_s"])), "rusage"
    return usage_of(track, cpu, source, int(status.get("cg_mem_peak", 0)) // 1024)


def ending_of(spec: JobSpec, path: Path, ending: str, started_at: float,
              track: Track | None = None) -> JobEnd:
    """The JobEnd of a finished run, from the shim's status file and rnoded's own reason (and
    what the meter saw of it, `track`)."""
    status = jobstore.read_json(path / "status.json")
    now = time.time()
    if status is None:
        return JobEnd(
            spec.job_id,
            ending or "FAILED",
            message="job supervisor ended without a status",
            started_at=started_at,
            ended_at=now,
            restarts=spec.restarts,
        )
    if "launch_error" in status:
        return JobEnd(
            spec.job_id,
            "LAUNCH_FAILED",
            exit_code=1,
            message=str(status["launch_error"]),
            ended_at=now,
            restarts=spec.restarts,
        )
    code, sig = int(status.get("exit_code", 0)), int(status.get("signal", 0))
    if ending:
        state = ending
    elif status.get("oom") and (status.get("oom_exact") or sig == signal.SIGKILL):
        state = "OUT_OF_MEMORY"
    else:
        state = "COMPLETED" if code == 0 and sig == 0 else "FAILED"
    return JobEnd(
        spec.job_id,
        state,
        exit_code=code,
        signal=sig,
        started_at=float(status.get("started_at", started_at)),
        ended_at=float(status.get("ended_at", now)),
        restarts=spec.restarts,
        usage=measured(status, track),
    )
