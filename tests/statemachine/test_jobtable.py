"""The job table, read as a specification: which event does what in which state, what is
refused and how it is worded, and that a report about another run never moves the job."""

from __future__ import annotations

import pytest

from ranch.statemachine import jobevents as je
from ranch.statemachine import jobtable as jt
from ranch.statemachine.jobstates import COMPACT, FINAL, JobState

S = JobState


def view(state: JobState = S.PENDING, **kw) -> je.JobView:
    return je.JobView(7, state, **kw)


def running(nodes=("n1", "n2"), restarts: int = 0, **kw) -> je.JobView:
    return view(S.RUNNING, nodes=nodes, awaiting=frozenset(nodes), batch_host=nodes[0],
                restarts=restarts, **kw)


def test_every_state_answers_every_event() -> None:
    """No (state, event) pair falls through to the generic refusal: each is a row."""
    for cls in jt.CLASSES:
        for kind in je.EVENT_KINDS:
            assert (cls, kind) in jt.JOB_TABLE, (cls, kind)


def test_every_state_has_a_squeue_code() -> None:
    from ranch.statemachine.jobcodes import LISTED_ACTIVE, ORDER

    assert set(COMPACT) == set(ORDER) == {s.value for s in JobState}
    assert LISTED_ACTIVE <= set(COMPACT)


def test_allocate_launches_or_waits_for_booting_nodes() -> None:
    new, fx = jt.apply_job(view(), je.Allocate(("n1", "n2")))
    assert (new.state, new.awaiting, new.batch_host) == (S.RUNNING, {"n1", "n2"}, "n1")
    assert fx == (je.Launch(("n1", "n2")),)
    new, fx = jt.apply_job(view(), je.Allocate(("n1",), booting=True))
    assert (new.state, fx) == (S.CONFIGURING, ())
    new, fx = jt.apply_job(new, je.NodesReady())
    assert (new.state, fx) == (S.RUNNING, (je.Launch(("n1",)),))


@pytest.mark.parametrize(("reported", "code", "sig", "state", "shown"), [
    ("COMPLETED", 0, 0, S.COMPLETED, (0, 0)), ("FAILED", 3, 0, S.FAILED, (3, 0)),
    ("FAILED", 0, 9, S.FAILED, (0, 9)), ("TIMEOUT", 0, 15, S.TIMEOUT, (0, 15)),
    # Slurm 22.05 shows an OOM kill as its SIG_OOM: 0:125 (slurm.h), whatever the script's code
    ("OUT_OF_MEMORY", 0, 9, S.OUT_OF_MEMORY, (0, 125)),
    ("OUT_OF_MEMORY", 137, 0, S.OUT_OF_MEMORY, (0, 125)),
    ("LAUNCH_FAILED", 1, 0, S.FAILED, (1, 0))])
def test_the_batch_hosts_end_ends_the_job(reported, code, sig, state, shown) -> None:
    v = running(nodes=("n1",))
    new, fx = jt.apply_job(v, je.EndReported("n1", 0, reported, code, sig, "why"))
    assert (new.state, (new.exit_code, new.signal)) == (state, shown)
    assert fx == (je.Free(("n1",)), je.Free(("n1",)))[: len(fx)] and je.Free(("n1",)) in fx


def test_other_nodes_are_stopped_and_awaited_after_the_batch_host_ends() -> None:
    new, fx = jt.apply_job(running(), je.EndReported("n1", 0, "COMPLETED"))
    assert (new.state, new.outcome, new.awaiting) == (S.COMPLETING, "COMPLETED", {"n2"})
    assert je.Kill(("n2",), "ended") in fx
    new, fx = jt.apply_job(new, je.EndReported("n2", 0, "CANCELLED", 0, 15))
    assert (new.state, new.exit_code, new.signal) == (S.COMPLETED, 0, 0)


