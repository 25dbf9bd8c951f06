"""Sample states (one per table class) and sample events (one per event kind) for the tests."""

from __future__ import annotations

from ranch.statemachine import events as ev
from ranch.statemachine.model import Base, NodeState, Reason, ReasonSource, initial_state
from ranch.statemachine.policy import Policy
from ranch.statemachine.table import apply

P0 = Policy(return_to_service=0)
P1 = Policy(return_to_service=1)
P2 = Policy(return_to_service=2)
MISMATCH = "Low RealMemory (reported:512 < 100% of configured:1024)"


def run(state: NodeState, *events: ev.Event, policy: Policy = P0) -> NodeState:
    for e in events:
        state = apply(state, e, policy)[0]
    return state


def idle(name: str = "n1", cpus: int = 8) -> NodeState:
    return run(initial_state(name, cpus), ev.Registered(1.0))


def down_not_responding(name: str = "n1") -> NodeState:
    return run(idle(name), ev.HeartbeatMissed(2.0), ev.ResponseTimeout(3.0))


def sample(cls: str, name: str = "n1") -> NodeState:
    if cls == "UP":
        return idle(name)
    if cls == "UNKNOWN":
        return initial_state(name, 8)
    if cls == "DOWN":
        return down_not_responding(name)
    if cls == "INVALID_REG":
        return run(initial_state(name, 8), ev.Registered(1.0, valid=False, problem=MISMATCH))
    if cls == "POWERED_DOWN":
        return initial_state(name, 8, "CLOUD")
    if cls == "POWERING_UP":
        return run(initial_state(name, 8, "CLOUD"), ev.ResumeStarted(1.0))
    if cls == "POWERING_DOWN":
        return run(idle(name), ev.SuspendStarted(2.0))
    if cls == "FUTURE":
        return initial_state(name, 8, "FUTURE")
    if cls == "PENDING":
        return run(initial_state(name, 8), ev.AwaitApproval(0.5), ev.Registered(1.0))
    if cls == "REJECTED":
        return run(sample("PENDING", name), ev.Reject(2.0, "unknown machine", "alice"))
    if cls == "REBOOTING":
        return run(idle(name), ev.RebootRequest(2.0, user="alice"), ev.RebootIssued(3.0))
    raise AssertionError(cls)


def sample_event(kind: str, now: float = 10.0) -> ev.Event:
    if kind.startswith("State="):
        return ev.AdminUpdate(now, kind[6:], reason="maint", user="alice")
    if kind.startswith("health "):
        return ev.HealthResult(now, kind[7:], "HC: disk full")
    return {
        "register": ev.Registered(now),
        "register invalid": ev.Registered(now, valid=False, problem=MISMATCH),
        "heartbeat": ev.HeartbeatReceived(now),
        "heartbeat missed": ev.HeartbeatMissed(now),
        "response timeout": ev.ResponseTimeout(now),
        "allocation": ev.AllocationChanged(now, 0),
        "suspend started": ev.SuspendStarted(now),
        "suspend timeout": ev.SuspendTimeout(now),
        "resume started": ev.ResumeStarted(now),
        "resume timeout": ev.ResumeTimeout(now),
        "shutdown notice": ev.ShutdownNotice(now),
        "config reload": ev.ConfigReload(now, 8, "UNKNOWN"),
        "await approval": ev.AwaitApproval(now),
        "approve": ev.Approve(now, "alice"),
        "reject": ev.Reject(now, "not ours", "alice"),
        "delete": ev.Delete(now, "alice"),
        "completing": ev.Completing(now, True),
        "guard hold": ev.GuardHold(now),
        "drain paused": ev.DrainPaused(now, "drain", "HC: disk full"),
        "guard release": ev.GuardRelease(now, "alice"),
        "reason": ev.ReasonUpdate(now, "new fan", "alice"),
        "reboot": ev.RebootRequest(now, asap=True, next_state="RESUME", user="alice"),
        "reboot issued": ev.RebootIssued(now),
        "reboot timeout": ev.RebootTimeout(now),
        "reservation": ev.ReservationChanged(now, maint=True, name="maint1"),
        "boot check": ev.BootCheck(now, "drain", "HC: gpu gone", count=1),
    }[kind]


def admin(request: str, reason: str | None = "maint", user: str = "alice") -> ev.AdminUpdate:
    return ev.AdminUpdate(10.0, request, reason=reason, user=user)


def reason_of(state: NodeState) -> tuple[ReasonSource, str] | None:
    r: Reason | None = state.reason
    return None if r is None else (r.source, r.text)


__all__ = ["Base"]
