"""The page's buttons are the transition tables' answers (ctld/web/actions.py): per node state the
requests `rcontrol update State=` would accept and that change the node, per job state the
commands `rcancel`/`rcontrol` would carry out, checked against the tables themselves."""

from __future__ import annotations

import pytest

from ranch.ctld.web.actions import job_actions, node_actions
from ranch.statemachine.jobevents import JobView
from ranch.statemachine.jobstates import JobState
from ranch.statemachine.model import Base, Flag, NodeState, Reason, ReasonSource
from ranch.statemachine.policy import Policy

WHY = Reason(ReasonSource.ADMIN, "bad fan", 1.0, "alice")


def _node(base: Base, *flags: Flag, alloc: int = 0, reason: Reason | None = None) -> NodeState:
    return NodeState("n1", base, frozenset(flags), reason, 4, alloc)


@pytest.mark.parametrize(("state", "want"), [
    (_node(Base.IDLE), ["DRAIN"]),  # nothing to resume
    (_node(Base.MIXED, alloc=2), ["DRAIN"]),
    (_node(Base.IDLE, Flag.DRAIN, reason=WHY), ["RESUME"]),  # drained: no second Drain
    (_node(Base.MIXED, Flag.DRAIN, alloc=2, reason=WHY), ["RESUME"]),  # draining
    (_node(Base.DOWN, reason=WHY), ["DRAIN", "RESUME"]),
    (_node(Base.IDLE, Flag.FAIL, reason=WHY), ["DRAIN", "RESUME"]),
    (_node(Base.IDLE, Flag.DRAIN, Flag.INVALID_REG, reason=WHY), []),  # RESUME refused
])
def test_node_requests_are_the_tables(state: NodeState, want: list[str]) -> None:
    assert node_actions(state, Policy()) == want


@pytest.mark.parametrize(("view", "may", "want"), [
    (JobView(1, JobState.PENDING), True, ["cancel", "hold"]),
    (JobView(1, JobState.PENDING, held="user"), True, ["cancel", "release"]),
    (JobView(1, JobState.RUNNING, nodes=("n1",)), True, ["cancel", "requeue"]),
    (JobView(1, JobState.RUNNING, nodes=("n1",), requeue=False), True, ["cancel"]),
    (JobView(1, JobState.COMPLETED), True, ["requeue"]),
    (JobView(1, JobState.PENDING), False, []),  # neither its owner nor an admin
])
def test_job_commands_are_the_tables(view: JobView, may: bool, want: list[str]) -> None:
    assert job_actions(view, may, admin=False) == want
