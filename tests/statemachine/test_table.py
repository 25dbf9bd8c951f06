"""One test per row of ranch.statemachine.table.ROWS, plus the table's shape (refusals, targets)."""

from __future__ import annotations

import pytest

from ranch.statemachine import effects as fx
from ranch.statemachine import events as ev
from ranch.statemachine import names
from ranch.statemachine.errors import InvalidTransition
from ranch.statemachine.model import Base, Flag, Reason, ReasonSource, initial_state
from ranch.statemachine.table import CLASSES, ROWS, SAME, TABLE, apply, classify
from tests.statemachine.helpers import (
    MISMATCH,
    P0,
    P1,
    P2,
    admin,
    down_not_responding,
    idle,
    reason_of,
    run,
    sample,
    sample_event,
)

CTL, ADM, HC = ReasonSource.CONTROLLER, ReasonSource.ADMIN, ReasonSource.HEALTH_CHECK


# --- the table's shape -----------------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
def test_sample_states_have_the_class_they_stand_for(cls: str) -> None:
    assert classify(sample(cls)) == cls


@pytest.mark.parametrize("kind", ev.EVENT_KINDS)
@pytest.mark.parametrize("cls", CLASSES)
def test_every_cell_is_refused_or_lands_in_a_listed_class(cls: str, kind: str) -> None:
    state, event = sample(cls, "gpu03"), sample_event(kind)
    row = TABLE.get((cls, kind))
    if row is None:
        with pytest.raises(InvalidTransition) as err:
            apply(state, event, P0)
        assert "gpu03" in str(err.value)
        assert err.value.event == kind
        return
    try:
        new, _ = apply(state, event, P0)
    except InvalidTransition as exc:  # a guard inside the row refused (e.g. nothing to resume)
        assert "gpu03" in str(exc)
        return
    allowed = {cls if t == SAME else t for t in row.to}
    assert classify(new) in allowed, (cls, kind, names.complete(new))


def test_ignore_rows_change_nothing() -> None:
    for row in ROWS:
        if row.handler.__name__ != "ignore":
            continue
        for cls in row.states:
            state = sample(cls)
            assert apply(state, sample_event(row.event), P0) == (state, ())


# --- registration ----------------------------------------------------------------------------


def test_register_valid_unknown_becomes_idle_and_up() -> None:
    new, effects = apply(initial_state("n1", 8), ev.Registered(1.0), P0)
    assert (new.base, new.flags, new.reason) == (Base.IDLE, frozenset(), None)
    assert new.schedulable and fx.Membership("up") in effects


def test_register_valid_keeps_config_drain_and_allocation_decides_base() -> None:
    s = initial_state("n1", 8, "DRAIN", reason="bad fan")
    new = run(s, ev.Registered(1.0))
    assert names.complete(new) == "IDLE+DRAIN"
    assert reason_of(new) == (ReasonSource.CONFIG, "bad fan")
    mixed = run(idle(), ev.AllocationChanged(2.0, 4), ev.HeartbeatMissed(3.0), ev.Registered(4.0))
    assert mixed.base is Base.MIXED and Flag.NO_RESPOND not in mixed.flags


@pytest.mark.parametrize(("policy", "comes_back"), [(P0, False), (P1, True), (P2, True)])
def test_register_valid_down_not_responding_follows_return_to_service(policy, comes_back) -> None:
    new = run(down_not_responding(), ev.Registered(20.0), policy=policy)
    assert (new.base is Base.IDLE) is comes_back
    assert Flag.NO_RESPOND not in new.flags
    assert (new.reason is None) is comes_back


@pytest.mark.parametrize(("policy", "comes_back"), [(P0, False), (P1, False), (P2, True)])
def test_register_valid_admin_down_needs_rts2(policy, comes_back) -> None:
    new = run(idle(), admin("DOWN", "bad dimm"), ev.Registered(20.0), policy=policy)
    assert (new.base is Base.IDLE) is comes_back


def test_rts1_requires_no_reboot_and_never_clears_drain() -> None:
    rebooted = run(down_not_responding(), ev.Registered(20.0, rebooted=True), policy=P1)
    assert rebooted.base is Base.DOWN
    drained = run(idle(), admin("DRAIN", "maint"), ev.ResponseTimeout(5.0))
    assert drained.reason.text == "maint : Not responding" and drained.reason.source is ADM
    back = run(drained, ev.Registered(20.0), policy=P2)
    assert names.complete(back) == "IDLE+DRAIN" and reason_of(back) == (ADM, "maint")


