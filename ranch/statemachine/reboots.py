"""The node table's reboot handlers: `rcontrol reboot`, its issue, the node's return (issue 33)."""

from __future__ import annotations

from ranch.statemachine import effects as fx
from ranch.statemachine import events as ev
from ranch.statemachine.model import (
    REBOOT_PLAN,
    Base,
    Flag,
    NodeState,
    Reason,
    ReasonSource,
    derive_base,
)
from ranch.statemachine.policy import Policy

Effects = tuple[fx.Effect, ...]

# Slurm's words (slurmctld: proc_req.c, controller.c, node_mgr.c)
REBOOT_ASAP = "Reboot ASAP"
REQUESTED = "reboot requested"
ISSUED = "reboot issued"
COMPLETE = "reboot complete"
TIMED_OUT = "reboot timed out"
IN_PROGRESS = "a reboot is already in progress -- unable to cancel"
WAIT_CHECK = "new boot, waiting for its health check"  # Ranch's: the gate of issue 33

_REQ, _ISS = Flag.REBOOT_REQUESTED, Flag.REBOOT_ISSUED
_REBOOT_ALL = REBOOT_PLAN | {_REQ, _ISS}
_D, _NR = Flag.DRAIN, Flag.NO_RESPOND


def _node(s: NodeState, base: Base, flags: frozenset[Flag], reason: Reason | None) -> NodeState:
    return NodeState(s.name, base, flags, reason, s.cpus_total, s.cpus_alloc)


def reboot_reason(r: Reason | None, text: str, now: float) -> Reason:
    """Slurm's set_node_reboot_reason: appended with " : " unless already there; the
    controller's from now on."""
    if r is not None and text not in r.text:
        text = f"{r.text} : {text}"
    return Reason(ReasonSource.CONTROLLER, text, now, None)


def request(s: NodeState, e: ev.RebootRequest, p: Policy) -> tuple[NodeState, Effects]:
    """`@`; ASAP adds a drain of its own (and nextstate RESUME unless given) so that no new
    job lands. A node already rebooting or powering down is skipped, as Slurm does."""
    if not s.flags.isdisjoint({_REQ, _ISS, Flag.POWER_DOWN}):
        return s, ()
    flags = s.flags | {_REQ}
    reason = s.reason
    user = e.user or None
    if e.reason and e.reason.strip():
        reason = Reason(ReasonSource.ADMIN, e.reason.strip(), e.now, user)
    nxt = e.next_state
    if e.asap:
        nxt = nxt or "RESUME"
        if _D not in flags:
            flags |= {_D, Flag.REBOOT_DRAIN}
        if reason is None:
            reason = Reason(ReasonSource.ADMIN, REBOOT_ASAP, e.now, user)
    if reason is None:
        reason = Reason(ReasonSource.ADMIN, REQUESTED, e.now, user)
    if nxt == "RESUME":
        flags |= {Flag.NEXT_RESUME}
    elif nxt == "DOWN":
        flags |= {Flag.NEXT_DOWN}
    return _node(s, s.base, flags, reason), ()


def due(s: NodeState) -> bool:
    """May the requested reboot be issued now? Idle (nothing completing, answering, not
    booting) or DOWN, as slurmctld's _queue_reboot_msg."""
    f = s.flags
    if _REQ not in f or _ISS in f or Flag.COMPLETING in f:
        return False
    if s.base is Base.DOWN:
        return True
    return (s.base is Base.IDLE and not s.cpus_alloc and _NR not in f
            and Flag.POWERING_UP not in f)


def issue(s: NodeState, e: ev.RebootIssued, p: Policy) -> tuple[NodeState, Effects]:
    """RebootProgram goes to the node: DOWN + `^`, " : reboot issued"; ResumeTimeout runs."""
    if not due(s):
        return s, ()
    flags = (s.flags - {_REQ}) | {_ISS}
    new = _node(s, Base.DOWN, flags, reboot_reason(s.reason, ISSUED, e.now))
    return new, (fx.RunRebootProgram(), fx.ScheduleTimeout("reboot"))


