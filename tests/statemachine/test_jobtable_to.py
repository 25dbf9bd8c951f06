"""The job table's `to` column says what its handlers really do: every transition a handler makes,
from any job a row applies to, lands in a state class the row lists (SAME: the one it was in)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ranch.statemachine import jobevents as je
from ranch.statemachine.jobstates import FINAL, JobState
from ranch.statemachine.jobtable import JOB_ROWS, SAME, job_class

NODES = ("n1", "n2", "n3")
node = st.sampled_from(NODES)
node_tuple = st.lists(node, unique=True, max_size=3).map(tuple)
restarts = st.integers(0, 2)
ENDINGS = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "LAUNCH_FAILED")

views = st.builds(
    je.JobView,
    id=st.just(7),
    state=st.sampled_from(list(JobState)),
    outcome=st.sampled_from(["", je.REQUEUE, "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED",
                             "OUT_OF_MEMORY", "NODE_FAIL"]),
    held=st.sampled_from(["", "user", "admin"]),
    restarts=restarts,
    requeue=st.booleans(),
    nodes=node_tuple,
    awaiting=st.frozensets(node, max_size=3),
    exit_code=st.integers(0, 2),
    signal=st.sampled_from([0, 9, 15]),
    batch_host=st.sampled_from(["", *NODES]),
)

EVENTS = {
    "allocate": st.builds(je.Allocate, nodes=node_tuple.filter(bool), booting=st.booleans()),
    "nodes ready": st.just(je.NodesReady()),
    "launch confirmed": st.builds(je.LaunchConfirmed, node=node, restarts=restarts,
                                  started_at=st.floats(0, 1e9)),
    "end reported": st.builds(je.EndReported, node=node, restarts=restarts,
                              state=st.sampled_from(ENDINGS), exit_code=st.integers(0, 2),
                              signal=st.sampled_from([0, 9, 15])),
    "cancel": st.just(je.Cancel()),
    "node lost": st.builds(je.NodeLost, node=node, requeue=st.booleans()),
    "node failing": st.builds(je.NodeFailing, node=node, requeue=st.booleans()),
    "requeue": st.just(je.Requeue()),
    "hold": st.builds(je.Hold, admin=st.booleans()),
    "release": st.just(je.Release()),
    "update begin": st.builds(je.UpdateBegin),
    "complete": st.builds(je.Complete, exit_code=st.integers(0, 2),
                          signal=st.sampled_from([0, 9, 15])),
    "inactive": st.just(je.Inactive()),
    "not now": st.just(je.NotNow()),
    "preempt": st.builds(je.Preempt, requeue=st.booleans()),
}


def test_every_event_kind_has_a_strategy() -> None:
    assert set(EVENTS) == set(je.EVENT_KINDS)


CASES = [(row, cls) for row in JOB_ROWS for cls in row.states]


def _view_in(cls: str):
    """Jobs as ctld keeps them in `cls`: pending jobs hold no nodes; an active job's nodes are
    its allocation and it awaits some of them; a COMPLETING job knows its outcome."""
    if cls == "FINISHED":
        return views.filter(lambda v: v.state in FINAL).map(
            lambda v: attrs.evolve(v, awaiting=frozenset()))
    state = JobState(cls)
    if state == JobState.PENDING:
        return views.map(lambda v: attrs.evolve(v, state=state, nodes=(), awaiting=frozenset(),
                                                outcome="", batch_host=""))
    active = views.filter(lambda v: bool(v.nodes)).map(
        lambda v: attrs.evolve(v, state=state, awaiting=v.awaiting & set(v.nodes),
                               batch_host=v.nodes[0]))
    if state == JobState.COMPLETING:
        return active.filter(lambda v: bool(v.outcome))
    return active.map(lambda v: attrs.evolve(v, outcome=""))


@pytest.mark.parametrize(("row", "cls"), CASES,
                         ids=[f"{r.event}-{c}" for r, c in CASES])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_handler_lands_where_its_row_says(row, cls: str, data: st.DataObject) -> None:
    view = data.draw(_view_in(cls), label="job")
    event = data.draw(EVENTS[row.event], label="event")
    assert job_class(view) == cls
    try:
        after, _ = row.handler(view, event)
    except je.JobRefused:
        return  # a refusal changes nothing
    landed = job_class(after)
    allowed = {cls if to == SAME else to for to in row.to}
    assert landed in allowed, (
        f"row ({row.event!r}, {cls}) -> {row.handler.__name__} moved the job to {landed}; "
        f"the table's `to` column allows only {sorted(allowed)}")