def test_register_valid_unexpected_reboot_downs_an_up_node_unless_rts2() -> None:
    busy = run(idle(), ev.AllocationChanged(2.0, 8))
    new, effects = apply(busy, ev.Registered(3.0, rebooted=True), P1)
    assert new.base is Base.DOWN and reason_of(new) == (CTL, "Node unexpectedly rebooted")
    assert fx.KillJobs(requeue=True) in effects
    assert apply(busy, ev.Registered(3.0, rebooted=True), P2)[0].base is Base.ALLOCATED


def test_register_valid_clears_invalid_reg_and_its_drain_only() -> None:
    inval = sample("INVALID_REG")
    assert run(inval, ev.Registered(5.0)) == idle()
    admin_drained = run(inval, admin("DRAIN", "maint"), ev.Registered(5.0))
    assert names.complete(admin_drained) == "IDLE+DRAIN"
    assert reason_of(admin_drained) == (ADM, "maint")


def test_register_valid_on_power_classes_clears_power_flags() -> None:
    booted = run(sample("POWERING_UP"), ev.Registered(5.0, rebooted=True), policy=P0)
    assert names.complete(booted) == "IDLE+CLOUD" and booted.schedulable
    woke = run(sample("POWERED_DOWN"), ev.Registered(5.0))
    assert names.complete(woke) == "IDLE+CLOUD"


def test_register_on_powering_down_is_ignored_and_on_future_refused() -> None:
    s = sample("POWERING_DOWN")
    assert apply(s, ev.Registered(5.0), P0) == (s, ())
    assert apply(s, ev.Registered(5.0, valid=False, problem="x"), P0) == (s, ())
    with pytest.raises(InvalidTransition, match="cannot accept a registration from node n1: it is"
                       " FUTURE; activate it first"):
        apply(sample("FUTURE"), ev.Registered(5.0), P0)


def test_register_invalid_sets_inval_drain_with_controller_reason() -> None:
    new, effects = apply(initial_state("gpu03", 8), ev.Registered(1.0, False, MISMATCH), P0)
    assert names.complete(new) == "IDLE+DRAIN+INVALID_REG" and names.compact(new) == "inval"
    assert reason_of(new) == (CTL, MISMATCH)
    assert fx.ReasonRecorded(new.reason) in effects and not new.schedulable


# --- heartbeats and timeouts -----------------------------------------------------------------


def test_heartbeat_up_is_a_no_op_and_clears_not_responding() -> None:
    s = idle()
    new, effects = apply(s, ev.HeartbeatReceived(2.0), P0)
    assert new is s and effects == ()
    star = run(s, ev.HeartbeatMissed(3.0))
    back, effects = apply(star, ev.HeartbeatReceived(4.0), P0)
    assert back == s and fx.Membership("up") in effects


def test_heartbeat_down_asks_registration_only_when_rts_lets_it_back() -> None:
    d = down_not_responding()
    new, effects = apply(d, ev.HeartbeatReceived(5.0), P1)
    assert Flag.NO_RESPOND not in new.flags and effects == (fx.RequestRegistration(),)
    assert apply(d, ev.HeartbeatReceived(5.0), P0)[1] == ()


def test_heartbeat_from_unknown_or_powered_node_asks_registration() -> None:
    for cls in ("UNKNOWN", "POWERED_DOWN", "POWERING_UP"):
        assert fx.RequestRegistration() in apply(sample(cls), ev.HeartbeatReceived(5.0), P0)[1]


def test_heartbeat_ignored_on_invalid_and_powering_down() -> None:
    for cls in ("INVALID_REG", "POWERING_DOWN"):
        s = sample(cls)
        assert apply(s, ev.HeartbeatReceived(5.0), P0) == (s, ())


def test_heartbeat_missed_sets_star_and_keeps_jobs() -> None:
    busy = run(idle(), ev.AllocationChanged(2.0, 3))
    new, effects = apply(busy, ev.HeartbeatMissed(3.0), P0)
    assert names.compact(new) == "mix*" and new.cpus_alloc == 3 and not new.schedulable
    assert effects == (fx.Membership("not_responding"),)