def test_reports_of_another_run_change_nothing() -> None:
    v = running(restarts=2)
    for event in (je.EndReported("n1", 1, "COMPLETED"), je.LaunchConfirmed("n1", 1, 5.0),
                  je.EndReported("n9", 2, "COMPLETED")):
        assert jt.apply_job(v, event) == (v, ())
    assert jt.apply_job(v, je.LaunchConfirmed("n1", 2, 5.0)) == (v, (je.Started(5.0),))


def test_cancel_in_each_state() -> None:
    assert jt.apply_job(view(), je.Cancel())[0].state == S.CANCELLED
    new, fx = jt.apply_job(running(), je.Cancel())
    assert (new.state, new.outcome, fx) == (S.COMPLETING, "CANCELLED",
                                            (je.Kill(("n1", "n2"), "cancelled"),))
    new, _ = jt.apply_job(new, je.EndReported("n1", 0, "CANCELLED", 0, 15))
    new, _ = jt.apply_job(new, je.EndReported("n2", 0, "CANCELLED", 0, 15))
    assert (new.state, new.exit_code, new.signal) == (S.CANCELLED, 0, 15)  # as Slurm: 0:15
    for done in (view(S.COMPLETING, outcome="COMPLETED", awaiting=frozenset({"n1"})),
                 view(S.COMPLETED)):
        with pytest.raises(je.JobRefused, match="already completing or completed"):
            jt.apply_job(done, je.Cancel())


def test_node_loss_requeues_a_new_run_or_ends_node_fail() -> None:
    new, fx = jt.apply_job(running(), je.NodeLost("n2"))
    assert (new.state, new.restarts, new.nodes, new.awaiting) == (S.PENDING, 1, (), set())
    assert fx[0] == je.Kill(("n1",), "node_down")  # the run's other copy: killed by run
    new, _ = jt.apply_job(running(requeue=False), je.NodeLost("n2"))
    assert (new.state, new.restarts) == (S.NODE_FAIL, 0)
    assert jt.apply_job(running(), je.NodeLost("n9"))[0].state == S.RUNNING  # not its node


def test_state_fail_kills_and_waits_then_requeues() -> None:
    new, fx = jt.apply_job(running(nodes=("n1",)), je.NodeFailing("n1"))
    assert (new.state, new.outcome, fx) == (S.COMPLETING, je.REQUEUE,
                                            (je.Kill(("n1",), "node_fail"),))
    new, _ = jt.apply_job(new, je.EndReported("n1", 0, "CANCELLED", 0, 15))
    assert (new.state, new.restarts) == (S.PENDING, 1)


def test_requeue_hold_release_refusals_are_scontrols() -> None:
    with pytest.raises(je.JobRefused, match="Job is pending execution"):
        jt.apply_job(view(), je.Requeue())
    with pytest.raises(je.JobRefused, match="disabled"):
        jt.apply_job(running(requeue=False), je.Requeue())
    for event in (je.Hold(), je.UpdateBegin()):
        with pytest.raises(je.JobRefused, match="no longer pending"):
            jt.apply_job(running(), event)
    with pytest.raises(je.JobRefused, match="not held"):
        jt.apply_job(view(), je.Release())
    held, _ = jt.apply_job(view(), je.Hold(admin=True))
    assert held.held == "admin" and jt.apply_job(held, je.Release())[0].held == ""
    with pytest.raises(je.JobRefused, match="held"):
        jt.apply_job(held, je.Allocate(("n1",)))
    again, _ = jt.apply_job(view(S.FAILED, exit_code=3), je.Requeue())
    assert (again.state, again.restarts, again.exit_code) == (S.PENDING, 1, 0)


def test_final_states_are_final() -> None:
    for state in FINAL:
        v = view(state)
        for event in (je.EndReported("n1", 0, "COMPLETED"), je.NodeLost("n1"),
                      je.NodeFailing("n1"), je.NodesReady(), je.LaunchConfirmed("n1", 0, 1.0)):
            assert jt.apply_job(v, event) == (v, ())
