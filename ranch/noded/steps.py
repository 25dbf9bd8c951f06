"""Job steps on a node (rrun's tasks): start them inside their job, stream their output straight to
rrun over a connection signed with the step's key, and report how they ended to rctld.

A step's tasks run behind their supervisor (noded/stepshim.py, noded/steptasks.py), so they outlive
rnoded as batch jobs do: a stopping rnoded leaves them running and its successor finds them in the
spool, reconnects to rrun and carries on. They end when rrun goes away (its I/O connection
closes for good), when rctld or rrun asks (KillStep, StepSignal), and when their job ends here.
Their part's end goes to rctld as a StepEnd, kept in the spool and resent until acknowledged
while the job runs.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from ranch.noded import stepstore
from ranch.noded.joblaunch import LaunchError
from ranch.noded.jobs import JobRunner
from ranch.noded.stepcontrol import end_tasks, feed_stdin, signal_tasks, step_end
from ranch.noded.stepspool import StepOutput, hang_up, pump
from ranch.noded.steptasks import (
    LineReader,
    RunningStep,
    found,
    let_go,
    says_cancelled,
    start_tasks,
)
from ranch.noded.taskenv import cancelled_line, truncate_shared
from ranch.protocol.messages import (
    OutputAck,
    StepEnd,
    StepHello,
    StepSignal,
    StepSpec,
    TaskExit,
    TaskInput,
    TaskOutput,
)
from ranch.protocol.tcp import FramedStream, PeerClosed

log = logging.getLogger("rnoded.steps")

CONNECT_TIMEOUT = 10.0  # reaching rrun's listener
LOST = (trio.BrokenResourceError, trio.ClosedResourceError, PeerClosed, OSError)
STOP_GRACE = 1.0  # a frame under way to rrun when rnoded stops gets this long to finish


def _meter_key(step: RunningStep) -> tuple[str, int, int]:
    return ("step", step.spec.job_id, step.spec.step_id)


class StepRunner:
    """The steps running on this node. `report` sends a StepEnd to rctld and returns once it was
    acknowledged (it raises when it could not be sent)."""

    def __init__(self, jobs: JobRunner, node: str,
                 report: Callable[[StepEnd], Awaitable[Any]]) -> None:
        self.jobs = jobs
        self.node = node
        self.report = report
        self.steps: dict[tuple[int, int], RunningStep] = {}
        self.ending: set[tuple[int, int]] = set()  # ended here, StepEnd not acknowledged yet
        self.kill_wait = 30.0
        self._stop_at: float | None = None  # rnoded stops: frames under way finish by then
        self._sending: set[trio.CancelScope] = set()

    def stop(self) -> None:
        """rnoded stops (its nursery is cancelled next): a frame being sent to rrun finishes
        first, within STOP_GRACE, so that rrun never misses a piece of output read here."""
        self._stop_at = trio.current_time() + STOP_GRACE

    async def _guard_sends(self) -> None:
        """Until the daemon is cancelled; then the frames under way to rrun get until stop()'s
        time to finish (none without a stop(): cancelled so, the daemon goes at once)."""
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                while self._sending and self._stop_at is not None \
                        and trio.current_time() < self._stop_at:
                    await trio.sleep(0.01)
                for scope in list(self._sending):
                    scope.cancel()

    async def launch(self, spec: StepSpec, nursery: trio.Nursery) -> None:
        """Start the step's tasks here; returns once they run. LaunchError says why not."""
        key = (spec.job_id, spec.step_id)
        if key in self.steps or key in self.ending:
            return  # a repeated LaunchStep
        job = await self.jobs.wait_started(spec.job_id, spec.restarts)
        if job is None or job.spec.restarts != spec.restarts:
            raise LaunchError(f"job {spec.job_id} does not run on node {self.node}")
        self.kill_wait = job.spec.kill_wait
        step = RunningStep(spec, started_at=time.time())
        self.steps[key] = step
        truncate_shared(spec, self.node, job.spec.name, step.opened, job.spec.array_job_id,
                        job.spec.array_task_id)
        try:
            why = await self._connect(step)
        except BaseException:  # cancelled (the connection to rctld lost): nothing started
            self.steps.pop(key, None)
            raise
        if why is None:
            try:
                ident: dict | Exception = self.jobs.identity(spec)
            except LaunchError as exc:
                ident = exc
            try:
                # shielded (the shim answers in milliseconds): tasks that started are never
                # left without their watcher
                with trio.CancelScope(shield=True):
                    step.held = await start_tasks(step, job, node=self.node, ident=ident,
                                                  spool_dir=self.jobs.spool_dir,
                                                  python=self.jobs.python)
            except LaunchError as exc:
                why = str(exc)
            if step.held is not None:  # what its tasks use (issue 48)
                self.jobs.meter.watch(_meter_key(step), step.pids)
        if why is not None:
            self.steps.pop(key, None)
            if step.fs is not None:  # rrun hears of it as of tasks that could not start
                for task in spec.tasks:
                    await self._say(step, TaskOutput(task, 2, f"slurmstepd-{self.node}: "
                                                              f"error: {why}\n"))
                    await self._say(step, TaskExit(task, 1, 0))
                await hang_up(step.fs)  # rrun's answer to the hello is unread
            nursery.start_soon(self._send_end, StepEnd(
                spec.job_id, spec.step_id, "FAILED", 1, restarts=spec.restarts,
                started_at=step.started_at, ended_at=time.time(), message=why), None)
            raise LaunchError(why)
        for task, (text, code) in step.failed.items():  # tasks that could not start
            await self._say(step, TaskOutput(task, 2, text))
            step.exits[task] = (code, 0)
            await self._say(step, TaskExit(task, code, 0))
        nursery.start_soon(self._run, step, job)

    async def _connect(self, step: RunningStep) -> str | None:
        """Reach rrun's listener and say hello; None once done, else why not."""
        spec = step.spec
        try:
            with trio.fail_after(CONNECT_TIMEOUT):
                stream = await trio.open_tcp_stream(spec.io_host, spec.io_port)
            step.fs = FramedStream(stream, bytes.fromhex(spec.key))
            await step.fs.send(StepHello(spec.job_id, spec.step_id, self.node, spec.tasks), 0)
        except (OSError, trio.TooSlowError, ValueError, *LOST) as exc:
            step.fs = None
            return f"cannot reach rrun at {spec.io_host}:{spec.io_port}: {exc or 'timeout'}"
        return None

    # ------------------------------------------------------------------------- after a restart

    async def adopt(self, nursery: trio.Nursery) -> None:
        """Carry on with the steps the spool records (rnoded restarted under them): reconnect
        to their rrun and read on; resend the ends not yet acknowledged. Call once the jobs
        were re-adopted. `nursery` is the daemon's: it also bounds, as rnoded stops, the
        frames still under way to rrun."""
        nursery.start_soon(self._guard_sends)
        for path in await trio.to_thread.run_sync(stepstore.list_dirs, self.jobs.spool_dir):
            try:
                await self._adopt_one(path, nursery)
            except Exception:  # one broken record must not keep rnoded from starting
                log.exception("cannot carry on with the step recorded in %s; leaving it", path)

    async def _adopt_one(self, path: Path, nursery: trio.Nursery) -> None:
        step = await found(path, self.node)
        if isinstance(step, StepEnd):
            self.ending.add((step.job_id, step.step_id))
            nursery.start_soon(self._send_end, step, path)
            return
        if step is None:
            return
        spec = step.spec
        self.steps[(spec.job_id, spec.step_id)] = step
        job = self.jobs.running.get(spec.job_id)
        if job is not None and job.spec.restarts != spec.restarts:
            job = None
        if job is not None:
            self.kill_wait = job.spec.kill_wait
        log.info("step %d.%d: carrying on with %d task(s), %d ended (%d pipes)", spec.job_id,
                 spec.step_id, len(step.pids), len(step.exits),
                 len(step.held.outputs) if step.held else 0)
        nursery.start_soon(self._resume, step, job)

    async def _resume(self, step: RunningStep, job: Any) -> None:
        why = await self._connect(step)
        if why is not None:
            log.info("step %d.%d: %s", step.spec.job_id, step.spec.step_id, why)
        await self._run(step, job)

    # ------------------------------------------------------------------------------ running

    async def _run(self, step: RunningStep, job: Any) -> None:
        if step.spec.io_resume and step.held is not None:  # rrun acknowledges: spooled
            streams = [(t, fd) for t, fd, _, forward in step.held.outputs if forward]
            step.out = StepOutput(step.held.path, streams,
                                  resuming=step.adopted and step.fs is not None)
        try:
            async with trio.open_nursery() as tasks:
                for task, fd, stream, forward in step.held.outputs if step.held else ():
                    tasks.start_soon(self._pump, step, task, fd, stream, forward)
                if step.fs is not None:
                    tasks.start_soon(self._from_rrun, step, tasks.cancel_scope)
                elif step.adopted:  # rrun went away while rnoded was: as if it went now
                    tasks.start_soon(self.signal, step, 0)
                tasks.start_soon(self._job_watch, step, job)
                await self._watch_shim(step)
                tasks.cancel_scope.cancel()  # every task ended: stop reading rrun
        except trio.Cancelled:
            # rnoded stops: the tasks run on under their shim, the next rnoded carries on
            with trio.CancelScope(shield=True):
                if step.fs is not None:
                    with trio.move_on_after(0.5):
                        await step.fs.aclose()
            if step.out is not None:
                step.out.close()
            raise
        await self._finish(step)

    async def _watch_shim(self, step: RunningStep) -> None:
        """Each task's end, as the shim says it ("exit TASK CODE SIGNAL USER_S SYSTEM_S"), until
        every task ended or it closes its stdout; then what its records say of any not heard of
        (ended while rnoded was away). The shim's end of file (what the tasks left behind
        killed) is waited for beside the StepEnd (let_go), which rctld hears of at once."""
        if step.adopted:
            await self._from_records(step)
            # the tasks that run on are sampled again from here (their CPU comes with their
            # end); those that ended while rnoded was away count with their records' CPU
            self.jobs.meter.watch(_meter_key(step), {
                t: pid for t, pid in step.pids.items() if t not in step.exits})
        if step.held is not None and step.held.status is not None:
            reader = LineReader(step.held.status)
            while len(step.exits) < len(step.spec.tasks) \
                    and (line := await reader.readline()) is not None:
                words = line.split()
                if len(words) in (4, 6) and words[0] == "exit":  # 4: a shim from before its CPU
                    task, code, sig = (int(w) for w in words[1:4])
                    cpu = (float(words[4]), float(words[5])) if len(words) == 6 else None
                    await self._task_ended(step, task, code, sig, cpu)
        await self._from_records(step, missing=(1, 0))

    async def _from_records(self, step: RunningStep, missing: tuple[int, int] | None = None
                            ) -> None:
        for task in step.spec.tasks:
            if task in step.exits:
                continue
            rec = None
            if step.path is not None:
                rec = await trio.to_thread.run_sync(stepstore.load_exit, step.path, task)
            if rec is not None:
                await self._task_ended(step, task, rec[0], rec[1], rec[3])
            elif missing is not None:  # the shim went without a word of it
                await self._task_ended(step, task, *missing, None)

    async def _task_ended(self, step: RunningStep, task: int, code: int, sig: int,
                          cpu: tuple[float, float] | None) -> None:
        """`cpu`: the task's rusage as its shim reaped it (user s, system s); None: unknown."""
        if task in step.exits:
            return
        self.jobs.meter.ended(_meter_key(step), task, cpu)  # reaped: its pid is not ours to look at
        # its last output comes before its exit (a child it left behind that still holds the
        # pipes does not keep the exit waiting long); after a restart, first what rrun missed
        if step.out is not None:
            await step.out.all_resent(task)
        if task in step.drained:
            with trio.move_on_after(2.0):
                await step.drained[task].wait()
        step.exits[task] = (code, sig)
        if len(step.exits) >= len(step.spec.tasks):
            step.done.set()
        await self._say(step, TaskExit(task, code, sig))

    async def _pump(self, step: RunningStep, task: int, fd: int, stream: Any,
                    forward: bool) -> None:
        try:
            await pump(step, task, fd, stream, forward, self._say)
        finally:
            step.pumps[task] -= 1
            if step.pumps[task] <= 0:
                step.drained[task].set()

    async def _from_rrun(self, step: RunningStep, scope: trio.CancelScope) -> None:
        """rrun's frames: stdin and signals. Its connection closing ends the step here."""
        fs = step.fs
        assert fs is not None
        async for msg in fs.messages():
            if isinstance(msg, StepSignal):
                # rrun's SIGKILL (srun's SIGTERM, Ctrl-C thrice) and SIGINT (Ctrl-C twice; a
                # single one is never sent) cancel the step
                if msg.signal == signal.SIGKILL and says_cancelled(step):
                    await self._say(step, TaskOutput(step.spec.tasks[0], 2, cancelled_line(
                        step.spec, self.node)))
                ends = msg.signal in (signal.SIGKILL, signal.SIGINT)
                await self.signal(step, msg.signal, ending="CANCELLED" if ends else "")
            elif isinstance(msg, TaskInput):
                await feed_stdin(step, msg)
            elif isinstance(msg, OutputAck) and step.out is not None:
                step.out.took(msg.received)
        if step.out is not None:  # no word will come: what waits for one goes on
            step.out.answered.set()
        if step.pids and len(step.exits) < len(step.spec.tasks):
            log.info("step %d.%d: rrun went away; ending its tasks", step.spec.job_id,
                     step.spec.step_id)
            step.fs = None
            await self.signal(step, 0)

    async def _job_watch(self, step: RunningStep, job: Any) -> None:
        if job is not None:  # None: the job ended here while rnoded was away
            await job.done.wait()
        if step.running:
            await self.signal(step, signal.SIGKILL, ending="CANCELLED")

    async def signal(self, step: RunningStep, signum: int, ending: str = "") -> None:
        """Deliver `signum` to each task's process group; 0 ends them (TERM, KILL later). One
        whose tasks all exited ends as they did (rrun may hang up before rctld hears of it)."""
        if signum == 0:
            step.ending = step.ending or ("CANCELLED" if step.running else "")
            await end_tasks(step, self.kill_wait)
            return
        if ending:
            step.ending = step.ending or (ending if step.running else "")
        signal_tasks(step, signum)

    async def kill(self, job_id: int, step_id: int, signum: int) -> bool:
        step = self.steps.get((job_id, step_id))
        if step is None:
            return False
        await self.signal(step, signum)
        return True

    async def job_killed(self, job_id: int, signum: int) -> None:
        """rcancel of the whole job (or -s SIG): every step of it here gets the same."""
        for (jid, _), step in list(self.steps.items()):
            if jid == job_id:
                if signum == 0:
                    step.ending = step.ending or ("CANCELLED" if step.running else "")
                    signal_tasks(step, signal.SIGTERM)
                else:
                    signal_tasks(step, signum)

    async def _say(self, step: RunningStep, msg: Any) -> None:
        """One frame to rrun. Shielded, so that stopping rnoded never cuts a frame in half or
        loses a piece of output already read from a task's pipe: stop() bounds it instead."""
        fs = step.fs
        if fs is None:
            return
        until = self._stop_at if self._stop_at is not None else math.inf
        with trio.CancelScope(shield=True, deadline=until) as scope:
            self._sending.add(scope)
            try:
                await fs.send(msg, 0)
            except LOST:
                step.fs = None  # rrun is gone: _from_rrun ends the tasks
            finally:
                self._sending.discard(scope)
        if scope.cancelled_caught:
            step.fs = None

    async def _finish(self, step: RunningStep) -> None:
        spec = step.spec
        key = (spec.job_id, spec.step_id)
        end = step_end(step, self.jobs.meter.stop(_meter_key(step)))
        if step.out is not None:
            step.out.close()
        with trio.CancelScope(shield=True):  # quick, and the next rnoded needs it whole
            if step.path is not None:
                await trio.to_thread.run_sync(stepstore.save_end, step.path, end)
            self.ending.add(key)
            self.steps.pop(key, None)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(let_go, step)  # beside: rctld hears of the end at once
            await self._send_end(end, step.path)

    async def _send_end(self, end: StepEnd, path: Path | None) -> None:
        """To rctld, until it acknowledges or the job is gone from here (then rctld ends the
        step with the job); then its record goes. A stopping rnoded leaves it to the next."""
        delay = 0.2
        while True:
            try:
                await self.report(end)
                break
            except Exception as exc:  # the session is down or reconnecting: try again
                log.info("step %d.%d: StepEnd not sent yet: %s", end.job_id, end.step_id, exc)
            job = self.jobs.running.get(end.job_id)
            if job is None or job.spec.restarts != end.restarts:
                break
            await trio.sleep(delay)
            delay = min(delay * 2, 5.0)
        self.ending.discard((end.job_id, end.step_id))
        if path is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(stepstore.remove, path)