def test_heartbeat_missed_ignored_on_power_classes_and_future() -> None:
    for cls in ("POWERED_DOWN", "POWERING_UP", "POWERING_DOWN", "FUTURE"):
        s = sample(cls)
        assert apply(s, ev.HeartbeatMissed(5.0), P0) == (s, ())


def test_response_timeout_downs_node_and_requeues_jobs() -> None:
    busy = run(idle(), ev.AllocationChanged(2.0, 8), ev.HeartbeatMissed(3.0))
    new, effects = apply(busy, ev.ResponseTimeout(4.0), P0)
    assert names.complete(new) == "DOWN+NOT_RESPONDING" and names.compact(new) == "down*"
    assert reason_of(new) == (CTL, "Not responding")
    assert fx.KillJobs(requeue=True) in effects and fx.Membership("down") in effects
    assert fx.KillJobs(requeue=True) not in apply(idle(), ev.ResponseTimeout(4.0), P0)[1]


def test_response_timeout_on_down_only_sets_star_and_ignored_elsewhere() -> None:
    d = run(idle(), admin("DOWN", "bad"))
    new = run(d, ev.ResponseTimeout(5.0))
    assert names.compact(new) == "down*" and reason_of(new) == (ADM, "bad")
    for cls in ("INVALID_REG", "POWERED_DOWN", "POWERING_UP", "POWERING_DOWN", "FUTURE"):
        s = sample(cls)
        assert apply(s, ev.ResponseTimeout(5.0), P0) == (s, ())


# --- allocation ------------------------------------------------------------------------------


def test_allocation_derives_idle_mixed_allocated() -> None:
    s = idle(cpus=8)
    assert run(s, ev.AllocationChanged(2.0, 1)).base is Base.MIXED
    assert run(s, ev.AllocationChanged(2.0, 8)).base is Base.ALLOCATED
    assert run(s, ev.AllocationChanged(2.0, 8), ev.AllocationChanged(3.0, 0)).base is Base.IDLE


def test_allocation_refused_beyond_cpus_and_on_unschedulable_nodes() -> None:
    with pytest.raises(InvalidTransition, match=r"9 CPUs is outside 0\.\.8"):
        apply(idle(), ev.AllocationChanged(2.0, 9), P0)
    drained = run(idle(), ev.AllocationChanged(2.0, 2), admin("DRAIN"))
    with pytest.raises(InvalidTransition, match="takes no new work"):
        apply(drained, ev.AllocationChanged(3.0, 4), P0)
    done = run(drained, ev.AllocationChanged(3.0, 0))
    assert names.compact(drained) == "drng" and names.compact(done) == "drain"


def test_allocation_on_powering_up_node_is_accepted() -> None:
    new = run(sample("POWERING_UP"), ev.AllocationChanged(2.0, 8))
    assert names.compact(new) == "alloc#"


def test_allocation_on_powered_down_node_starts_resume() -> None:
    new, effects = apply(sample("POWERED_DOWN"), ev.AllocationChanged(2.0, 4), P0)
    assert names.complete(new) == "MIXED+CLOUD+NOT_RESPONDING+POWERING_UP"
    assert fx.RunResumeProgram() in effects and fx.ScheduleTimeout("resume") in effects


def test_allocation_elsewhere_only_releases() -> None:
    busy_down = run(idle(), ev.AllocationChanged(2.0, 8), admin("DOWN"))
    released = run(busy_down, ev.AllocationChanged(3.0, 0))
    assert released.base is Base.DOWN and released.cpus_alloc == 0
    for cls in ("UNKNOWN", "DOWN", "INVALID_REG", "POWERING_DOWN", "FUTURE"):
        with pytest.raises(InvalidTransition):
            apply(sample(cls), ev.AllocationChanged(3.0, 1), P0)


# --- admin updates ---------------------------------------------------------------------------


@pytest.mark.parametrize("request_", ["DOWN", "DRAIN", "FAIL"])
def test_admin_down_drain_fail_need_a_reason(request_: str) -> None:
    with pytest.raises(InvalidTransition, match=r"You must specify a reason when DOWNING or "
                       r"DRAINING a node\. Request denied"):
        apply(idle(), admin(request_, reason="  "), P0)


