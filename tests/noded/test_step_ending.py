"""A step asked to end on a node (its job killed, rrun gone, rcancel N.S) ends CANCELLED only
while a task of it still runs there; once every task exited it ends as they did. rrun hears of
the last exit before rctld hears of the step's end, and may hang up or release its allocation
(rrun outside a job: its JobControl complete) in between: a step whose task failed was then
recorded CANCELLED, where Slurm's srun records it FAILED (found by a CI run of
tests/integration/test_steps_e2e.py::test_rrun_outside_a_job_allocates_runs_and_releases)."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
import trio

from ranch.noded.stepcontrol import step_end
from ranch.noded.steps import StepRunner
from ranch.noded.steptasks import RunningStep
from ranch.protocol.stepmessages import StepSpec

SPEC = StepSpec(job_id=4, restarts=0, step_id=0, name="sh", user="root", uid=0, gid=0,
                argv=("sh",), cwd="/", env=(), nodelist="n1", node_index=0, tasks=(0, 1),
                ntasks=2, tasks_per_node="2", cpus_per_task=1, io_host="127.0.0.1",
                io_port=1, key="00")


def _runner(step: RunningStep) -> StepRunner:
    async def report(end: Any) -> None:
        raise AssertionError("nothing is reported here")

    runner = StepRunner(jobs=None, node="n1", report=report)  # type: ignore[arg-type]
    runner.steps[(SPEC.job_id, SPEC.step_id)] = step
    runner.kill_wait = 0.0
    return runner


def _step(exits: dict[int, tuple[int, int]]) -> RunningStep:
    step = RunningStep(SPEC, time.time(), exits=dict(exits))
    if len(exits) == len(SPEC.tasks):
        step.done.set()
    return step


ASKS = {
    "its job killed": lambda r, s: r.job_killed(SPEC.job_id, 0),
    "rrun gone or rcancel N.S": lambda r, s: r.signal(s, 0),
    "its job's end watched": lambda r, s: r.signal(s, signal.SIGKILL, ending="CANCELLED"),
}


@pytest.mark.parametrize("ask", ASKS.values(), ids=list(ASKS))
async def test_a_step_whose_tasks_all_exited_ends_as_they_did(ask: Any) -> None:
    step = _step({0: (0, 0), 1: (1, 0)})
    await ask(_runner(step), step)
    end = step_end(step, None)
    assert (end.state, end.exit_code) == ("FAILED", 1)


@pytest.mark.parametrize("ask", ASKS.values(), ids=list(ASKS))
async def test_a_step_with_a_task_still_running_ends_cancelled(ask: Any) -> None:
    step = _step({1: (1, 0)})  # task 0 has no exit yet (no process here: nothing is signalled)
    with trio.move_on_after(1):
        await ask(_runner(step), step)
    assert step_end(step, None).state == "CANCELLED"
