"""Job steps on a node (rrun's tasks): start them inside their job, stream their output straight to
rrun over a connection signed with the step's key, and report how they ended to rctld.

A step's tasks are rnoded's children (not the batch shim's): they end when rrun goes away (its
I/O connection closes), when rctld or rrun asks (KillStep, StepSignal), and when their job ends
here. Their part's end goes to rctld as a StepEnd, resent until acknowledged while the job runs.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from ranch.noded.joblaunch import LaunchError
from ranch.noded.jobs import JobRunner
from ranch.noded.taskenv import (
    OpenError,
    cancelled_line,
    exec_error,
    expand,
    open_out,
    task_argv,
    task_environment,
    truncate_shared,
)
from ranch.noded.usage import usage_of, wait_exited
from ranch.protocol.messages import (
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
CHUNK = 1 << 16  # one TaskOutput frame at most
LOST = (trio.BrokenResourceError, trio.ClosedResourceError, PeerClosed, OSError)


@attrs.define(eq=False)
class RunningStep:
    spec: StepSpec
    procs: dict[int, trio.Process] = attrs.Factory(dict)
    exits: dict[int, tuple[int, int]] = attrs.Factory(dict)  # task -> (exit code, signal)
    fs: FramedStream | None = None
    ending: str = ""  # CANCELLED once it was asked to end
    started_at: float = 0.0
    done: trio.Event = attrs.Factory(trio.Event)
    stdin: dict[int, trio.abc.SendStream] = attrs.Factory(dict)
    pumps: dict[int, int] = attrs.Factory(dict)  # task -> its output pipes still open
    drained: dict[int, trio.Event] = attrs.Factory(dict)  # task -> its pipes reached EOF
    opened: set[str] = attrs.Factory(set)  # -o/-e files this step opened here



def _says_cancelled(step: RunningStep) -> bool:
    """slurmstepd's rule for its "*** STEP ... CANCELLED AT ***" line when srun ends a step
    (req.c, _handle_signal_container): only the step's first node says it, once, and only
    while a task there still runs. Every node saying it, even after its tasks ended, made the
    line depend on which node's tasks the SIGKILL still found running."""
    spec = step.spec
    return (spec.node_index == 0 and bool(spec.tasks) and not step.ending
            and len(step.exits) < len(spec.tasks))