def test_admin_down_kills_jobs_and_overwrites_reason() -> None:
    busy = run(idle(), ev.AllocationChanged(2.0, 4), ev.ResponseTimeout(3.0))
    new, effects = apply(busy, admin("DOWN", "bad dimm", "bob"), P0)
    assert new.reason == Reason(ADM, "bad dimm", 10.0, "bob") and new.base is Base.DOWN
    assert fx.KillJobs(requeue=True) in effects
    assert run(sample("FUTURE"), admin("DOWN")).base is Base.DOWN


def test_admin_drain_keeps_jobs_and_replaces_health_reason() -> None:
    hc = run(idle(), ev.HealthResult(2.0, "drain", "HC: disk full"))
    assert reason_of(hc) == (HC, "HC: disk full")
    new, effects = apply(hc, admin("DRAIN", "replace disk", "bob"), P0)
    assert reason_of(new) == (ADM, "replace disk") and not any(
        isinstance(e, fx.KillJobs) for e in effects)


def test_admin_fail_shows_fail_then_failing() -> None:
    assert names.compact(run(idle(), admin("FAIL"))) == "fail"
    assert names.compact(run(idle(), ev.AllocationChanged(1.0, 2), admin("FAIL"))) == "failg"


def test_admin_fail_kills_and_requeues_but_health_fail_lets_jobs_run() -> None:
    """Issue 12: State=FAIL kills the node's jobs (awaiting their processes: failg, then fail
    once they are gone); a health check's FAIL verdict lets them run."""
    busy = run(idle(), ev.AllocationChanged(1.0, 2))
    failed, effects = apply(busy, admin("FAIL", "bad dimm"), P0)
    assert fx.KillJobs(requeue=True, wait=True) in effects
    killing = run(failed, ev.Completing(2.0, True))
    assert names.compact(killing) == "failg"
    gone = run(killing, ev.AllocationChanged(3.0, 0), ev.Completing(3.0, False))
    assert names.compact(gone) == "fail" and reason_of(gone) == (ADM, "bad dimm")
    assert not any(isinstance(e, fx.KillJobs) for e in apply(idle(), admin("FAIL"), P0)[1])
    hc, effects = apply(busy, ev.HealthResult(2.0, "fail", "HC: gpu"), P0)
    assert names.compact(hc) == "failg"
    assert not any(isinstance(e, fx.KillJobs) for e in effects)


def test_admin_noresp_sets_star_on_any_powered_class() -> None:
    assert names.compact(run(idle(), admin("NORESP", None))) == "idle*"
    with pytest.raises(InvalidTransition):
        apply(sample("FUTURE"), admin("NORESP", None), P0)


def test_admin_resume_brings_down_node_back_until_it_registers() -> None:
    new, effects = apply(down_not_responding(), admin("RESUME", None), P0)
    assert names.complete(new) == "IDLE+NOT_RESPONDING" and new.reason is None
    assert fx.RequestRegistration() in effects
    assert run(new, ev.Registered(11.0)) == idle()
    assert names.compact(run(idle(), admin("DRAIN"), admin("RESUME", None))) == "idle"
    fut = run(sample("FUTURE"), admin("RESUME", None))
    assert names.complete(fut) == "IDLE+NOT_RESPONDING"


def test_admin_resume_refused_when_nothing_to_resume_or_invalid_reg() -> None:
    with pytest.raises(InvalidTransition, match="nothing to resume"):
        apply(idle(), admin("RESUME", None), P0)
    with pytest.raises(InvalidTransition, match=r"cannot RESUME node n1: it is INVALID_REG "
                       r"\(Low RealMemory .*\); restart rnoded with matching hardware"):
        apply(sample("INVALID_REG"), admin("RESUME", None), P0)


def test_admin_resume_on_powering_down_finishes_the_suspend_now() -> None:
    new = run(sample("POWERING_DOWN"), admin("RESUME", None))
    assert names.compact(new) == "idle~"


def test_admin_undrain_clears_drain_only() -> None:
    d = run(idle(), admin("DRAIN", "maint"), admin("DOWN", "dead"), admin("UNDRAIN", None))
    assert names.complete(d) == "DOWN" and reason_of(d) == (ADM, "dead")
    with pytest.raises(InvalidTransition, match="not drained"):
        apply(idle(), admin("UNDRAIN", None), P0)
    with pytest.raises(InvalidTransition, match="cannot UNDRAIN node gpu03: it is INVALID_REG"):
        apply(sample("INVALID_REG", "gpu03"), admin("UNDRAIN", None), P0)