def cancel(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """State=CANCEL_REBOOT: the pending reboot goes, and the drain ASAP set with it."""
    from ranch.statemachine.table import keep_reason_for, refuse

    if _ISS in s.flags:
        raise refuse(s, e, IN_PROGRESS, hint="")
    if _REQ not in s.flags:
        raise refuse(s, e, "it has no pending reboot", hint="")
    flags = s.flags - _REBOOT_ALL
    reason = s.reason
    if Flag.REBOOT_DRAIN in s.flags:
        flags -= {_D}
        reason = None
    return _node(s, s.base, flags, keep_reason_for(s.base, flags, reason)), ()


def returned(s: NodeState, e: ev.Registered, p: Policy) -> tuple[NodeState, Effects]:
    """The node registers with a boot time newer than before: the reboot Ranch asked for is
    done. nextstate decides (RESUME or ASAP: the drain goes; DOWN: "reboot complete"); with no
    nextstate the node is back as it was, a drain kept. A registration from the old boot
    (rnoded restarted, RebootProgram not yet through) changes nothing."""
    from ranch.statemachine.table import keep_reason_for

    if not e.rebooted:
        return s, ()
    total = s.cpus_total if e.cpus_total is None else e.cpus_total
    flags = s.flags - _REBOOT_ALL - {_NR, Flag.POWERING_UP, Flag.POWERED_DOWN,
                                     Flag.INVALID_REG}
    if not s.flags.isdisjoint({Flag.NEXT_RESUME, Flag.NEXT_DOWN}):
        flags -= {_D}
    if Flag.NEXT_DOWN in s.flags:
        return NodeState(s.name, Base.DOWN, flags, reboot_reason(s.reason, COMPLETE, e.now),
                         total, s.cpus_alloc), ()
    base = derive_base(s.cpus_alloc, total)
    new = NodeState(s.name, base, flags, keep_reason_for(base, flags, s.reason), total,
                    s.cpus_alloc)
    return (hold_for_check(new, e.now) if p.health_gate else new), ()


def hold_for_check(s: NodeState, now: float) -> NodeState:
    """A node on a new boot is held out (drained, unless it was already) until the health
    check on that boot passed: BOOT_CHECK, reason "new boot, waiting for its health check"."""
    flags = s.flags | {Flag.BOOT_CHECK}
    reason = s.reason
    if _D not in flags and Flag.FAIL not in flags:
        flags |= {_D, Flag.REBOOT_DRAIN}
        reason = Reason(ReasonSource.CONTROLLER, WAIT_CHECK, now, None)
    return _node(s, s.base, flags, reason)


def boot_check(s: NodeState, e: ev.BootCheck, p: Policy) -> tuple[NodeState, Effects]:
    """The check's verdict on the new boot. Passed: the hold goes and the node is in service
    (unless an admin's drain stays). Failed: drained with the check's words and the count of
    boots in a row that ended unhealthy; at RebootUnhealthyMax of them FAIL, for a human."""
    if Flag.BOOT_CHECK not in s.flags:
        return s, ()
    flags = s.flags - {Flag.BOOT_CHECK}
    held = Flag.REBOOT_DRAIN in s.flags
    if e.verdict == "ok":
        from ranch.statemachine.table import keep_reason_for

        if not held:
            return _node(s, s.base, flags, s.reason), ()
        flags -= {_D, Flag.REBOOT_DRAIN}
        return _node(s, s.base, flags, keep_reason_for(s.base, flags, None)), ()
    if not held:  # drained by an admin meanwhile: the admin's reason stays
        return _node(s, s.base, flags, s.reason), ()
    flags -= {Flag.REBOOT_DRAIN}
    words = e.message.strip() or f"health check: {e.verdict}"
    top = p.unhealthy_max
    if top and e.count >= top:
        flags = (flags - {_D}) | {Flag.FAIL}
        text = f"{words} (unhealthy after {e.count} reboots in a row)"
        return _node(s, s.base, flags, Reason(ReasonSource.ADMIN, text, e.now, None)), ()
    text = f"{words} (unhealthy after reboot {e.count}" + (f" of {top})" if top else ")")
    return _node(s, s.base, flags, Reason(ReasonSource.HEALTH_CHECK, text, e.now, None)), ()


def returned_invalid(s: NodeState, e: ev.Registered, p: Policy) -> tuple[NodeState, Effects]:
    """Back from the reboot with less hardware than configured: INVALID_REG, as any node."""
    from ranch.statemachine.table import register_invalid

    cleared = _node(s, s.base, s.flags - _REBOOT_ALL, s.reason)
    return register_invalid(cleared, e, p)


def timed_out(s: NodeState, e: ev.RebootTimeout, p: Policy) -> tuple[NodeState, Effects]:
    """Not back within ResumeTimeout: DOWN, " : reboot timed out" (slurmctld's
    check_reboot_nodes); the drain and the plan go with the reboot."""
    flags = s.flags - _REBOOT_ALL - {_D, Flag.POWERING_UP}
    return _node(s, Base.DOWN, flags, reboot_reason(s.reason, TIMED_OUT, e.now)), ()


def clear(s: NodeState) -> NodeState:
    """The reboot and its plan dropped (State=DOWN, State=RESUME end a reboot, as in Slurm)."""
    if s.flags.isdisjoint(_REBOOT_ALL):
        return s
    flags = s.flags - _REBOOT_ALL
    if Flag.REBOOT_DRAIN in s.flags:
        flags -= {_D}
    return _node(s, s.base, flags, s.reason)
