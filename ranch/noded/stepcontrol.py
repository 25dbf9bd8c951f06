"""What rnoded does to a step's tasks and makes of their exits: signals to their process groups
(TERM, then KILL after KillWait), rrun's stdin fed to them, and the StepEnd their exits come to."""

from __future__ import annotations

import os
import signal
import time

import trio

from ranch.noded.steptasks import RunningStep
from ranch.noded.usage import Track, usage_of
from ranch.protocol.messages import StepEnd, TaskInput


def signal_tasks(step: RunningStep, signum: int) -> None:
    """`signum` to the process group of each task that has not ended."""
    for task, pid in step.pids.items():
        if task in step.exits:
            continue
        try:
            os.killpg(pid, signum)
        except OSError:
            pass


async def end_tasks(step: RunningStep, kill_wait: float) -> None:
    """End the tasks: CONT and TERM now, KILL once `kill_wait` is over (the job's KillWait)."""
    signal_tasks(step, signal.SIGCONT)
    signal_tasks(step, signal.SIGTERM)
    with trio.move_on_after(kill_wait):
        await step.done.wait()
        return
    signal_tasks(step, signal.SIGKILL)


async def feed_stdin(step: RunningStep, msg: TaskInput) -> None:
    """rrun's stdin to every task still reading it; a task whose pipe broke stops getting it."""
    for task, pipe in list(step.stdin.items()):
        try:
            if msg.data:
                await pipe.send_all(msg.data.encode("latin-1"))
            if msg.eof:
                await pipe.aclose()
                del step.stdin[task]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            step.stdin.pop(task, None)


def step_end(step: RunningStep, track: Track | None) -> StepEnd:
    """The step's end here, from its tasks' exits (the highest code, the first signal), the
    ending asked for, and what its tasks used."""
    spec = step.spec
    codes = [c for c, _ in step.exits.values()]
    signals = [s for _, s in step.exits.values() if s]
    if step.ending:
        state = step.ending
    elif any(codes) or signals:
        state = "FAILED"
    else:
        state = "COMPLETED"
    return StepEnd(spec.job_id, spec.step_id, state, max(codes, default=0),
                   signals[0] if signals else 0, spec.restarts, step.started_at, time.time(),
                   usage=usage_of(track))