class StepRunner:
    """The steps running on this node. `report` sends a StepEnd to rctld and returns once it was
    acknowledged (it raises when it could not be sent)."""

    def __init__(self, jobs: JobRunner, node: str,
                 report: Callable[[StepEnd], Awaitable[Any]]) -> None:
        self.jobs = jobs
        self.node = node
        self.report = report
        self.steps: dict[tuple[int, int], RunningStep] = {}
        self.kill_wait = 30.0

    async def launch(self, spec: StepSpec, nursery: trio.Nursery) -> None:
        """Start the step's tasks here; returns once they run. LaunchError says why not."""
        key = (spec.job_id, spec.step_id)
        if key in self.steps:
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
            with trio.fail_after(CONNECT_TIMEOUT):
                stream = await trio.open_tcp_stream(spec.io_host, spec.io_port)
            step.fs = FramedStream(stream, bytes.fromhex(spec.key))
            await step.fs.send(StepHello(spec.job_id, spec.step_id, self.node, spec.tasks), 0)
        except (OSError, trio.TooSlowError, ValueError, *LOST) as exc:
            self.steps.pop(key, None)
            why = f"cannot reach rrun at {spec.io_host}:{spec.io_port}: {exc or 'timeout'}"
            nursery.start_soon(self._send_end, StepEnd(
                spec.job_id, spec.step_id, "FAILED", 1, restarts=spec.restarts,
                started_at=step.started_at, ended_at=time.time(), message=why))
            raise LaunchError(why) from None
        nursery.start_soon(self._run, step, job)

    async def _run(self, step: RunningStep, job: Any) -> None:
        spec = step.spec
        try:
            async with trio.open_nursery() as tasks:
                for local, task in enumerate(spec.tasks):
                    await self._start_task(step, local, task, job, tasks)
                tasks.start_soon(self._from_rrun, step, tasks.cancel_scope)
                tasks.start_soon(self._job_watch, step, job)
                async with trio.open_nursery() as w:
                    for task, proc in step.procs.items():
                        w.start_soon(self._wait_task, step, task, proc)
                tasks.cancel_scope.cancel()  # every task ended: stop reading rrun
        finally:
            with trio.CancelScope(shield=True):
                await self._finish(step)

    async def _start_task(self, step: RunningStep, local: int, task: int, job: Any,
                          nursery: trio.Nursery) -> None:
        spec = step.spec
        env = task_environment(spec, self.node, local, task, job.spec.cpus)
        stdin: Any = subprocess.DEVNULL
        to_rrun = {1: not spec.stdout, 2: not spec.stderr and not spec.stdout}
        outputs: dict[int, Any] = {1: subprocess.PIPE, 2: subprocess.PIPE}
        files = []
        js = job.spec

        def path(pattern: str) -> str:  # %A %a: the array's, when the job is an array task
            return expand(pattern, spec, self.node, task, js.name, js.array_job_id,
                          js.array_task_id)

        def opened(which: str, name: str, how) -> Any:
            try:
                return how(name)
            except OSError as exc:
                raise OpenError(which, name, exc) from None

        try:
            if spec.stdout:
                files.append(opened("stdout", path(spec.stdout),
                                    lambda p: open_out(p, spec.stdout, step.opened)))
                outputs[1] = files[-1]
                outputs[2] = files[-1]
            if spec.stderr:
                files.append(opened("stderr", path(spec.stderr),
                                    lambda p: open_out(p, spec.stderr, step.opened)))
                outputs[2] = files[-1]
            elif not spec.stdout:
                outputs[2] = subprocess.PIPE
            wants_input = spec.input in ("", "all") or spec.input == str(task)
            if spec.input not in ("", "all", "none") and not spec.input.isdigit():
                files.append(opened("stdin", path(spec.input), lambda p: open(p, "rb")))
                stdin = files[-1]
            elif wants_input:
                stdin = subprocess.PIPE
            kwargs: dict[str, Any] = {}
            if self.jobs.as_root:
                ident = self.jobs.identity(spec)  # the same rule as the batch script's
                kwargs = {"user": ident["uid"], "group": ident["gid"],
                          "extra_groups": ident["groups"]}
            proc = await trio.lowlevel.open_process(
                task_argv(spec, env), stdin=stdin, stdout=outputs[1], stderr=outputs[2], env=env,
                cwd=spec.cwd, start_new_session=True, **kwargs)
        except (OSError, LaunchError) as exc:
            for f in files:
                f.close()
            await self._say(step, TaskOutput(task, 2, exec_error(spec, exc, self.node)))
            code = 1 if isinstance(exc, OpenError) else 2  # slurmstepd: exit 1, execve: 2
            step.exits[task] = (code, 0)
            await self._say(step, TaskExit(task, code, 0))
            return
        for f in files:
            f.close()
        step.procs[task] = proc
        self.jobs.meter.watch(("step", spec.job_id, spec.step_id), {task: proc.pid})
        if proc.stdin is not None:
            step.stdin[task] = proc.stdin
        step.drained[task] = trio.Event()
        pipes = [(fd, s) for fd, s in ((1, proc.stdout), (2, proc.stderr)) if s is not None]
        step.pumps[task] = len(pipes)
        if not pipes:
            step.drained[task].set()
        for fd, stream in pipes:
            nursery.start_soon(self._pump, step, task, fd, stream, to_rrun[fd])

    async def _pump(self, step: RunningStep, task: int, fd: int, stream: Any,
                    forward: bool) -> None:
        try:
            while True:
                try:
                    data = await stream.receive_some(CHUNK)
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    return
                if not data:
                    return
                if forward:
                    await self._say(step, TaskOutput(task, fd, data.decode("latin-1")))
        finally:
            step.pumps[task] -= 1
            if step.pumps[task] <= 0:
                step.drained[task].set()

    async def _wait_task(self, step: RunningStep, task: int, proc: trio.Process) -> None:
        await wait_exited(proc.pid)  # its CPU, read off its zombie before it is reaped
        self.jobs.meter.exited(("step", step.spec.job_id, step.spec.step_id), task)
        code = await proc.wait()
        result = (code, 0) if code >= 0 else (0, -code)
        # its last output comes before its exit (a child it left behind that still holds the
        # pipes does not keep the exit waiting long)
        with trio.move_on_after(2.0):
            await step.drained[task].wait()
        step.exits[task] = result
        if len(step.exits) >= len(step.spec.tasks):
            step.done.set()
        await self._say(step, TaskExit(task, *result))

    async def _from_rrun(self, step: RunningStep, scope: trio.CancelScope) -> None:
        """rrun's frames: stdin and signals. Its connection closing ends the step here."""
        fs = step.fs
        assert fs is not None
        async for msg in fs.messages():
            if isinstance(msg, StepSignal):
                # rrun's SIGKILL (srun's SIGTERM, Ctrl-C thrice) and SIGINT (Ctrl-C twice; a
                # single one is never sent) cancel the step
                if msg.signal == signal.SIGKILL and _says_cancelled(step):
                    await self._say(step, TaskOutput(step.spec.tasks[0], 2, cancelled_line(
                        step.spec, self.node)))
                ends = msg.signal in (signal.SIGKILL, signal.SIGINT)
                await self.signal(step, msg.signal, ending="CANCELLED" if ends else "")
            elif isinstance(msg, TaskInput):
                await self._feed(step, msg)
        if step.procs and len(step.exits) < len(step.spec.tasks):
            log.info("step %d.%d: rrun went away; ending its tasks", step.spec.job_id,
                     step.spec.step_id)
            step.fs = None
            await self.signal(step, 0)

    async def _feed(self, step: RunningStep, msg: TaskInput) -> None:
        for task, pipe in list(step.stdin.items()):
            try:
                if msg.data:
                    await pipe.send_all(msg.data.encode("latin-1"))
                if msg.eof:
                    await pipe.aclose()
                    del step.stdin[task]
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                step.stdin.pop(task, None)

    async def _job_watch(self, step: RunningStep, job: Any) -> None:
        await job.done.wait()
        if len(step.exits) < len(step.spec.tasks):
            await self.signal(step, signal.SIGKILL, ending="CANCELLED")

    async def signal(self, step: RunningStep, signum: int, ending: str = "") -> None:
        """Deliver `signum` to each task's process group; 0 ends them (TERM, KILL later)."""
        if signum == 0:
            step.ending = step.ending or "CANCELLED"
            self._signal_all(step, signal.SIGCONT)
            self._signal_all(step, signal.SIGTERM)
            await self._escalate(step)
            return
        if ending:
            step.ending = step.ending or ending
        self._signal_all(step, signum)

    async def _escalate(self, step: RunningStep) -> None:
        with trio.move_on_after(self.kill_wait):
            await step.done.wait()
            return
        self._signal_all(step, signal.SIGKILL)

    @staticmethod
    def _signal_all(step: RunningStep, signum: int) -> None:
        for task, proc in step.procs.items():
            if task in step.exits:
                continue
            try:
                os.killpg(proc.pid, signum)
            except OSError:
                pass

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
                    step.ending = step.ending or "CANCELLED"
                    self._signal_all(step, signal.SIGTERM)
                else:
                    self._signal_all(step, signum)

    async def _say(self, step: RunningStep, msg: Any) -> None:
        fs = step.fs
        if fs is None:
            return
        try:
            await fs.send(msg, 0)
        except LOST:
            step.fs = None  # rrun is gone: _from_rrun ends the tasks

    async def _finish(self, step: RunningStep) -> None:
        spec = step.spec
        self.steps.pop((spec.job_id, spec.step_id), None)
        if step.fs is not None:
            with trio.move_on_after(2):
                await step.fs.aclose()
        codes = [c for c, _ in step.exits.values()]
        signals = [s for _, s in step.exits.values() if s]
        if step.ending:
            state = step.ending
        elif any(codes) or signals:
            state = "FAILED"
        else:
            state = "COMPLETED"
        track = self.jobs.meter.stop(("step", spec.job_id, spec.step_id))
        end = StepEnd(spec.job_id, spec.step_id, state, max(codes, default=0),
                      signals[0] if signals else 0, spec.restarts, step.started_at, time.time(),
                      usage=usage_of(track))
        await self._send_end(end)

    async def _send_end(self, end: StepEnd) -> None:
        """To rctld, until it acknowledges or the job is gone from here (then rctld ends the
        step with the job)."""
        delay = 0.2
        while True:
            try:
                await self.report(end)
                return
            except Exception as exc:  # the session is down or reconnecting: try again
                log.info("step %d.%d: StepEnd not sent yet: %s", end.job_id, end.step_id, exc)
            job = self.jobs.running.get(end.job_id)
            if job is None or job.spec.restarts != end.restarts:
                return
            await trio.sleep(delay)
            delay = min(delay * 2, 5.0)


