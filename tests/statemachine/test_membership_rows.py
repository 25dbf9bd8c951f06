"""Membership rows of the table (issue 13): PENDING until approved, REJECTED refuses
registrations, delete refused while work runs."""

from __future__ import annotations

import pytest

from ranch.statemachine import effects, names
from ranch.statemachine import events as ev
from ranch.statemachine.errors import InvalidTransition
from ranch.statemachine.model import Base, Flag, initial_state
from ranch.statemachine.table import PENDING, REJECTED, apply, classify
from tests.statemachine.helpers import P0, idle, run, sample


def test_only_a_never_registered_node_waits_for_approval() -> None:
    s = run(initial_state("n1", 8), ev.AwaitApproval(1.0))
    assert classify(s) == PENDING and names.compact(s) == "pend"
    assert run(idle(), ev.AwaitApproval(1.0)) == idle()  # a member stays a member


def test_pending_node_registers_beats_and_is_not_schedulable() -> None:
    s = sample("PENDING")
    assert (s.base, names.complete(s), names.compact(s)) == (Base.IDLE, "IDLE+PENDING", "pend")
    assert not s.schedulable
    s = run(s, ev.HeartbeatMissed(2.0))
    assert names.compact(s) == "pend*"
    s = run(s, ev.HeartbeatReceived(3.0))
    assert names.compact(s) == "pend"
    with pytest.raises(InvalidTransition, match="rcontrol approve"):
        apply(s, ev.AdminUpdate(4.0, "DRAIN", "x"), P0)
    with pytest.raises(InvalidTransition, match="takes no new work"):
        apply(s, ev.AllocationChanged(4.0, 2), P0)
    approved, fx = apply(s, ev.Approve(5.0, "alice"), P0)
    assert names.complete(approved) == "IDLE" and approved.schedulable
    assert effects.Membership("up") in fx


def test_health_of_a_pending_node_is_known() -> None:
    s = run(sample("PENDING"), ev.HealthResult(2.0, "drain", "HC: disk"))
    assert Flag.DRAIN in s.flags and Flag.PENDING in s.flags and classify(s) == PENDING


def test_reject_needs_a_reason_evicts_and_refuses_every_registration() -> None:
    with pytest.raises(InvalidTransition, match="reason is required"):
        apply(sample("PENDING"), ev.Reject(2.0, "  ", "alice"), P0)
    s, fx = apply(sample("PENDING"), ev.Reject(2.0, "not ours", "alice"), P0)
    assert classify(s) == REJECTED and names.complete(s) == "DOWN+REJECTED"
    assert effects.Evict() in fx and s.reason is not None and s.reason.user == "alice"
    for valid in (True, False):
        with pytest.raises(InvalidTransition, match="rejected by alice: not ours"):
            apply(s, ev.Registered(3.0, valid=valid, problem=None if valid else "Low CPUs"), P0)
    assert run(s, ev.HeartbeatMissed(4.0), ev.ResponseTimeout(5.0)) == s
    back = run(s, ev.Approve(6.0, "bob"))
    assert names.complete(back) == "UNKNOWN"
    assert names.complete(run(back, ev.Registered(7.0))) == "IDLE"


def test_members_cannot_be_rejected_and_busy_nodes_cannot_be_deleted() -> None:
    with pytest.raises(InvalidTransition, match="already a member"):
        apply(idle(), ev.Reject(2.0, "x", "alice"), P0)
    busy = run(idle(), ev.AllocationChanged(2.0, 4))
    with pytest.raises(InvalidTransition, match="CPUs allocated"):
        apply(busy, ev.Delete(3.0, "alice"), P0)
    s, fx = apply(idle(), ev.Delete(3.0, "alice"), P0)
    assert s == idle() and fx == (effects.Evict(),)
