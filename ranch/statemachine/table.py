"""THE transition table: every change of a node's state, in one place an admin can audit.

Read TABLE (bottom of this file) first: each row says which event, in which state classes, runs
which named handler, and which classes it may lead to. Anything not in TABLE is refused with
InvalidTransition. The handlers above it hold the guards and the Slurm rules (reference §2, §4-§6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ranch.statemachine import effects as fx
from ranch.statemachine import events as ev
from ranch.statemachine import reboots
from ranch.statemachine.errors import InvalidTransition
from ranch.statemachine.model import (
    CONFIG_STATES,
    UP_BASES,
    Base,
    Flag,
    NodeState,
    Reason,
    ReasonSource,
    derive_base,
    initial_state,
)
from ranch.statemachine.names import complete, describe
from ranch.statemachine.policy import DEFAULT_POLICY, Policy
from ranch.statemachine.predicates import takes_new_work, takes_work_after_boot

Effects = tuple[fx.Effect, ...]
# A handler takes the one event class its row names (the row's `event`; a test holds each
# handler's annotation to it), so the table's type takes Any there: Callable's parameters are
# contravariant, and a handler of Registered is no handler of every Event.
Handler = Callable[[NodeState, Any, Policy], tuple[NodeState, Effects]]

# --- state classes: the table's rows are keyed by these, not by every flag combination -------
# Checked in this order; the first that fits is the node's class.
FUTURE = "FUTURE"  # base FUTURE: configured, not in the cluster yet
POWERING_DOWN = "POWERING_DOWN"  # SuspendProgram running (`%`)
POWERING_UP = "POWERING_UP"  # ResumeProgram running, waiting for registration (`#`)
POWERED_DOWN = "POWERED_DOWN"  # off (`~`), base IDLE or DOWN
INVALID = "INVALID_REG"  # registered with less hardware than configured
DOWN = "DOWN"  # base DOWN
UNKNOWN = "UNKNOWN"  # base UNKNOWN: never registered
UP = "UP"  # base IDLE / MIXED / ALLOCATED (maybe DRAIN, FAIL, NO_RESPOND, `!`)
REJECTED = "REJECTED"  # refused by an admin: every registration is turned away (issue 13)
PENDING = "PENDING"  # NodeApproval=manual: heartbeats taken, no work until approved
REBOOTING = "REBOOTING"  # REBOOT_ISSUED (`^`, base DOWN): waiting for the new boot (issue 33)
CLASSES = (UP, UNKNOWN, DOWN, INVALID, POWERED_DOWN, POWERING_UP, POWERING_DOWN, FUTURE,
           PENDING, REJECTED, REBOOTING)
SAME = "SAME"  # in a row's targets: the node stays in the class it was in

_D, _F, _NR = Flag.DRAIN, Flag.FAIL, Flag.NO_RESPOND
_PU, _PD, _PWD = Flag.POWERING_UP, Flag.POWERING_DOWN, Flag.POWERED_DOWN
_POWER_ANY = frozenset({_PU, _PD, _PWD})
_OUT_OF_SERVICE = frozenset({_D, _F})
_CONTROLLER = ReasonSource.CONTROLLER
_ADMISSION = frozenset({Flag.PENDING, Flag.REJECTED})
_KEEPS_REASON = _OUT_OF_SERVICE | {Flag.REBOOT_REQUESTED, Flag.REBOOT_ISSUED}

NOT_RESPONDING = "Not responding"
SHUT_DOWN = "rnoded shut down"
RESUME_TIMEOUT = "ResumeTimeout reached"
REBOOTED = "Node unexpectedly rebooted"
# The guards (issue 18): a hold instead of DOWN, and a health drain that was not applied.
HELD = "Not responding, held by DownGuard"
PAUSED = "[drain paused by DrainGuard]"
_AUTO_TEXTS = (NOT_RESPONDING, SHUT_DOWN, RESUME_TIMEOUT, REBOOTED, HELD)
NO_REASON = "You must specify a reason when DOWNING or DRAINING a node. Request denied"


def classify(s: NodeState) -> str:
    flags = s.flags
    if flags and not flags.isdisjoint(_ADMISSION):
        return REJECTED if Flag.REJECTED in flags else PENDING
    if s.base is Base.FUTURE:
        return FUTURE
    if flags:
        if Flag.REBOOT_ISSUED in flags:
            return REBOOTING
        if _PD in flags:
            return POWERING_DOWN
        if _PU in flags:
            return POWERING_UP
        if _PWD in flags:
            return POWERED_DOWN
        if Flag.INVALID_REG in flags:
            return INVALID
    if s.base is Base.DOWN:
        return DOWN
    if s.base is Base.UNKNOWN:
        return UNKNOWN
    return UP


# --- small helpers ---------------------------------------------------------------------------

_VERBS = {
    "reason": "set the reason of",
    "register": "accept a registration from",
    "register invalid": "accept a registration from",
    "heartbeat": "accept a heartbeat from",
    "allocation": "change the CPU allocation of",
    "suspend started": "start suspending",
    "resume started": "start resuming",
    "approve": "approve",
    "reject": "reject",
    "delete": "delete",
    "guard hold": "hold",
    "drain paused": "record a paused drain on",
    "reboot": "reboot",
    "State=CANCEL_REBOOT": "cancel the reboot of",
}

_HINTS = {
    FUTURE: "activate it first (State=RESUME) or change its State= in the config",
    POWERING_DOWN: "wait for SuspendTimeout (State=RESUME ends the wait)",
    POWERING_UP: "wait for it to register or for ResumeTimeout",
    POWERED_DOWN: "power it up first (State=POWER_UP)",
    INVALID: "restart rnoded with matching hardware",
    DOWN: "bring it back first (State=RESUME)",
    UNKNOWN: "wait for rnoded on it to register",
    UP: "",
    PENDING: "approve it first (rcontrol approve NodeName=...)",
    REJECTED: "an admin may let it in again with `rcontrol approve`",
    REBOOTING: "wait for it to come back from its reboot (or for ResumeTimeout)",
}


def refuse(s: NodeState, e: ev.Event, why: str = "", hint: str | None = None) -> InvalidTransition:
    """An admin-worded refusal: "cannot UNDRAIN node gpu03: it is INVALID_REG (...); hint"."""
    kind = e.kind
    verb = kind[6:] if kind.startswith("State=") else _VERBS.get(kind, f"apply '{kind}' to")
    cls = classify(s)
    msg = f"cannot {verb} node {s.name}: {why or 'it is ' + describe(s)}"
    hint = _HINTS[cls] if hint is None else hint
    if hint:
        msg += f"; {hint}"
    return InvalidTransition(msg, node=s.name, state=complete(s), event=kind)


_KEEP: object = object()


def _evolve(
    s: NodeState,
    *,
    base: Base | None = None,
    flags: frozenset[Flag] | None = None,
    reason: Reason | object | None = _KEEP,
    cpus_total: int | None = None,
) -> NodeState:
    """attrs.evolve, minus its introspection (this is on every state change)."""
    return NodeState(
        s.name,
        s.base if base is None else base,
        s.flags if flags is None else flags,
        s.reason if reason is _KEEP else reason,  # type: ignore[arg-type]
        s.cpus_total if cpus_total is None else cpus_total,
        s.cpus_alloc,
    )


def _auto_reason(reason: Reason | None, text: str, now: float) -> Reason:
    """A controller reason fills an empty or controller-set reason; next to an admin's, health
    or config reason it is appended with " : " and the original source is kept."""
    if reason is None or reason.source is _CONTROLLER:
        return Reason(_CONTROLLER, text, now, None)
    if reason.text == text or reason.text.endswith(" : " + text):
        return reason
    return attrs.evolve(reason, text=f"{reason.text} : {text}")


def _strip_auto(reason: Reason) -> Reason:
    """Drop the " : Not responding"-style tails a node's return makes stale."""
    text = reason.text
    changed = True
    while changed:
        changed = False
        for auto in _AUTO_TEXTS:
            if text.endswith(" : " + auto):
                text, changed = text[: -len(auto) - 3], True
    return reason if text == reason.text else attrs.evolve(reason, text=text)


