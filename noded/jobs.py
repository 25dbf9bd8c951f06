"""JobRunner: starts batch jobs under noded/jobshim.py, enforces time limits, kills process trees,
keeps endings until the controller acknowledges them, and re-adopts jobs after an rnoded restart.
"""

from __future__ import annotations

import errno
import logging
import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NoReturn

import attrs
import psutil
import trio

from noded import jobcgroup, jobsignal, jobstore
from noded.jobenv import append_output, input_path, job_environment, node_index, output_paths
from protocol.messages import JobEnd, JobSpec, StepSpec

log = logging.getLogger("rnoded.jobs")

SHIM = str(Path(__file__).with_name("jobshim.py"))
LAUNCH_TIMEOUT = 30.0  # the shim answers within milliseconds; this only bounds a wedged start
POLL_INTERVAL = 0.5  # where pidfd_open is missing, how often an adopted shim is looked at
# What a multi-node job runs on its nodes other than the batch host, and an allocation (ralloc,
# rrun outside a job: a job without a script) on every node: nothing but a wait.
HOLDER = "#!/bin/sh\nwhile :; do sleep 3600; done\n"


class LaunchError(Exception):
    """The job could not be started; the message says why, for the controller and the user."""


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


def _alive(pid: int, start: int) -> bool:
    """Whether the process that had this pid and start time still runs (a zombie does not).
    Called on the event loop: one procfs read, which never waits on a disk."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2 :].split()
        return fields[0] != b"Z" and int(fields[19]) == start
    except (OSError, ValueError, IndexError):
        return False


def _tree_signal(job: RunningJob, signum: int) -> int:
    """Signal the script's process group and every descendant of the shim that left it (a
    daemonised grandchild that called setsid); returns how many processes outside the group."""
    outside = 0
    try:
        shim = psutil.Process(job.shim_pid)
        kids = shim.children(recursive=True) if _alive(job.shim_pid, job.shim_start) else []
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


def _ending_of(spec: JobSpec, path: Path, ending: str, started_at: float) -> JobEnd:
    """The JobEnd of a finished run, from the shim's status file and rnoded's own reason."""
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
    )


class JobRunner:
    """Owns the node's jobs. `run` (started in the daemon's nursery) re-adopts what the spool
    dir records, then hosts one watcher task per job until cancelled; jobs outlive rnoded."""

    def __init__(
        self,
        spool_dir: str,
        node: str,
        *,
        on_change: Callable[[], None] = lambda: None,
        python: str = sys.executable,
    ) -> None:
        self.spool_dir = spool_dir
        self.node = node
        self.on_change = on_change
        self.python = python
        self.as_root = os.geteuid() == 0
        self.running: dict[int, RunningJob] = {}
        self.ended: dict[tuple[int, int], tuple[JobEnd, Path]] = {}
        self._nursery: trio.Nursery | None = None
        self._launching: dict[int, int] = {}  # job id -> the run being started
        self._announced: dict[int, int] = {}  # job id -> the run whose LaunchJob just arrived
        self.launch_timeout = LAUNCH_TIMEOUT
        self._kill_after_launch: dict[int, tuple[str, str, bool]] = {}
        self.memory_cgroups = True  # a job asking for memory gets its own limited cgroup

    # ------------------------------------------------------------------------ what beats carry

    def job_ids(self) -> tuple[int, ...]:
        # a job still starting counts: the controller declares a job it is not told of lost
        return tuple(sorted(self.running.keys() | self._launching.keys()))

    def runs(self) -> tuple[tuple[int, int], ...]:
        """(job id, restarts) of every job in job_ids(): which run of each job is here."""
        out = {jid: job.spec.restarts for jid, job in self.running.items()}
        for jid, run in self._launching.items():
            out.setdefault(jid, run)
        return tuple(sorted(out.items()))

    def endings(self) -> tuple[JobEnd, ...]:
        return tuple(end for end, _ in self.ended.values())

    async def acknowledge(self, endings: Iterable[JobEnd]) -> None:
        """The controller has these endings: forget them and their records."""
        done = []
        for end in endings:
            entry = self.ended.get((end.job_id, end.restarts))
            if entry is not None and entry[0] == end:
                del self.ended[(end.job_id, end.restarts)]
                done.append(entry[1])
        for path in done:
            await trio.to_thread.run_sync(jobstore.remove, path)

    # ---------------------------------------------------------------------------------- running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if not self.as_root:
            log.info(
                "rnoded is not root: jobs run as uid %d whatever user submitted them", os.getuid()
            )
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._adopt()
            task_status.started()
            await trio.sleep_forever()

    async def _adopt(self) -> None:
        for path in await trio.to_thread.run_sync(jobstore.list_dirs, self.spool_dir):
            try:
                await self._adopt_one(path)
            except Exception:  # one broken record must not keep rnoded from starting
                log.exception("cannot re-adopt the job recorded in %s; leaving it", path)

    async def _adopt_one(self, path: Path) -> None:
        end = await trio.to_thread.run_sync(jobstore.load_end, path)
        if end is not None:
            self.ended[(end.job_id, end.restarts)] = (end, path)
            return
        spec = await trio.to_thread.run_sync(jobstore.load_spec, path)
        if spec is None:
            log.warning("dropping unreadable job record %s", path)
            await trio.to_thread.run_sync(jobstore.remove, path)
            return
        ending, silent = await trio.to_thread.run_sync(jobstore.load_ending, path)
        pids = await trio.to_thread.run_sync(jobstore.read_json, path / "pids.json")
        if pids is not None and _alive(int(pids["shim_pid"]), int(pids["shim_start"])):
            job = RunningJob(
                spec,
                path,
                int(pids["shim_pid"]),
                int(pids["shim_start"]),
                int(pids["script_pid"]),
                float(pids.get("started_at", time.time())),
                ending=ending,
                silent=silent,
            )
            self.running[spec.job_id] = job
            log.info("re-adopted job %d (shim pid %d)", spec.job_id, job.shim_pid)
            self._watch(job)
            if ending:
                self._nursery_start(self._killer, job)
            return
        started = float(pids.get("started_at", 0.0)) if pids else 0.0
        end = await trio.to_thread.run_sync(_ending_of, spec, path, ending, started)
        if pids is None and end.state != "LAUNCH_FAILED":
            end = attrs.evolve(end, state="FAILED", message="rnoded stopped while launching")
        await self._record_end(spec, path, end, silent)

    def _nursery_start(self, fn: Callable, *args: object) -> None:
        assert self._nursery is not None, "JobRunner.run is not running"
        self._nursery.start_soon(fn, *args)

    # ---------------------------------------------------------------------------------- launch

    def announce(self, spec: JobSpec) -> None:
        """A LaunchJob arrived; its launch task has not run yet. The session's reader calls this
        at once, so that a KillJob read right behind it is kept for the launch (applied the
        moment the script runs) instead of answered "not here" and lost: the job would then run
        on, and the node stay COMPLETING, for ever."""
        if spec.job_id not in self.running and spec.job_id not in self._launching:
            self._announced[spec.job_id] = spec.restarts

    async def launch(self, spec: JobSpec) -> None:
        """Start the job; returns once its script runs. Raises LaunchError (after recording a
        LAUNCH_FAILED ending) when it cannot."""
        if self._announced.get(spec.job_id) == spec.restarts:
            del self._announced[spec.job_id]
        current = self.running.get(spec.job_id)
        if current is not None and current.spec.restarts == spec.restarts:
            return  # a repeated LaunchJob: it already runs
        if (spec.job_id, spec.restarts) in self.ended or spec.job_id in self._launching:
            if spec.job_id not in self._launching:  # ended: a kill kept for it has no target
                self._kill_after_launch.pop(spec.job_id, None)
            return
        if current is not None and current.spec.restarts < spec.restarts:
            # The controller moved on to a newer run: the old one is stale. End it (no ending
            # is reported for it) and start the new one once it is gone.
            log.warning("job %d: run %d replaces run %d still here; ending the old run",
                        spec.job_id, spec.restarts, current.spec.restarts)
            await self.kill(spec.job_id, 0, "stale", silent=True, run=current.spec.restarts)
            with trio.move_on_after(current.spec.kill_wait + self.launch_timeout):
                await current.done.wait()
            current = self.running.get(spec.job_id)
        if current is not None:
            raise LaunchError(f"job {spec.job_id} already runs here (run {current.spec.restarts})")
        self._launching[spec.job_id] = spec.restarts
        try:
            await self._launch(spec)
        finally:
            self._launching.pop(spec.job_id, None)
            pending = self._kill_after_launch.pop(spec.job_id, None)
        if pending is not None:
            reason, state, silent = pending
            await self.kill(spec.job_id, 0, reason, state=state, silent=silent)

    def identity(self, spec: JobSpec | StepSpec) -> dict:
        if not self.as_root:
            return {"drop": False, "uid": os.getuid(), "gid": os.getgid(), "groups": []}
        # root's jobs: the controller decided (DisableRootJobs, ctld/permissions.py), and only
        # a cluster-key holder or a MUNGE-proven root can submit one
        try:
            pw = pwd.getpwuid(spec.uid)
        except KeyError:
            raise LaunchError(f"unknown uid {spec.uid} on node {self.node}") from None
        groups = os.getgrouplist(pw.pw_name, spec.gid)
        return {"drop": True, "uid": spec.uid, "gid": spec.gid, "groups": groups}

    async def _launch(self, spec: JobSpec) -> None:
        path = jobstore.job_dir(self.spool_dir, spec)
        try:
            ident = self.identity(spec)
            if not os.path.isabs(spec.workdir):
                raise LaunchError(f"workdir {spec.workdir!r} is not an absolute path")
            stdout, stderr = output_paths(spec, self.node)
            if node_index(spec, self.node) != 0 or not spec.script:
                # Not the batch host: the script runs on the allocation's first node only, as
                # sbatch runs it. This node holds the job's resources (and its cgroup) with a
                # placeholder until the controller ends the job here. An allocation has no
                # script at all: every node of it holds.
                spec = attrs.evolve(spec, script=HOLDER, argv=())
                stdout = stderr = os.devnull
            launch = dict(
                ident,
                env=job_environment(spec, self.node),
                workdir=spec.workdir,
                stdout=stdout,
                stderr=stderr,
                append=append_output(spec),  # --open-mode, requeues (noded/jobenv.py)
                stdin=input_path(spec, self.node),
            )
            owner = (spec.uid, spec.gid) if ident["drop"] else None
            if self.as_root and spec.mem_mib > 0 and self.memory_cgroups:
                name = f"{self.node}_{spec.job_id}.{spec.restarts}"
                launch["cgroup"] = await trio.to_thread.run_sync(
                    jobcgroup.create, name, spec.mem_mib
                )
            path = await trio.to_thread.run_sync(
                jobstore.create, self.spool_dir, spec, launch, owner
            )
        except (LaunchError, OSError, ValueError) as exc:
            message = str(exc) if isinstance(exc, LaunchError) else f"job record: {exc}"
            await self._launch_failed(spec, path, message)
        log_file = await trio.to_thread.run_sync(open, path / "shim.log", "wb")
        try:
            proc = await trio.lowlevel.open_process(
                [self.python, "-S", "-E", SHIM, str(path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log_file,
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", os.defpath)},
                cwd="/",
            )
        except OSError as exc:
            await self._launch_failed(spec, path, f"cannot start the job supervisor: {exc}")
        finally:
            log_file.close()
        assert proc.stdout is not None
        line = b""
        with trio.move_on_after(self.launch_timeout):
            while not line.endswith(b"\n"):
                chunk = await proc.stdout.receive_some(4096)
                if not chunk:
                    break
                line += chunk
        await proc.stdout.aclose()
        word, _, rest = line.decode(errors="replace").strip().partition(" ")
        if word != "ok":
            if not word:
                log_text = await trio.to_thread.run_sync((path / "shim.log").read_bytes)
                rest = (
                    "job supervisor failed: "
                    + (log_text.decode(errors="replace").strip().splitlines() or ["no answer"])[-1]
                )
                with trio.move_on_after(1):
                    proc.kill()
            await proc.wait()
            await self._launch_failed(spec, path, rest)
        pids = await trio.to_thread.run_sync(jobstore.read_json, path / "pids.json")
        job = RunningJob(
            spec,
            path,
            proc.pid,
            int(pids["shim_start"]),
            int(rest),
            float(pids["started_at"]),
            proc=proc,
        )
        self.running[spec.job_id] = job
        log.info(
            "job %d started: script pid %d as uid %d in %s",
            spec.job_id,
            job.script_pid,
            ident["uid"],
            spec.workdir,
        )
        self._watch(job)

    async def _launch_failed(self, spec: JobSpec, path: Path, message: str) -> NoReturn:
        log.warning("job %d launch failed: %s", spec.job_id, message)
        end = JobEnd(
            spec.job_id,
            "LAUNCH_FAILED",
            exit_code=1,
            message=message,
            ended_at=time.time(),
            restarts=spec.restarts,
        )
        await self._record_end(spec, path, end, False)
        raise LaunchError(message)

    # --------------------------------------------------------------------------------- watching

    def _watch(self, job: RunningJob) -> None:
        self._nursery_start(self._watcher, job)
        if job.spec.warn_signal:  # sbatch --signal (noded/jobsignal.py)
            self._nursery_start(jobsignal.warn_before_limit, job)

    async def _watcher(self, job: RunningJob) -> None:
        limit = job.spec.time_limit
        if limit is None:
            await self._wait_exit(job)
        else:
            # The deadline counts from the script's start, so a re-adopted job keeps its limit.
            remaining = limit - (time.time() - job.started_at)
            with trio.move_on_after(max(0.0, remaining)) as scope:
                await self._wait_exit(job)
            # Only a deadline that fired ends the job TIMEOUT: the script may have exited on
            # its own just before (job.done is set below, after this test, so it says nothing).
            if scope.cancelled_caught:
                log.info("job %d reached its time limit of %gs", job.spec.job_id, limit)
                await self.kill(job.spec.job_id, 0, "time limit", state="TIMEOUT")
                await self._wait_exit(job)
        job.done.set()
        if self.running.get(job.spec.job_id) is job:
            del self.running[job.spec.job_id]
        end = await trio.to_thread.run_sync(
            _ending_of, job.spec, job.path, job.ending, job.started_at
        )
        if job.spec.script == HOLDER and job.ending and end.state != "LAUNCH_FAILED":
            # the placeholder's SIGTERM is nobody's exit status: a cancelled or timed-out
            # allocation ends 0:0, as Slurm's (it has no batch step to take the 0:15)
            end = attrs.evolve(end, exit_code=0, signal=0)
        await self._record_end(job.spec, job.path, end, job.silent)

    async def _wait_exit(self, job: RunningJob) -> None:
        if job.proc is not None:
            await job.proc.wait()
            return
        try:
            fd = os.pidfd_open(job.shim_pid)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                return
            while _alive(job.shim_pid, job.shim_start):  # no pidfd: look now and then
                await trio.sleep(POLL_INTERVAL)
            return
        try:
            if _alive(job.shim_pid, job.shim_start):  # the pid might be another process's now
                await trio.lowlevel.wait_readable(fd)
        finally:
            os.close(fd)

    async def _record_end(self, spec: JobSpec, path: Path, end: JobEnd, silent: bool) -> None:
        if silent:
            log.info(
                "job %d ended (%s), not reported: the controller disowned it",
                spec.job_id,
                end.state,
            )
            await trio.to_thread.run_sync(jobstore.remove, path)
            return
        log.info(
            "job %d ended: %s exit %d signal %d %s",
            spec.job_id,
            end.state,
            end.exit_code,
            end.signal,
            end.message,
        )
        try:
            await trio.to_thread.run_sync(jobstore.save_end, path, end)
        except OSError as exc:  # still reported from memory; only a restart would lose it
            log.error("cannot record the end of job %d: %s", spec.job_id, exc)
        self.ended[(end.job_id, end.restarts)] = (end, path)
        self.on_change()

    # ---------------------------------------------------------------------------------- killing

    async def kill(
        self,
        job_id: int,
        signum: int = 0,
        reason: str = "",
        *,
        state: str = "CANCELLED",
        silent: bool = False,
        run: int = -1,
    ) -> bool:
        """signum 0: end the job (SIGTERM to its tree, SIGKILL after kill_wait). Otherwise only
        deliver signum to its process group. `run` >= 0 acts only on that run of the job (a
        kill meant for an older run never touches a newer one). False when no such job runs
        here."""
        job = self.running.get(job_id)
        if job is not None and run >= 0 and job.spec.restarts != run:
            log.info("job %d: kill for run %d ignored; run %d runs here", job_id, run,
                     job.spec.restarts)
            return False
        if job is None:
            starting = self._launching.get(job_id, self._announced.get(job_id))
            if starting is None or (run >= 0 and starting != run):
                return False
            if not signum:
                # Its shim is starting: the kill is applied the moment the script runs.
                self._kill_after_launch[job_id] = (reason, state, silent)
                return True
            return False
        if signum:
            log.info("job %d: delivering signal %d (%s)", job_id, signum, reason or "asked")
            try:
                await trio.to_thread.run_sync(os.killpg, job.script_pid, signum)
            except OSError as exc:  # the group just ended: its watcher reports the ending
                log.info("job %d: signal %d not delivered: %s", job_id, signum, exc)
            return True
        job.silent = job.silent or silent
        if not job.ending:
            job.ending = state
            log.info("job %d: ending it (%s)", job_id, reason or state)
            if not job.silent and (state == "TIMEOUT" or reason == "cancelled"):
                # one small append to a local file, before the first signal: the line comes
                # before whatever the job prints as it dies, as slurmstepd's does
                self._note_end(job, state == "TIMEOUT")
            self._nursery_start(self._killer, job)  # before any await: a cancel cannot skip it
        try:
            await trio.to_thread.run_sync(jobstore.save_ending, job.path, job.ending, job.silent)
        except OSError as exc:  # the kill goes on; only an rnoded restart would forget why
            log.error("cannot record why job %d is being killed: %s", job_id, exc)
        return True

    def _note_end(self, job: RunningJob, timeout: bool) -> None:
        """The line slurmstepd writes into the job's error output when it cancels the job or
        its time limit ends it (tools and users grep for it)."""
        if node_index(job.spec, self.node) != 0 or job.spec.script == HOLDER:
            return  # no batch script here, so no output file of its own
        stdout, stderr = output_paths(job.spec, self.node)
        when = time.strftime("%Y-%m-%dT%H:%M:%S")
        why = " DUE TO TIME LIMIT" if timeout else ""
        line = (f"slurmstepd-{self.node}: error: *** JOB {job.spec.job_id} ON {self.node} "
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

    async def kill_silently(self, job_ids: Iterable[int],
                            runs: Iterable[tuple[int, int]] = ()) -> None:
        """The controller's kill list: these runs are no longer ours; no ending is reported.
        `job_ids` (an older controller) name whichever run is here; `runs` name one run."""
        targets = [(j, -1) for j in job_ids] + [(int(j), int(r)) for j, r in runs]
        for job_id, run in targets:
            if await self.kill(job_id, 0, "stale", silent=True, run=run):
                log.warning("job %d run %d is not ours any more (controller's kill list)",
                            job_id, run)

    async def _killer(self, job: RunningJob) -> None:
        outside = await trio.to_thread.run_sync(_tree_signal, job, signal.SIGTERM)
        if outside:
            log.info(
                "job %d: %d processes outside its group signalled too", job.spec.job_id, outside
            )
        with trio.move_on_after(job.spec.kill_wait):
            await job.done.wait()
        while not job.done.is_set():  # KillWait is over: SIGKILL whatever still lives
            await trio.to_thread.run_sync(_tree_signal, job, signal.SIGKILL)
            with trio.move_on_after(1.0):
                await job.done.wait()