def test_admin_idle_from_down_or_idle_only() -> None:
    new = run(run(idle(), admin("DOWN", "x"), admin("FAIL", "y")), admin("IDLE", None))
    assert names.complete(new) == "IDLE+NOT_RESPONDING" and new.reason is None
    with pytest.raises(InvalidTransition):
        apply(run(idle(), ev.AllocationChanged(1.0, 2)), admin("IDLE", None), P0)
    with pytest.raises(InvalidTransition):
        apply(sample("UNKNOWN"), admin("IDLE", None), P0)


def test_admin_future_from_idle_or_down() -> None:
    new, effects = apply(idle(), admin("FUTURE", None), P0)
    assert names.compact(new) == "futr" and fx.Membership("future") in effects
    assert run(new, admin("FUTURE", None)) is new
    with pytest.raises(InvalidTransition):
        apply(run(idle(), ev.AllocationChanged(1.0, 8)), admin("FUTURE", None), P0)


def test_admin_power_down_sets_pending_and_is_idempotent_when_off() -> None:
    new = run(idle(), admin("POWER_DOWN", None))
    assert names.compact(new) == "idle!" and not new.schedulable
    for cls in ("POWERED_DOWN", "POWERING_DOWN"):
        s = sample(cls)
        assert apply(s, admin("POWER_DOWN", None), P0) == (s, ())


def test_admin_power_down_asap_drains_then_ends_idle_powered_down() -> None:
    busy = run(idle(), ev.AllocationChanged(1.0, 8), admin("POWER_DOWN_ASAP", None))
    assert names.compact(busy) == "drng!" and reason_of(busy) == (ADM, "POWER_DOWN_ASAP")
    done = run(busy, ev.AllocationChanged(2.0, 0), ev.SuspendStarted(3.0), ev.SuspendTimeout(4.0))
    assert names.complete(done) == "IDLE+POWERED_DOWN" and done.reason is None
    s = sample("POWERED_DOWN")
    assert apply(s, admin("POWER_DOWN_ASAP", None), P0) == (s, ())


def test_admin_power_down_force_requeues_and_suspends_now() -> None:
    busy = run(idle(), ev.AllocationChanged(1.0, 8))
    new, effects = apply(busy, admin("POWER_DOWN_FORCE", None), P0)
    assert Flag.POWERING_DOWN in new.flags
    assert effects[:3] == (fx.KillJobs(True), fx.RunSuspendProgram(), fx.ScheduleTimeout("suspend"))
    s = sample("POWERING_DOWN")
    assert apply(s, admin("POWER_DOWN_FORCE", None), P0) == (s, ())


def test_admin_power_up_starts_resume_or_cancels_pending() -> None:
    new, effects = apply(sample("POWERED_DOWN"), admin("POWER_UP", None), P0)
    assert names.compact(new) == "idle#" and fx.RunResumeProgram() in effects
    assert run(idle(), admin("POWER_DOWN", None), admin("POWER_UP", None)) == idle()
    with pytest.raises(InvalidTransition, match="already powered up"):
        apply(idle(), admin("POWER_UP", None), P0)
    s = sample("POWERING_UP")
    assert apply(s, admin("POWER_UP", None), P0) == (s, ())


# --- health ----------------------------------------------------------------------------------


def test_health_drain_and_fail_set_health_reason() -> None:
    new = run(idle(), ev.HealthResult(2.0, "drain", "HC: disk full"))
    assert names.compact(new) == "drain" and reason_of(new) == (HC, "HC: disk full")
    assert names.compact(run(idle(), ev.HealthResult(2.0, "fail", "HC: gpu"))) == "fail"