def _kill(s: NodeState) -> Effects:
    return (fx.KillJobs(requeue=True),) if s.cpus_alloc > 0 else ()


def _require_reason(s: NodeState, e: ev.AdminUpdate) -> Reason:
    if not (e.reason and e.reason.strip()):
        raise refuse(s, e, f"it is {complete(s)}: {NO_REASON}", hint="")
    return Reason(ReasonSource.ADMIN, e.reason.strip(), e.now, e.user or None)


def _up_base(s: NodeState, cpus_total: int | None = None) -> Base:
    return derive_base(s.cpus_alloc, s.cpus_total if cpus_total is None else cpus_total)


def returns_to_service(s: NodeState, p: Policy, rebooted: bool = False) -> bool:
    """ReturnToService: may a DOWN node come back on a valid registration?"""
    if p.return_to_service == 2:
        return True
    r = s.reason
    if p.return_to_service == 1 and r is not None and r.source is _CONTROLLER:
        # 1: only a node that was DOWN for not responding (and did not reboot meanwhile);
        # Ranch adds its own "rnoded shut down", which the node announced itself.
        # A node whose resume timed out and that boots late is the node we asked for (its
        # reboot is expected), not a failure: Slurm leaves it `down~` until an admin acts.
        return (r.text == NOT_RESPONDING and not rebooted) or r.text in (SHUT_DOWN,
                                                                          RESUME_TIMEOUT)
    return False


def _keep_reason_for(base: Base, flags: frozenset[Flag], reason: Reason | None) -> Reason | None:
    """A reason stays only while DRAIN, FAIL, DOWN or a pending reboot needs it, or while a
    guard holds the node (its hold or paused drain must stay visible in rinfo -R)."""
    if base is Base.DOWN or not flags.isdisjoint(_KEEPS_REASON):
        return reason
    if reason is not None and reason.text.endswith((HELD, PAUSED)):
        return reason
    return None


# --- handlers --------------------------------------------------------------------------------


