"""The job table's `preempt` event: a running victim is killed and awaited, then requeued or
PREEMPTED (0:0 whatever its script's end), a booting one at once; a job that ended meanwhile is
left as it is."""

from __future__ import annotations

import attrs

from ranch.statemachine import jobevents as je
from ranch.statemachine.jobstates import COMPLETING, CONFIGURING, PENDING, RUNNING, JobState
from ranch.statemachine.jobtable import apply_job

RUN = je.JobView(7, RUNNING, nodes=("a", "b"), awaiting=frozenset({"a", "b"}), batch_host="a")


def _end_all(v: je.JobView) -> je.JobView:
    for node in sorted(v.awaiting):
        v, _ = apply_job(v, je.EndReported(node, v.restarts, "CANCELLED", 0, 15))
    return v


def test_cancel_mode_ends_the_victim_preempted_with_exit_code_0_0() -> None:
    v, effects = apply_job(RUN, je.Preempt(requeue=False))
    assert v.state is COMPLETING and v.outcome == JobState.PREEMPTED
    assert effects == (je.Kill(("a", "b"), "preempted"),)
    done = _end_all(v)
    assert done.state == JobState.PREEMPTED and (done.exit_code, done.signal) == (0, 0)


def test_requeue_mode_requeues_unless_the_job_may_not_be() -> None:
    done = _end_all(apply_job(RUN, je.Preempt(requeue=True))[0])
    assert done.state is PENDING and done.restarts == 1 and not done.nodes
    no = attrs.evolve(RUN, requeue=False)
    assert _end_all(apply_job(no, je.Preempt(requeue=True))[0]).state == JobState.PREEMPTED


def test_a_booting_victim_ends_at_once_and_an_ended_one_is_left_alone() -> None:
    booting = attrs.evolve(RUN, state=CONFIGURING, awaiting=frozenset())
    v, effects = apply_job(booting, je.Preempt(requeue=False))
    assert v.state == JobState.PREEMPTED and effects == (je.Free(("a", "b")),)
    ended = attrs.evolve(RUN, state=JobState.COMPLETED, awaiting=frozenset())
    assert apply_job(ended, je.Preempt()) == (ended, ())