def test_health_verdict_switches_flag_and_a_repeat_keeps_the_reason_time() -> None:
    drained = run(idle(), ev.HealthResult(2.0, "drain", "HC: disk full"))
    assert apply(drained, ev.HealthResult(3.0, "drain", "HC: disk full"), P0) == (drained, ())
    failed = run(drained, ev.HealthResult(4.0, "fail", "HC: gpu"))
    assert names.complete(failed) == "IDLE+FAIL" and failed.reason.time == 4.0
    back = run(failed, ev.HealthResult(5.0, "drain", "HC: disk full"))
    assert names.complete(back) == "IDLE+DRAIN" and reason_of(back) == (HC, "HC: disk full")
    # Under an admin's drain the check only adds its flag; the admin's reason stays.
    admin_drain = run(idle(), admin("DRAIN", "bob's"))
    both = run(admin_drain, ev.HealthResult(6.0, "fail", "HC: gpu"))
    assert names.complete(both) == "IDLE+DRAIN+FAIL" and reason_of(both) == (ADM, "bob's")


def test_health_ok_clears_only_health_reasons() -> None:
    hc = run(idle(), ev.HealthResult(2.0, "drain", "HC: disk full"))
    assert run(hc, ev.HealthResult(3.0, "ok")) == idle()
    admin_hc = run(idle(), admin("DRAIN", "HC: looks like NHC but is bob"))
    assert run(admin_hc, ev.HealthResult(3.0, "ok")) is admin_hc
    kept = run(admin_hc, ev.HealthResult(3.0, "drain", "HC: other"))
    assert reason_of(kept) == (ADM, "HC: looks like NHC but is bob")


def test_health_ok_on_down_node_keeps_a_reason() -> None:
    s = run(idle(), ev.HealthResult(2.0, "drain", "HC: x"), ev.ResponseTimeout(3.0))
    new = run(s, ev.HealthResult(4.0, "ok"))
    assert names.complete(new) == "DOWN+NOT_RESPONDING"
    assert reason_of(new) == (CTL, "Not responding")


def test_health_ignored_on_invalid_and_power_classes() -> None:
    for cls in ("INVALID_REG", "POWERED_DOWN", "POWERING_UP", "POWERING_DOWN"):
        s = sample(cls)
        assert apply(s, ev.HealthResult(5.0, "drain", "HC: x"), P0) == (s, ())


# --- power saving ----------------------------------------------------------------------------


def test_suspend_started_then_timeout() -> None:
    new, effects = apply(idle(), ev.SuspendStarted(2.0), P0)
    assert names.compact(new) == "idle%"
    assert effects[:2] == (fx.RunSuspendProgram(), fx.ScheduleTimeout("suspend"))
    off = run(new, ev.SuspendTimeout(3.0))
    assert names.compact(off) == "idle~"
    with pytest.raises(InvalidTransition):
        apply(run(idle(), ev.AllocationChanged(1.0, 1)), ev.SuspendStarted(2.0), P0)
    assert apply(new, ev.SuspendStarted(2.5), P0) == (new, ())


def test_stale_timers_are_ignored() -> None:
    s = idle()
    assert apply(s, ev.SuspendTimeout(5.0), P0) == (s, ())
    assert apply(s, ev.ResumeTimeout(5.0), P0) == (s, ())


def test_resume_started_then_timeout_marks_down_powered_down() -> None:
    booting, effects = apply(sample("POWERED_DOWN"), ev.ResumeStarted(2.0), P0)
    assert names.compact(booting) == "idle#" and Flag.NO_RESPOND in booting.flags
    assert effects[:2] == (fx.RunResumeProgram(), fx.ScheduleTimeout("resume"))
    busy = run(booting, ev.AllocationChanged(2.5, 8))
    failed, effects = apply(busy, ev.ResumeTimeout(3.0), P0)
    assert names.complete(failed) == "DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING"
    assert names.compact(failed) == "down~" and reason_of(failed) == (CTL, "ResumeTimeout reached")
    assert fx.RunResumeFailProgram() in effects and fx.KillJobs(True) in effects
    assert apply(booting, ev.ResumeStarted(2.1), P0) == (booting, ())
    with pytest.raises(InvalidTransition):
        apply(idle(), ev.ResumeStarted(2.0), P0)