def ignore(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """Expected and harmless here (e.g. a stale timer): nothing changes."""
    return s, ()


def register_valid(s: NodeState, e: ev.Registered, p: Policy) -> tuple[NodeState, Effects]:
    """Valid registration: clears NO_RESPOND, power flags and INVALID_REG (with the drain the
    controller set for the mismatch); DOWN follows ReturnToService; DRAIN/FAIL stay."""
    total = s.cpus_total if e.cpus_total is None else e.cpus_total
    flags = s.flags - {_NR, _PU, _PWD, Flag.INVALID_REG}
    reason = s.reason
    judged = s  # what ReturnToService looks at
    if Flag.INVALID_REG in s.flags and reason is not None and reason.source is _CONTROLLER:
        # the mismatch drain was ours; it replaced only a controller reason, so a DOWN under
        # it was automatic and is judged as "Not responding"
        flags -= {_D}
        reason = None
        judged = _evolve(s, reason=Reason(_CONTROLLER, NOT_RESPONDING, e.now, None))
    expected_boot = _PU in s.flags or s.base is Base.UNKNOWN or _late_resume(s)
    effects: Effects = ()
    if s.base is Base.DOWN:
        if returns_to_service(judged, p, e.rebooted):
            base = derive_base(s.cpus_alloc, total)
            reason = _keep_reason_for(base, flags, reason and _strip_auto(reason))
        else:
            base = Base.DOWN
            reason = reason or s.reason
            if (e.rebooted and not expected_boot and reason is not None
                    and reason.source is _CONTROLLER):
                reason = _auto_reason(reason, REBOOTED, e.now)
    elif (
        e.rebooted
        and not expected_boot
        and s.base in UP_BASES
        and _D not in flags
        and p.return_to_service != 2
    ):
        base = Base.DOWN
        reason = _auto_reason(reason, REBOOTED, e.now)
        effects = _kill(s)
    else:
        base = derive_base(s.cpus_alloc, total)
        reason = _keep_reason_for(base, flags, _unhold(reason))
    new = NodeState(s.name, base, flags, reason, total, s.cpus_alloc)
    if p.health_gate and _PU in s.flags and base in UP_BASES:
        new = reboots.hold_for_check(new, e.now)  # a power-save resume: the same gate
    return new, effects


def _late_resume(s: NodeState) -> bool:
    """`down~` after ResumeTimeout: the boot we asked for may still arrive."""
    r = s.reason
    return (_PWD in s.flags and s.base is Base.DOWN and r is not None
            and r.source is _CONTROLLER and r.text == RESUME_TIMEOUT)


def register_invalid(s: NodeState, e: ev.Registered, p: Policy) -> tuple[NodeState, Effects]:
    """Registration below the config: INVALID_REG + DRAIN, reason = the mismatch."""
    total = s.cpus_total if e.cpus_total is None else e.cpus_total
    flags = (s.flags - {_NR, _PU, _PWD}) | {Flag.INVALID_REG, _D}
    base = s.base if s.base is Base.DOWN else derive_base(s.cpus_alloc, total)
    reason = _auto_reason(s.reason, e.problem or "invalid registration", e.now)
    return NodeState(s.name, base, flags, reason, total, s.cpus_alloc), ()


def heartbeat_up(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """The hot path: a heartbeat from a node in service changes nothing unless it was `*`."""
    if _NR not in s.flags:
        return s, ()
    return _evolve(s, flags=s.flags - {_NR}, reason=_unhold(s.reason)), ()


def _unhold(reason: Reason | None) -> Reason | None:
    """A node heard again drops the DownGuard's hold from its reason."""
    if reason is None or not reason.text.endswith(HELD):
        return reason
    if reason.source is _CONTROLLER and reason.text == HELD:
        return None
    return _strip_auto(reason)


def heartbeat_ask_registration(
    s: NodeState, e: ev.Event, p: Policy
) -> tuple[NodeState, Effects]:
    """A node we do not count as up is talking: its registration decides what it is."""
    return _evolve(s, flags=s.flags - {_NR}) if _NR in s.flags else s, (fx.RequestRegistration(),)


def heartbeat_down(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """A DOWN node answers: clear `*`; ask it to register when ReturnToService lets it back."""
    new = _evolve(s, flags=s.flags - {_NR}) if _NR in s.flags else s
    return new, ((fx.RequestRegistration(),) if returns_to_service(s, p) else ())


def mark_not_responding(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """Missed heartbeat: `*`, out of the schedulable set; running jobs keep running."""
    if _NR in s.flags:
        return s, ()
    return _evolve(s, flags=s.flags | {_NR}), ()


def node_down_not_responding(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """SlurmdTimeout: base DOWN (flags kept), reason "Not responding", requeue its jobs."""
    reason = _auto_reason(_unhold(s.reason), NOT_RESPONDING, e.now)
    return _evolve(s, base=Base.DOWN, flags=s.flags | {_NR}, reason=reason), _kill(s)


def hold_not_responding(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """SlurmdTimeout under a tripped DownGuard: `*` and the hold as reason, but not DOWN and no
    requeue (too many nodes went silent at once for the silence to be theirs)."""
    reason = _auto_reason(s.reason, HELD, e.now)
    return _evolve(s, flags=s.flags | {_NR}, reason=reason), ()


def node_shut_down(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """rnoded announced its node leaves (SIGUSR1): DOWN now, reason "rnoded shut down", requeue its
    jobs. A daemon only stopping (SIGTERM) announces nothing."""
    reason = _auto_reason(s.reason, SHUT_DOWN, e.now)
    return _evolve(s, base=Base.DOWN, flags=s.flags | {_NR}, reason=reason), _kill(s)


def _check_allocation(s: NodeState, e: ev.AllocationChanged) -> None:
    if not 0 <= e.cpus_alloc <= s.cpus_total:
        raise refuse(s, e, f"{e.cpus_alloc} CPUs is outside 0..{s.cpus_total}", hint="")


def allocate(s: NodeState, e: ev.AllocationChanged, p: Policy) -> tuple[NodeState, Effects]:
    """Base follows the allocation; more CPUs only on a schedulable node; the reason of a node
    without DRAIN/FAIL is cleared when work lands on it (Slurm clears it at job start)."""
    _check_allocation(s, e)
    if e.cpus_alloc == s.cpus_alloc:
        return s, ()
    if e.cpus_alloc > s.cpus_alloc and not takes_new_work(s) and _PU not in s.flags:
        raise refuse(s, e, f"it is {describe(s)} and takes no new work", hint="")
    if _PU in s.flags and e.cpus_alloc > s.cpus_alloc and not _may_take_boot_work(s):
        raise refuse(s, e, f"it is {describe(s)} and takes no new work", hint="")
    base = s.base if s.base is Base.DOWN else derive_base(e.cpus_alloc, s.cpus_total)
    reason = _keep_reason_for(base, s.flags, s.reason)
    return NodeState(s.name, base, s.flags, reason, s.cpus_total, e.cpus_alloc), ()


_may_take_boot_work = takes_work_after_boot  # statemachine/predicates.py


def allocate_powered_down(
    s: NodeState, e: ev.AllocationChanged, p: Policy
) -> tuple[NodeState, Effects]:
    """Work placed on an `idle~` node powers it up (reference §6, Resume)."""
    _check_allocation(s, e)
    if e.cpus_alloc <= s.cpus_alloc:
        return release_only(s, e, p)
    if not _may_take_boot_work(s):
        raise refuse(s, e, f"it is {describe(s)} and takes no new work", hint="")
    resumed, effects = start_resume(s, e, p)
    base = derive_base(e.cpus_alloc, s.cpus_total)
    return attrs.evolve(resumed, base=base, cpus_alloc=e.cpus_alloc), effects


def release_only(s: NodeState, e: ev.AllocationChanged, p: Policy) -> tuple[NodeState, Effects]:
    """Jobs may end (or be killed) here, but no new work starts; the base is left alone except
    that a node in service keeps IDLE/MIXED/ALLOCATED in step with its CPUs."""
    _check_allocation(s, e)
    if e.cpus_alloc == s.cpus_alloc:
        return s, ()
    if e.cpus_alloc > s.cpus_alloc:
        raise refuse(s, e, f"it is {describe(s)} and takes no new work")
    base = derive_base(e.cpus_alloc, s.cpus_total) if s.base in UP_BASES else s.base
    return NodeState(s.name, base, s.flags, s.reason, s.cpus_total, e.cpus_alloc), ()


# Admin updates (rcontrol update State=...; reference §2 and §6)


def admin_down(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    reason = _require_reason(s, e)
    return _evolve(s, base=Base.DOWN, reason=reason), _kill(s)


def admin_down_rebooting(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """DOWN ends a reboot in progress (Slurm clears it)."""
    _require_reason(s, e)
    return admin_down(reboots.clear(s), e, p)


def admin_resume_rebooting(
    s: NodeState, e: ev.AdminUpdate, p: Policy
) -> tuple[NodeState, Effects]:
    """RESUME ends a reboot, pending or in progress (Slurm clears REBOOT with DRAIN/FAIL)."""
    cleared = reboots.clear(s)
    if cleared is not s and cleared.base is not Base.DOWN and cleared.flags.isdisjoint(
            _OUT_OF_SERVICE):
        return _evolve(cleared, reason=_keep_reason_for(cleared.base, cleared.flags,
                                                        cleared.reason)), ()
    return admin_resume(cleared, e, p)


def admin_reason(s: NodeState, e: ev.ReasonUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """Reason= alone: replaces the reason of a node that keeps one (DOWN, drained, failed);
    any other node has no reason to hold, so the request is refused."""
    reason = Reason(ReasonSource.ADMIN, e.reason.strip(), e.now, e.user or None)
    if _keep_reason_for(s.base, s.flags, reason) is None:
        raise refuse(s, e, f"it is {complete(s)}, which keeps no reason",
                     hint="give State=DRAIN (or DOWN, FAIL) with the Reason=")
    return _evolve(s, reason=reason), ()


def admin_drain(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """DRAIN: running jobs finish; the admin's reason replaces any other (health's included)."""
    reason = _require_reason(s, e)
    return _evolve(s, flags=(s.flags - {Flag.POWER_DRAIN}) | {_D}, reason=reason), ()


def admin_fail(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """FAIL: its jobs are killed and requeued (issue 12; Slurm lets them run): `failg` while
    their processes are being killed, then `fail`. A health check's FAIL lets them run."""
    reason = _require_reason(s, e)
    kill: Effects = (fx.KillJobs(requeue=True, wait=True),) if s.cpus_alloc > 0 else ()
    return _evolve(s, flags=s.flags | {_F}, reason=reason), kill


def admin_noresp(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    return mark_not_responding(s, e, p)


def _refuse_invalid_reg(s: NodeState, e: ev.Event) -> None:
    if Flag.INVALID_REG in s.flags:
        raise refuse(s, e, hint=_HINTS[INVALID])


def admin_resume(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """RESUME: clear DRAIN/FAIL; DOWN/FUTURE -> IDLE + `*` until it registers; `%` -> `~`."""
    _refuse_invalid_reg(s, e)
    down = s.base in (Base.DOWN, Base.FUTURE)
    if not (down or _PD in s.flags or not s.flags.isdisjoint(_OUT_OF_SERVICE)):
        raise refuse(s, e, f"it is {describe(s)}: nothing to resume", hint="")
    flags = s.flags - {_D, _F, Flag.POWER_DRAIN}
    effects: Effects = ()
    if _PD in flags:
        flags = (flags - {_PD}) | {_PWD}
    base = s.base
    if down:
        base = derive_base(s.cpus_alloc, s.cpus_total)
        if flags.isdisjoint(_POWER_ANY):
            flags |= {_NR}
            effects = (fx.RequestRegistration(),)
    reason = _keep_reason_for(base, flags, s.reason)
    return NodeState(s.name, base, flags, reason, s.cpus_total, s.cpus_alloc), effects


def admin_undrain(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """UNDRAIN: clear DRAIN only; the base (DOWN included) stays."""
    _refuse_invalid_reg(s, e)
    if _D not in s.flags:
        raise refuse(s, e, f"it is {describe(s)}: not drained", hint="")
    flags = s.flags - {_D, Flag.POWER_DRAIN}
    return _evolve(s, flags=flags, reason=_keep_reason_for(s.base, flags, s.reason)), ()


def admin_idle(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """IDLE: only from base DOWN or IDLE; clears DOWN/DRAIN/FAIL; a DOWN node is `*` until it
    registers."""
    _refuse_invalid_reg(s, e)
    if s.base not in (Base.DOWN, Base.IDLE) or s.cpus_alloc:
        raise refuse(s, e, f"it is {describe(s)} with {s.cpus_alloc} CPUs allocated", hint="")
    flags = s.flags - {_D, _F, Flag.POWER_DRAIN}
    effects: Effects = ()
    if s.base is Base.DOWN and flags.isdisjoint(_POWER_ANY):
        flags |= {_NR}
        effects = (fx.RequestRegistration(),)
    return NodeState(s.name, Base.IDLE, flags, None, s.cpus_total, 0), effects


def admin_future(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """FUTURE: only from base DOWN or IDLE; jobs are killed, the node leaves the cluster view."""
    if s.base not in (Base.DOWN, Base.IDLE):
        raise refuse(s, e, f"it is {describe(s)}; drain it and let its jobs end first", hint="")
    return NodeState(s.name, Base.FUTURE, s.flags & {Flag.CLOUD}, None, s.cpus_total, 0), _kill(s)


def admin_power_down(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """POWER_DOWN: `!`, the power-save loop suspends the node once it is idle."""
    if Flag.POWER_DOWN in s.flags:
        return s, ()
    return _evolve(s, flags=s.flags | {Flag.POWER_DOWN}), ()


def admin_power_down_asap(
    s: NodeState, e: ev.AdminUpdate, p: Policy
) -> tuple[NodeState, Effects]:
    """POWER_DOWN_ASAP: drain (reason POWER_DOWN_ASAP unless given) + `!`; the drain ends with
    the suspend."""
    flags = s.flags | {Flag.POWER_DOWN}
    reason = s.reason
    if _D not in s.flags:
        flags |= {_D, Flag.POWER_DRAIN}
        text = (e.reason or "").strip() or "POWER_DOWN_ASAP"
        reason = Reason(ReasonSource.ADMIN, text, e.now, e.user or None)
    return _evolve(s, flags=flags, reason=reason), ()


def admin_power_down_force(
    s: NodeState, e: ev.AdminUpdate, p: Policy
) -> tuple[NodeState, Effects]:
    """POWER_DOWN_FORCE: requeue its jobs and start the suspend now."""
    new, effects = start_suspend(s, e, p, force=True)
    return new, _kill(s) + effects


def admin_power_up(s: NodeState, e: ev.AdminUpdate, p: Policy) -> tuple[NodeState, Effects]:
    """POWER_UP on a node that is on: cancels a pending `!`, else there is nothing to do."""
    if Flag.POWER_DOWN not in s.flags:
        raise refuse(s, e, f"it is {describe(s)}: already powered up", hint="")
    flags = s.flags - {Flag.POWER_DOWN, Flag.POWER_DRAIN}
    if Flag.POWER_DRAIN in s.flags:  # the POWER_DOWN_ASAP drain goes with it
        flags -= {_D}
    return _evolve(s, flags=flags, reason=_keep_reason_for(s.base, flags, s.reason)), ()


# Health-check results (reference §5; reasons are structured, not "HC:"-prefixed text)


def _health_flag(s: NodeState, e: ev.HealthResult, flag: Flag) -> tuple[NodeState, Effects]:
    text = e.message.strip() or f"health check: {e.verdict}"
    r = s.reason
    flags = s.flags | {flag}
    if r is not None and r.source is ReasonSource.HEALTH_CHECK:
        # The check owns the node: its latest verdict decides between DRAIN and FAIL, and a
        # repeat of the same verdict keeps the time the node was first taken out.
        flags = (s.flags - _OUT_OF_SERVICE) | {flag}
        reason = r if r.text == text else Reason(ReasonSource.HEALTH_CHECK, text, e.now, None)
    elif r is None or r.source is _CONTROLLER:
        reason = Reason(ReasonSource.HEALTH_CHECK, text, e.now, None)
    else:
        reason = r  # an admin's or config reason stays; only it can clear the node
    if flags == s.flags and reason == r:
        return s, ()
    return _evolve(s, flags=flags, reason=reason), ()


def health_drain(s: NodeState, e: ev.HealthResult, p: Policy) -> tuple[NodeState, Effects]:
    return _health_flag(s, e, _D)


def health_fail(s: NodeState, e: ev.HealthResult, p: Policy) -> tuple[NodeState, Effects]:
    """Unlike State=FAIL, running jobs go on: a flaky check must not kill work."""
    return _health_flag(s, e, _F)


def health_ok(s: NodeState, e: ev.HealthResult, p: Policy) -> tuple[NodeState, Effects]:
    """Clears DRAIN/FAIL only when the health check set them; never an admin's."""
    r = s.reason
    if r is None or r.source is not ReasonSource.HEALTH_CHECK:
        return s, ()
    flags = s.flags - _OUT_OF_SERVICE
    reason = None
    if s.base is Base.DOWN:  # DOWN keeps a reason: the controller's tail, if any
        tail = r.text.rsplit(" : ", 1)[-1] if " : " in r.text else NOT_RESPONDING
        reason = Reason(_CONTROLLER, tail, e.now, None)
    return _evolve(s, flags=flags, reason=reason), ()


def drain_paused(s: NodeState, e: ev.DrainPaused, p: Policy) -> tuple[NodeState, Effects]:
    """A drain the DrainGuard paused: the verdict shows as the reason ("... [drain paused by
    DrainGuard]"), no DRAIN or FAIL; an admin's or config reason is left alone."""
    r = s.reason
    if r is not None and r.source not in (_CONTROLLER, ReasonSource.HEALTH_CHECK):
        return s, ()
    if r is not None and r.source is ReasonSource.HEALTH_CHECK and not r.text.endswith(PAUSED):
        return s, ()  # the check already took the node out; its verdict stands
    text = f"{e.message.strip() or 'health check: ' + e.verdict} {PAUSED}"
    if r is not None and r.text == text:
        return s, ()
    return _evolve(s, reason=Reason(ReasonSource.HEALTH_CHECK, text, e.now, None)), ()


def release_guard(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """A guard reset: its hold and its paused-drain reason go (the node stays `*` until heard
    from; a paused check drains it at its next failing run)."""
    r = s.reason
    if r is None:
        return s, ()
    reason: Reason | None = _unhold(r)
    if reason is not None and reason.source is ReasonSource.HEALTH_CHECK \
            and reason.text.endswith(PAUSED):
        reason = None
    if reason is r:
        return s, ()
    if reason is None and s.base is Base.DOWN:
        reason = r  # DOWN keeps a reason
    return _evolve(s, reason=_keep_reason_for(s.base, s.flags, reason)), ()


# Power saving (reference §6)


def start_suspend(
    s: NodeState, e: ev.Event, p: Policy, force: bool = False
) -> tuple[NodeState, Effects]:
    """`%`: SuspendProgram runs; POWERED_DOWN after SuspendTimeout."""
    if not force:
        if s.base not in (Base.IDLE, Base.DOWN) or s.cpus_alloc or Flag.COMPLETING in s.flags:
            raise refuse(s, e, f"it is {describe(s)} with {s.cpus_alloc} CPUs allocated", hint="")
    flags = (s.flags - {Flag.POWER_DOWN, _PU, _NR}) | {_PD}
    new = _evolve(s, flags=flags)
    return new, (fx.RunSuspendProgram(), fx.ScheduleTimeout("suspend"))


def suspend_done(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """SuspendTimeout elapsed: `~`; a POWER_DOWN_ASAP drain ends here."""
    flags = (s.flags - {_PD, _NR}) | {_PWD}
    if Flag.POWER_DRAIN in flags:
        flags -= {_D, Flag.POWER_DRAIN}
    base = s.base if s.base is Base.DOWN else derive_base(s.cpus_alloc, s.cpus_total)
    reason = _keep_reason_for(base, flags, s.reason)
    return NodeState(s.name, base, flags, reason, s.cpus_total, s.cpus_alloc), ()


def start_resume(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """`#` + `*`: ResumeProgram runs; the node must register within ResumeTimeout."""
    flags = (s.flags - {_PWD, Flag.POWER_DOWN}) | {_PU, _NR}
    return _evolve(s, flags=flags), (fx.RunResumeProgram(), fx.ScheduleTimeout("resume"))


def resume_failed(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """ResumeTimeout elapsed: `down~`, "ResumeTimeout reached", requeue, ResumeFailProgram."""
    flags = (s.flags - {_PU}) | {_PWD, _NR}
    reason = _auto_reason(s.reason, RESUME_TIMEOUT, e.now)
    new = NodeState(s.name, Base.DOWN, flags, reason, s.cpus_total, s.cpus_alloc)
    return new, (fx.RunResumeFailProgram(), *_kill(s))


def shutdown_invalid(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """An INVALID_REG node stopping (to be fixed) stays INVALID_REG, just `*`."""
    return mark_not_responding(s, e, p)


def config_reload(s: NodeState, e: ev.ConfigReload, p: Policy) -> tuple[NodeState, Effects]:
    """Reconfigure: CPUs follow the config; State=FUTURE in or out of the config moves the node
    (a node with jobs refuses to become FUTURE); State=CLOUD sets/clears the CLOUD flag. Other
    config states (DOWN, DRAIN, ...) apply only at start, as in Slurm's reconfigure."""
    if e.cpus_total < 1:
        raise refuse(s, e, f"the config gives it {e.cpus_total} CPUs", hint="fix CPUs=")
    cs = e.config_state.upper()
    if cs not in CONFIG_STATES:
        raise refuse(s, e, f"the config gives it State={e.config_state!r}", hint="")
    if cs == "FUTURE":
        if s.base is Base.FUTURE:
            return (s if s.cpus_total == e.cpus_total else _evolve(s, cpus_total=e.cpus_total)), ()
        if s.cpus_alloc:
            raise refuse(s, e, f"it has {s.cpus_alloc} CPUs allocated",
                         hint="let its jobs end before making it FUTURE")
        return NodeState(s.name, Base.FUTURE, s.flags & {Flag.CLOUD}, None, e.cpus_total, 0), ()
    if s.base is Base.FUTURE:
        try:
            return initial_state(s.name, e.cpus_total, cs, None, e.now), ()
        except ValueError as exc:
            raise refuse(s, e, str(exc), hint="") from None
    flags = s.flags | {Flag.CLOUD} if cs == "CLOUD" else s.flags - {Flag.CLOUD}
    base = derive_base(s.cpus_alloc, e.cpus_total) if s.base in UP_BASES else s.base
    if flags == s.flags and base is s.base and e.cpus_total == s.cpus_total:
        return s, ()
    return NodeState(s.name, base, flags, s.reason, e.cpus_total, s.cpus_alloc), ()


# Membership (issue 13): admission under NodeApproval=manual, rejection and deletion


def await_approval(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """A node new to the cluster waits for `rcontrol approve` (PENDING, shown `pend`)."""
    return _evolve(s, flags=s.flags | {Flag.PENDING}), ()


def heartbeat_pending(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """A pending node's heartbeats are taken (its health is known); one that never registered
    is asked to."""
    new = _evolve(s, flags=s.flags - {_NR}) if _NR in s.flags else s
    return new, ((fx.RequestRegistration(),) if s.base is Base.UNKNOWN else ())


def approve_pending(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """Approved: PENDING goes; the node is whatever its registration made it."""
    return _evolve(s, flags=s.flags - {Flag.PENDING}), ()


def approve_rejected(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """A rejected node let in again: it starts afresh and must register."""
    return NodeState(s.name, Base.UNKNOWN, s.flags & {Flag.CLOUD}, None, s.cpus_total, 0), ()


def reject_node(s: NodeState, e: ev.Reject, p: Policy) -> tuple[NodeState, Effects]:
    """Rejected (DOWN+REJECTED, the admin's reason): its connection is closed and every later
    registration is refused until an admin approves it (or deletes a dynamic node)."""
    if not (e.reason and e.reason.strip()):
        raise refuse(s, e, "a reason is required to reject a node (Reason=...)", hint="")
    if s.cpus_alloc:
        raise refuse(s, e, f"it has {s.cpus_alloc} CPUs allocated", hint="")
    reason = Reason(ReasonSource.ADMIN, e.reason.strip(), e.now, e.user or None)
    flags = (s.flags & {Flag.CLOUD}) | {Flag.REJECTED}
    return NodeState(s.name, Base.DOWN, flags, reason, s.cpus_total, 0), (fx.Evict(),)


def reject_member(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    raise refuse(s, e, f"it is {describe(s)}, already a member",
                 hint="only a node waiting for approval can be rejected; drain it, or delete "
                      "a dynamic node")


def refuse_rejected(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """A rejected node's registration is refused, saying who rejected it and why."""
    r = s.reason
    why = "it was rejected by an admin"
    if r is not None:
        why = f"it was rejected by {r.user or 'an admin'}: {r.text}"
    raise refuse(s, e, why)


def delete_node(s: NodeState, e: ev.Event, p: Policy) -> tuple[NodeState, Effects]:
    """The record goes (the I/O shell drops it); refused while work runs on it."""
    if s.cpus_alloc:
        raise refuse(s, e, f"it has {s.cpus_alloc} CPUs allocated",
                     hint="let its jobs end (drain it) first")
    return s, (fx.Evict(),)
def set_completing(s: NodeState, e: ev.Completing, p: Policy) -> tuple[NodeState, Effects]:
    """COMPLETING follows the job runner: set while a job's processes are being killed."""
    has = Flag.COMPLETING in s.flags
    if has == e.active:
        return s, ()
    flags = s.flags | {Flag.COMPLETING} if e.active else s.flags - {Flag.COMPLETING}
    return _evolve(s, flags=flags), ()


def reservation(s: NodeState, e: ev.ReservationChanged, p: Policy) -> tuple[NodeState, Effects]:
    """RESERVED and MAINT follow the reservations whose window holds the node now; nothing
    else changes (the scheduler keeps jobs out of the windows)."""
    flags = s.flags - {Flag.RESERVED, Flag.MAINT}
    if e.reserved or e.maint:
        flags |= {Flag.RESERVED}
    if e.maint:
        flags |= {Flag.MAINT}
    return (s, ()) if flags == s.flags else (_evolve(s, flags=flags), ())


# --- THE TABLE -------------------------------------------------------------------------------

ON = (UP, UNKNOWN, DOWN, INVALID)  # powered on, not in a power transition
POWER = (POWERED_DOWN, POWERING_UP, POWERING_DOWN)


@attrs.frozen
class Row:
    event: str
    states: tuple[str, ...]
    handler: Handler
    to: tuple[str, ...] = (SAME,)  # classes the node may be in afterwards


# fmt: off
ROWS: tuple[Row, ...] = (
    # event              in state classes                    handler             -> may become
    Row("register",         (*ON, POWERED_DOWN, POWERING_UP),   register_valid,     (UP, DOWN)),
    Row("register",         (POWERING_DOWN,),                   ignore),
    Row("register invalid", (*ON, POWERED_DOWN, POWERING_UP),   register_invalid,   (INVALID,)),
    Row("register invalid", (POWERING_DOWN,),                   ignore),
    Row("heartbeat",        (UP,),                              heartbeat_up),
    Row("heartbeat",        (DOWN,),                            heartbeat_down),
    Row("heartbeat",        (UNKNOWN, POWERED_DOWN, POWERING_UP), heartbeat_ask_registration),
    Row("heartbeat",        (INVALID, POWERING_DOWN),           ignore),
    Row("heartbeat missed", ON,                                 mark_not_responding),
    Row("heartbeat missed", (*POWER, FUTURE),                   ignore),
    Row("response timeout", (UP,),                              node_down_not_responding, (DOWN,)),
    # Never registered: stays `unk*`, as in Slurm (ping_nodes downs only a node that answered
    # once, last_response != 0), so rinfo and /metrics call it UNKNOWN, not DOWN.
    Row("response timeout", (UNKNOWN, DOWN),                    mark_not_responding),
    Row("response timeout", (INVALID, *POWER, FUTURE),          ignore),
    Row("allocation",       (UP, POWERING_UP),                  allocate),
    Row("allocation",       (POWERED_DOWN,),                    allocate_powered_down,
                                                                (SAME, POWERING_UP)),
    Row("allocation",       (UNKNOWN, DOWN, INVALID, POWERING_DOWN, FUTURE), release_only),
    Row("State=DOWN",       (*ON, *POWER, FUTURE),              admin_down,         (SAME, DOWN)),
    Row("State=DRAIN",      (*ON, *POWER),                      admin_drain),
    Row("reason",           (*ON, *POWER, FUTURE, PENDING, REJECTED), admin_reason),
    Row("State=FAIL",       (*ON, *POWER),                      admin_fail),
    Row("State=NORESP",     (*ON, *POWER),                      admin_noresp),
    Row("State=RESUME",     (UP, UNKNOWN, DOWN, POWERED_DOWN, POWERING_UP, FUTURE),
                                                                admin_resume_rebooting, (SAME, UP)),
    Row("State=RESUME",     (POWERING_DOWN,),                   admin_resume,     (POWERED_DOWN,)),
    Row("State=UNDRAIN",    (UP, UNKNOWN, DOWN, *POWER),        admin_undrain),
    Row("State=IDLE",       (UP, DOWN, POWERED_DOWN),           admin_idle,         (SAME, UP)),
    Row("State=FUTURE",     (UP, DOWN, INVALID, POWERED_DOWN),  admin_future,       (FUTURE,)),
    Row("State=FUTURE",     (FUTURE,),                          ignore),
    Row("State=POWER_DOWN", (*ON, POWERING_UP),                 admin_power_down),
    Row("State=POWER_DOWN", (POWERED_DOWN, POWERING_DOWN),      ignore),
    Row("State=POWER_DOWN_ASAP",  (*ON, POWERING_UP),           admin_power_down_asap),
    Row("State=POWER_DOWN_ASAP",  (POWERED_DOWN, POWERING_DOWN), ignore),
    Row("State=POWER_DOWN_FORCE", (*ON, POWERING_UP),           admin_power_down_force,
                                                                (POWERING_DOWN,)),
    Row("State=POWER_DOWN_FORCE", (POWERED_DOWN, POWERING_DOWN), ignore),
    Row("State=POWER_UP",   ON,                                 admin_power_up),
    Row("State=POWER_UP",   (POWERED_DOWN,),                    start_resume,       (POWERING_UP,)),
    Row("State=POWER_UP",   (POWERING_UP,),                     ignore),
    Row("health ok",        (UP, UNKNOWN, DOWN),                health_ok),
    Row("health drain",     (UP, UNKNOWN, DOWN),                health_drain),
    Row("health fail",      (UP, UNKNOWN, DOWN),                health_fail),
    Row("health ok",        (INVALID, *POWER),                  ignore),
    Row("health drain",     (INVALID, *POWER),                  ignore),
    Row("health fail",      (INVALID, *POWER),                  ignore),
    Row("suspend started",  (UP, DOWN, INVALID),                start_suspend,    (POWERING_DOWN,)),
    Row("suspend started",  (POWERING_DOWN,),                   ignore),
    Row("suspend timeout",  (POWERING_DOWN,),                   suspend_done,     (POWERED_DOWN,)),
    Row("suspend timeout",  (*ON, POWERED_DOWN, POWERING_UP, FUTURE), ignore),
    Row("resume started",   (POWERED_DOWN,),                    start_resume,       (POWERING_UP,)),
    Row("resume started",   (POWERING_UP,),                     ignore),
    Row("resume timeout",   (POWERING_UP,),                     resume_failed,    (POWERED_DOWN,)),
    Row("resume timeout",   (*ON, POWERED_DOWN, POWERING_DOWN, FUTURE), ignore),
    Row("shutdown notice",  (UP, UNKNOWN, DOWN),                node_shut_down,     (DOWN,)),
    Row("shutdown notice",  (POWERING_UP,),                     node_shut_down),
    Row("shutdown notice",  (INVALID,),                         shutdown_invalid),
    Row("shutdown notice",  (POWERED_DOWN, POWERING_DOWN, FUTURE), ignore),
    Row("config reload",    (*ON, *POWER),                      config_reload,      (SAME, FUTURE)),
    Row("config reload",    (FUTURE,),                          config_reload,
                                                        (SAME, UNKNOWN, DOWN, POWERED_DOWN)),
    # --- membership (issue 13): NodeApproval, reject, delete -------------------------------
    Row("await approval",   (UNKNOWN,),                         await_approval,     (PENDING,)),
    Row("await approval",   (UP, DOWN, INVALID, *POWER, FUTURE, PENDING, REJECTED), ignore),
    Row("register",         (PENDING,),                         register_valid),
    Row("register invalid", (PENDING,),                         register_invalid),
    Row("register",         (REJECTED,),                        refuse_rejected),
    Row("register invalid", (REJECTED,),                        refuse_rejected),
    Row("heartbeat",        (PENDING,),                         heartbeat_pending),
    Row("heartbeat missed", (PENDING,),                         mark_not_responding),
    Row("response timeout", (PENDING,),                         mark_not_responding),
    Row("shutdown notice",  (PENDING,),                         mark_not_responding),
    Row("allocation",       (PENDING, REJECTED),                release_only),
    Row("health ok",        (PENDING,),                         health_ok),
    Row("health drain",     (PENDING,),                         health_drain),
    Row("health fail",      (PENDING,),                         health_fail),
    Row("config reload",    (PENDING,),                         config_reload,      (SAME, FUTURE)),
    Row("heartbeat",        (REJECTED,),                        ignore),
    Row("heartbeat missed", (REJECTED,),                        ignore),
    Row("response timeout", (REJECTED,),                        ignore),
    Row("shutdown notice",  (REJECTED,),                        ignore),
    Row("health ok",        (REJECTED,),                        ignore),
    Row("health drain",     (REJECTED,),                        ignore),
    Row("health fail",      (REJECTED,),                        ignore),
    Row("config reload",    (REJECTED,),                        ignore),
    Row("suspend started",  (PENDING, REJECTED),                ignore),
    Row("suspend timeout",  (PENDING, REJECTED),                ignore),
    Row("resume started",   (PENDING, REJECTED),                ignore),
    Row("resume timeout",   (PENDING, REJECTED),                ignore),
    Row("approve",          (PENDING,),                         approve_pending,
                                                                (UP, UNKNOWN, DOWN, INVALID)),
    Row("approve",          (REJECTED,),                        approve_rejected,   (UNKNOWN,)),
    Row("approve",          (*ON, *POWER, FUTURE),              ignore),
    Row("reject",           (PENDING, REJECTED),                reject_node,        (REJECTED,)),
    Row("reject",           (*ON, *POWER, FUTURE),              reject_member),
    Row("delete",           (*ON, *POWER, FUTURE, PENDING, REJECTED), delete_node),
    Row("completing",       (*ON, *POWER, FUTURE, PENDING, REJECTED), set_completing),
    # --- the controller's guards (issue 18) ----------------------------------------------
    Row("guard hold",       (UP,),                              hold_not_responding),
    Row("guard hold",       (UNKNOWN, DOWN, INVALID, *POWER, FUTURE, PENDING, REJECTED), ignore),
    Row("drain paused",     (UP, UNKNOWN, DOWN, PENDING),       drain_paused),
    Row("drain paused",     (INVALID, *POWER, REJECTED),        ignore),
    Row("guard release",    (*ON, *POWER, FUTURE, PENDING, REJECTED), release_guard),
    # --- reboots (issue 33): rcontrol reboot / cancel_reboot; REBOOTING is `^` -------------
    Row("reboot",           ON,                                 reboots.request),
    Row("reboot",           (*POWER, FUTURE, PENDING, REJECTED, REBOOTING), ignore),
    Row("State=CANCEL_REBOOT", (*ON, REBOOTING),                reboots.cancel),
    Row("reboot issued",    (UP, DOWN),                         reboots.issue,
                                                                (SAME, REBOOTING)),
    Row("reboot issued",    (UNKNOWN, INVALID, *POWER, FUTURE, PENDING, REJECTED, REBOOTING),
                                                                ignore),
    Row("reboot timeout",   (REBOOTING,),                       reboots.timed_out,  (DOWN,)),
    Row("reboot timeout",   (*ON, *POWER, FUTURE, PENDING, REJECTED), ignore),
    Row("register",         (REBOOTING,),                       reboots.returned,
                                                                (SAME, UP, DOWN)),
    Row("register invalid", (REBOOTING,),                       reboots.returned_invalid,
                                                                (INVALID,)),
    Row("heartbeat",        (REBOOTING,),                       ignore),
    Row("heartbeat missed", (REBOOTING,),                       ignore),
    Row("response timeout", (REBOOTING,),                       ignore),
    Row("shutdown notice",  (REBOOTING,),                       ignore),
    Row("allocation",       (REBOOTING,),                       release_only),
    Row("State=DOWN",       (REBOOTING,),                       admin_down_rebooting, (DOWN,)),
    Row("State=DRAIN",      (REBOOTING,),                       admin_drain),
    Row("State=FAIL",       (REBOOTING,),                       admin_fail),
    Row("reason",           (REBOOTING,),                       admin_reason),
    Row("State=RESUME",     (REBOOTING,),                       admin_resume_rebooting, (UP,)),
    Row("State=UNDRAIN",    (REBOOTING,),                       admin_undrain),
    Row("health ok",        (REBOOTING,),                       ignore),
    Row("health drain",     (REBOOTING,),                       ignore),
    Row("health fail",      (REBOOTING,),                       ignore),
    Row("suspend started",  (REBOOTING,),                       ignore),
    Row("suspend timeout",  (REBOOTING,),                       ignore),
    Row("resume started",   (REBOOTING,),                       ignore),
    Row("resume timeout",   (REBOOTING,),                       ignore),
    Row("config reload",    (REBOOTING,),                       config_reload,      (SAME, FUTURE)),
    Row("await approval",   (REBOOTING,),                       ignore),
    Row("approve",          (REBOOTING,),                       ignore),
    Row("reject",           (REBOOTING,),                       reject_member),
    Row("delete",           (REBOOTING,),                       delete_node),
    Row("completing",       (REBOOTING,),                       set_completing),
    Row("guard hold",       (REBOOTING,),                       ignore),
    Row("drain paused",     (REBOOTING,),                       ignore),
    Row("guard release",    (REBOOTING,),                       release_guard),
    # --- reservations (issue 33): MAINT and RESERVED follow the windows --------------------
    Row("reservation",      (*ON, *POWER, FUTURE, PENDING, REJECTED, REBOOTING), reservation),
    Row("boot check",       (UP,),                              reboots.boot_check),
    Row("boot check",       (UNKNOWN, DOWN, INVALID, *POWER, FUTURE, PENDING, REJECTED,
                             REBOOTING),                        ignore),
)
# fmt: on


def _build(rows: tuple[Row, ...]) -> dict[tuple[str, str], Row]:
    table: dict[tuple[str, str], Row] = {}
    for row in rows:
        if row.event not in ev.EVENT_KINDS:
            raise AssertionError(f"table row for unknown event {row.event!r}")
        for cls in row.states:
            if (cls, row.event) in table:
                raise AssertionError(f"table has two rows for ({cls}, {row.event})")
            table[(cls, row.event)] = row
    return table


TABLE: dict[tuple[str, str], Row] = _build(ROWS)
_HANDLERS: dict[tuple[str, str], Handler] = {k: r.handler for k, r in TABLE.items()}


# --- apply -----------------------------------------------------------------------------------

_NO_EFFECTS: Effects = ()
_MEMBERSHIP_FLAGS = ((_D, "drain"), (_F, "fail"), (_NR, "not_responding"), (_PWD, "powered_down"),
                     (Flag.PENDING, "pending"), (Flag.REJECTED, "rejected"))


def _derived_effects(old: NodeState, new: NodeState) -> Effects:
    """Effects that follow from any change, so handlers need not repeat them: a new reason is
    recorded; membership events say when a node enters or leaves service."""
    out: list[fx.Effect] = []
    if new.reason is not None and new.reason != old.reason:
        out.append(fx.ReasonRecorded(new.reason))
    if new.base is not old.base:
        if new.base is Base.DOWN:
            out.append(fx.Membership("down"))
        elif new.base is Base.FUTURE:
            out.append(fx.Membership("future"))
    added = new.flags - old.flags
    if added:
        for flag, kind in _MEMBERSHIP_FLAGS:
            if flag in added:
                out.append(fx.Membership(kind))
    if takes_new_work(new) and not takes_new_work(old):
        out.append(fx.Membership("up"))
    return tuple(out)


def apply(
    state: NodeState, event: ev.Event, policy: Policy = DEFAULT_POLICY
) -> tuple[NodeState, Effects]:
    """The only way a node's state changes. Raises InvalidTransition for what TABLE refuses."""
    handler = _HANDLERS.get((classify(state), event.kind))
    if handler is None:
        raise refuse(state, event)
    new, effects = handler(state, event, policy)
    if new is state:
        return state, effects
    derived = _derived_effects(state, new)
    return new, (effects + derived if derived else effects)


keep_reason_for = _keep_reason_for  # for statemachine/reboots.py

