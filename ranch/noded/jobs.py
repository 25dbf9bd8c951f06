"""JobRunner: the node's jobs: launch, watching, kills, endings until acknowledged, adoption."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

import attrs
import trio

from ranch.noded import jobsignal, jobstore
from ranch.noded.jobadopt import read_record
from ranch.noded.joblaunch import (
    LAUNCH_TIMEOUT,
    SHIM,
    LaunchError,
    LaunchFailed,
    identity,
    start_job,
)
from ranch.noded.runningjob import (
    HOLDER,
    RunningJob,
    alive,
    end_tree,
    ending_of,
    note_end,
    wait_exit,
)
from ranch.noded.spareshim import SpareShim
from ranch.noded.usage import Meter
from ranch.protocol.messages import JobEnd, JobSpec, StepSpec

log = logging.getLogger("rnoded.jobs")
STARTING_POLL = 0.005  # seconds between looks at a job being started, for a step waiting on it


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
        gpu_metrics: Callable[[], Any] | None = None,
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
        # runs whose processes are gone and whose ending is being recorded: still reported as
        # here, so that no beat lists such a run neither running nor ended
        self._finishing: set[tuple[int, int]] = set()
        self.launch_timeout = LAUNCH_TIMEOUT
        self._kill_after_launch: dict[int, tuple[str, str, bool]] = {}
        self.memory_cgroups = True  # a job asking for memory gets its own limited cgroup
        self.spare = SpareShim(python, SHIM)  # forks job supervisors, once a job has run
        self.meter = Meter(gpu_metrics)  # what jobs and steps use (noded/usage.py)

    # ------------------------------------------------------------------------ what beats carry

    def job_ids(self) -> tuple[int, ...]:
        return tuple(sorted({jid for jid, _ in self.runs()}))

    def runs(self) -> tuple[tuple[int, int], ...]:
        """(job id, restarts) of every run this node holds and has not yet recorded the end of:
        announced, starting, running or ending. The controller takes a current run missing here
        (and from endings()) for lost, so each run stays in this list until its ending is in
        self.ended, with no checkpoint between; a job may be here with two runs (an old one
        ending while the controller's newer one starts)."""
        out = {(jid, job.spec.restarts) for jid, job in self.running.items()}
        out.update(self._launching.items())
        out.update(self._announced.items())
        out.update(self._finishing)
        return tuple(sorted(out))

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
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self.meter.run)
                await self._adopt()
                task_status.started()
                await trio.sleep_forever()
        finally:
            await self.spare.close()

    async def _adopt(self) -> None:
        for path in await trio.to_thread.run_sync(jobstore.list_dirs, self.spool_dir):
            try:
                await self._adopt_one(path)
            except Exception:  # one broken record must not keep rnoded from starting
                log.exception("cannot re-adopt the job recorded in %s; leaving it", path)

    async def _adopt_one(self, path: Path) -> None:
        found = await read_record(path, self.launch_timeout)
        if found is None:
            return
        if isinstance(found, JobEnd):
            self.ended[(found.job_id, found.restarts)] = (found, path)
            return
        spec, ending, silent, pids = found.spec, found.ending, found.silent, found.pids
        if pids is not None and alive(int(pids["shim_pid"]), int(pids["shim_start"])):
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
                self._nursery_start(end_tree, job)
            return
        started = float(pids.get("started_at", 0.0)) if pids else 0.0
        end = await trio.to_thread.run_sync(ending_of, spec, path, ending, started)
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
        current = self.running.get(spec.job_id)
        if (current is None or current.spec.restarts != spec.restarts) \
                and spec.job_id not in self._launching:
            self._announced[spec.job_id] = spec.restarts  # also reported: runs()

    async def launch(self, spec: JobSpec) -> None:
        """Start the job; returns once its script runs. Raises LaunchError (after recording a
        LAUNCH_FAILED ending) when it cannot."""
        if self._announced.get(spec.job_id) == spec.restarts:
            del self._announced[spec.job_id]
        current = self.running.get(spec.job_id)
        if current is not None and current.spec.restarts == spec.restarts:
            return  # a repeated LaunchJob: it already runs
        run = (spec.job_id, spec.restarts)
        if run in self.ended or run in self._finishing or spec.job_id in self._launching:
            if spec.job_id not in self._launching:  # ended: a kill kept for it has no target
                self._kill_after_launch.pop(spec.job_id, None)
            return
        if current is not None and current.spec.restarts > spec.restarts:
            raise LaunchError(f"job {spec.job_id} already runs here (run {current.spec.restarts})")
        # From here the new run is reported as starting (runs()), the old one's wait included.
        self._launching[spec.job_id] = spec.restarts
        try:
            if current is not None:
                # The controller moved on to a newer run: the old one is stale. End it (no
                # ending is reported for it) and start the new one once it is gone.
                log.warning("job %d: run %d replaces run %d still here; ending the old run",
                            spec.job_id, spec.restarts, current.spec.restarts)
                await self.kill(spec.job_id, 0, "stale", silent=True, run=current.spec.restarts)
                with trio.move_on_after(current.spec.kill_wait + self.launch_timeout):
                    await current.done.wait()
                if self.running.get(spec.job_id) is current:
                    raise LaunchError(f"job {spec.job_id}: its run {current.spec.restarts} "
                                      "here would not end")
            await self._launch(spec)
        finally:
            self._launching.pop(spec.job_id, None)
            pending = self._kill_after_launch.pop(spec.job_id, None)
        if pending is not None:
            reason, state, silent = pending
            await self.kill(spec.job_id, 0, reason, state=state, silent=silent)

    async def wait_started(self, job_id: int, run: int) -> RunningJob | None:
        """The job's run `run` once it runs here: at once when it does; when its LaunchJob
        came and its launch is under way, once that ends (within the launch timeout); None
        when it neither runs nor is starting. A step launched right after its job (a fast
        rrun in a fresh allocation) waits so, as slurmd holds a step until its job started."""
        deadline = trio.current_time() + self.launch_timeout
        while True:
            job = self.running.get(job_id)
            if job is not None and job.spec.restarts == run:
                return job
            starting = self._launching.get(job_id, self._announced.get(job_id))
            if starting != run or trio.current_time() >= deadline:
                return job
            await trio.sleep(STARTING_POLL)

    def identity(self, spec: JobSpec | StepSpec) -> dict:
        return identity(spec, self.node, self.as_root)

    async def _launch(self, spec: JobSpec) -> None:
        try:
            job = await start_job(
                spec,
                spool_dir=self.spool_dir,
                node=self.node,
                python=self.python,
                as_root=self.as_root,
                memory_cgroups=self.memory_cgroups,
                timeout=self.launch_timeout,
                spare=self.spare,
            )
        except LaunchFailed as exc:
            await self._launch_failed(spec, exc.path, exc.message, exc.node_fault)
        finally:
            if not self.spare.closed:  # the supervisors' server, started off this job's path
                self._nursery_start(self.spare.refill)
        self.running[spec.job_id] = job
        self._watch(job)

    async def _launch_failed(self, spec: JobSpec, path: Path, message: str,
                             node_fault: bool = False) -> NoReturn:
        log.warning("job %d launch failed: %s", spec.job_id, message)
        end = JobEnd(
            spec.job_id,
            "LAUNCH_FAILED",
            exit_code=1,
            message=message,
            ended_at=time.time(),
            restarts=spec.restarts,
            node_fault=node_fault,
        )
        await self._record_end(spec, path, end, False)
        raise LaunchError(message)

    # --------------------------------------------------------------------------------- watching

    def _watch(self, job: RunningJob) -> None:
        # the shim's children are the job (the shim itself is not): issue 48's measures
        self.meter.watch(("job", job.spec.job_id, job.spec.restarts), {0: job.shim_pid},
                         job.spec.gpus, include_root=False)
        self._nursery_start(self._watcher, job)
        if job.spec.warn_signal:  # sbatch --signal (noded/jobsignal.py)
            self._nursery_start(jobsignal.warn_before_limit, job)

    async def _watcher(self, job: RunningJob) -> None:
        limit = job.spec.time_limit
        if limit is None:
            await wait_exit(job)
        else:
            # The deadline counts from the script's start, so a re-adopted job keeps its limit.
            remaining = limit - (time.time() - job.started_at)
            with trio.move_on_after(max(0.0, remaining)) as scope:
                await wait_exit(job)
            # Only a deadline that fired ends the job TIMEOUT: the script may have exited on
            # its own just before (job.done is set below, after this test, so it says nothing).
            if scope.cancelled_caught:
                log.info("job %d reached its time limit of %gs", job.spec.job_id, limit)
                await self.kill(job.spec.job_id, 0, "time limit", state="TIMEOUT")
                await wait_exit(job)
        run = (job.spec.job_id, job.spec.restarts)
        # Reported as finishing from here until its ending is in self.ended (D3: a beat sent
        # between the two thread hops below listed the run nowhere, and it was run again).
        self._finishing.add(run)
        job.done.set()
        if self.running.get(job.spec.job_id) is job:
            del self.running[job.spec.job_id]
        try:
            track = self.meter.stop(("job", job.spec.job_id, job.spec.restarts))
            async with job.files:  # a kill's note of why is written whole before this
                end = await trio.to_thread.run_sync(
                    ending_of, job.spec, job.path, job.ending, job.started_at, track
                )
                if job.spec.script == HOLDER and job.ending and end.state != "LAUNCH_FAILED":
                    # the placeholder's SIGTERM is nobody's exit status: a cancelled or
                    # timed-out allocation ends 0:0, as Slurm's (no batch step takes the 0:15)
                    end = attrs.evolve(end, exit_code=0, signal=0)
                await self._record_end(job.spec, job.path, end, job.silent)
        finally:
            self._finishing.discard(run)

    async def _record_end(self, spec: JobSpec, path: Path, end: JobEnd, silent: bool) -> None:
        if silent:
            log.info("job %d ended (%s), not reported: the controller disowned it",
                     spec.job_id, end.state)
            await trio.to_thread.run_sync(jobstore.remove, path)
            return
        log.info("job %d ended: %s exit %d signal %d %s", spec.job_id, end.state,
                 end.exit_code, end.signal, end.message)
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
                note_end(job, self.node, state == "TIMEOUT")
            self._nursery_start(end_tree, job)  # before any await: a cancel cannot skip it
        async with job.files:
            if job.done.is_set():  # its exit is seen: the watcher records it from memory
                return True
            try:
                await trio.to_thread.run_sync(jobstore.save_ending, job.path, job.ending,
                                              job.silent)
            except OSError as exc:  # the kill goes on; only an rnoded restart would forget why
                log.error("cannot record why job %d is being killed: %s", job_id, exc)
        return True

    async def kill_silently(self, job_ids: Iterable[int],
                            runs: Iterable[tuple[int, int]] = ()) -> None:
        """The controller's kill list: these runs are no longer ours; no ending is reported.
        `job_ids` (an older controller) name whichever run is here; `runs` name one run."""
        targets = [(j, -1) for j in job_ids] + [(int(j), int(r)) for j, r in runs]
        for job_id, run in targets:
            if await self.kill(job_id, 0, "stale", silent=True, run=run):
                log.warning("job %d run %d is not ours any more (controller's kill list)",
                            job_id, run)