def test_late_boot_after_resume_timeout_returns_as_return_to_service_allows() -> None:
    """Issue 14: the node we asked to boot is not "unexpectedly rebooted" when it is late; it
    comes back as ReturnToService allows instead of staying `down~`."""
    failed = run(sample("POWERING_UP"), ev.ResumeTimeout(3.0))
    assert names.compact(failed) == "down~"
    for policy in (P1, P2):
        late = run(failed, ev.Registered(9.0, rebooted=True), policy=policy)
        assert late.base is Base.IDLE and late.reason is None, policy
        assert names.compact(late) == "idle"
    kept = run(failed, ev.Registered(9.0, rebooted=True), policy=P0)
    assert kept.base is Base.DOWN and names.compact(kept) == "down"  # powered, admin decides
    assert reason_of(kept) == (CTL, "ResumeTimeout reached")


def test_registration_without_reboot_ends_powering_up() -> None:
    """Slurm 22.05 keeps `#` until slurmd registers with -b; here any valid registration ends
    the power-up, rebooted or not."""
    booting = run(sample("POWERED_DOWN"), ev.ResumeStarted(2.0))
    for policy in (P0, P1, P2):
        up = run(booting, ev.Registered(3.0, rebooted=False), policy=policy)
        assert names.compact(up) == "idle" and not up.flags & {Flag.POWERING_UP, Flag.NO_RESPOND}


# --- shutdown and config ---------------------------------------------------------------------


def test_shutdown_notice_downs_node_and_requeues() -> None:
    busy = run(idle(), ev.AllocationChanged(1.0, 2))
    new, effects = apply(busy, ev.ShutdownNotice(2.0), P0)
    assert names.compact(new) == "down*" and reason_of(new) == (CTL, "rnoded shut down")
    assert fx.KillJobs(True) in effects and fx.Membership("down") in effects
    assert run(new, ev.Registered(3.0), policy=P1).base is Base.MIXED
    assert run(new, ev.Registered(3.0), policy=P0).base is Base.DOWN


def test_shutdown_notice_on_booting_invalid_and_off_nodes() -> None:
    assert run(sample("POWERING_UP"), ev.ShutdownNotice(2.0)).base is Base.DOWN
    inval = run(sample("INVALID_REG"), ev.ShutdownNotice(2.0))
    assert Flag.INVALID_REG in inval.flags and Flag.NO_RESPOND in inval.flags
    assert run(inval, ev.Registered(3.0)) == idle()
    for cls in ("POWERED_DOWN", "POWERING_DOWN", "FUTURE"):
        s = sample(cls)
        assert apply(s, ev.ShutdownNotice(2.0), P0) == (s, ())


def test_config_reload_cpus_future_and_cloud() -> None:
    busy = run(idle(cpus=8), ev.AllocationChanged(1.0, 4))
    assert run(busy, ev.ConfigReload(2.0, 4, "UNKNOWN")).base is Base.ALLOCATED
    assert run(idle(), ev.ConfigReload(2.0, 8, "FUTURE")).base is Base.FUTURE
    with pytest.raises(InvalidTransition, match="4 CPUs allocated"):
        apply(busy, ev.ConfigReload(2.0, 8, "FUTURE"), P0)
    back = run(sample("FUTURE"), ev.ConfigReload(2.0, 16, "CLOUD"))
    assert names.compact(back) == "idle~" and back.cpus_total == 16
    assert Flag.CLOUD in run(idle(), ev.ConfigReload(2.0, 8, "CLOUD")).flags
    s = idle()
    assert apply(s, ev.ConfigReload(2.0, 8, "DRAIN"), P0) == (s, ())
    with pytest.raises(InvalidTransition):
        apply(s, ev.ConfigReload(2.0, 8, "BOGUS"), P0)


def test_reason_alone_is_a_row_kept_only_where_a_reason_is() -> None:
    """Reason= without State= goes through the table: it replaces a drained node's reason and
    is refused on an IDLE node, which the table keeps without one."""
    idle = initial_state("n1", 4, "UNKNOWN", None, now=1.0)
    idle, _ = apply(idle, ev.Registered(2.0))
    drained, _ = apply(idle, admin("DRAIN", "fan"))
    new, effects = apply(drained, ev.ReasonUpdate(3.0, "fan replaced, burn-in", "bob"))
    assert new.reason.text == "fan replaced, burn-in" and new.reason.user == "bob"
    assert fx.ReasonRecorded(new.reason) in effects
    with pytest.raises(InvalidTransition, match="keeps no reason"):
        apply(idle, ev.ReasonUpdate(3.0, "just a note", "bob"))
