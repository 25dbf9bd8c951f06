"""Events fed to the state machine (frozen data), and the parse of an admin's State= word."""

from __future__ import annotations

from typing import ClassVar

import attrs

# The canonical words of `rcontrol update State=...` (Slurm's scontrol), in Slurm's order.
ADMIN_REQUESTS = (
    "NORESP",
    "DRAIN",
    "FAIL",
    "FUTURE",
    "RESUME",
    "POWER_DOWN",
    "POWER_DOWN_ASAP",
    "POWER_DOWN_FORCE",
    "POWER_UP",
    "UNDRAIN",
    "DOWN",
    "IDLE",
    "CANCEL_REBOOT",
)
# Admin requests that Slurm refuses without a Reason=, and scontrol's words when it does: the
# one declaration the command, the controller's routes, its HTTP API and the table read.
REASON_REQUIRED = frozenset({"DOWN", "DRAIN", "FAIL"})
REASON_REQUIRED_MESSAGE = ("You must specify a reason when DOWNING or DRAINING a node. "
                           "Request denied")
HEALTH_VERDICTS = ("ok", "drain", "fail")


@attrs.frozen(slots=True)
class Registered:
    now: float
    valid: bool = True
    problem: str | None = None  # the mismatch, e.g. "Low RealMemory (reported:512 < ...)"
    rebooted: bool = False  # boot time newer than the last response
    cpus_total: int | None = None

    @property
    def kind(self) -> str:
        return "register" if self.valid else "register invalid"


@attrs.frozen(slots=True)
class HeartbeatReceived:
    kind: ClassVar[str] = "heartbeat"
    now: float


@attrs.frozen(slots=True)
class HeartbeatMissed:
    kind: ClassVar[str] = "heartbeat missed"
    now: float


@attrs.frozen(slots=True)
class ResponseTimeout:
    kind: ClassVar[str] = "response timeout"
    now: float
    user: str | None = None  # the admin who confirmed a timeout the DownGuard held


@attrs.frozen(slots=True)
class AllocationChanged:
    kind: ClassVar[str] = "allocation"
    now: float
    cpus_alloc: int


@attrs.frozen(slots=True)
class AdminUpdate:
    now: float
    request: str = attrs.field(validator=attrs.validators.in_(ADMIN_REQUESTS))
    reason: str | None = None
    user: str = ""

    @property
    def kind(self) -> str:
        return "State=" + self.request


@attrs.frozen(slots=True)
class ReasonUpdate:
    """rcontrol update NodeName=... Reason=... with no State=: the reason alone changes."""

    now: float
    reason: str
    user: str = ""
    kind: ClassVar[str] = "reason"


@attrs.frozen(slots=True)
class HealthResult:
    now: float
    verdict: str = attrs.field(validator=attrs.validators.in_(HEALTH_VERDICTS))
    message: str = ""  # e.g. "HC: /scratch is full"

    @property
    def kind(self) -> str:
        return "health " + self.verdict


@attrs.frozen(slots=True)
class SuspendStarted:
    kind: ClassVar[str] = "suspend started"
    now: float


@attrs.frozen(slots=True)
class SuspendTimeout:
    kind: ClassVar[str] = "suspend timeout"
    now: float


@attrs.frozen(slots=True)
class ResumeStarted:
    kind: ClassVar[str] = "resume started"
    now: float


@attrs.frozen(slots=True)
class ResumeTimeout:
    kind: ClassVar[str] = "resume timeout"
    now: float


@attrs.frozen(slots=True)
class ShutdownNotice:
    kind: ClassVar[str] = "shutdown notice"
    now: float


@attrs.frozen(slots=True)
class ConfigReload:
    kind: ClassVar[str] = "config reload"
    now: float
    cpus_total: int
    config_state: str = "UNKNOWN"


# --- membership (issue 13): admission of nodes under NodeApproval=manual, and removal ---------


@attrs.frozen(slots=True)
class AwaitApproval:
    """A node new to the cluster, under NodeApproval=manual: it waits for an admin."""

    kind: ClassVar[str] = "await approval"
    now: float


@attrs.frozen(slots=True)
class Approve:
    kind: ClassVar[str] = "approve"
    now: float
    user: str = ""


@attrs.frozen(slots=True)
class Reject:
    kind: ClassVar[str] = "reject"
    now: float
    reason: str | None = None
    user: str = ""


@attrs.frozen(slots=True)
class Delete:
    """`rcontrol delete`: the record of a dynamic node goes (refused while it runs jobs)."""

    kind: ClassVar[str] = "delete"
    now: float
    user: str = ""


@attrs.frozen(slots=True)
class Completing:
    """A job's processes on the node are being killed (active) or are all gone (not active):
    the COMPLETING flag (sinfo `comp`)."""

    kind: ClassVar[str] = "completing"
    now: float
    active: bool


# --- the controller's guards (issue 18): mass silence and mass health drains -----------------


@attrs.frozen(slots=True)
class GuardHold:
    """SlurmdTimeout came while the DownGuard is tripped: too many nodes went silent at once to
    blame them, so the node stays `*` (not DOWN, its jobs not requeued) until an admin decides
    or it is heard from."""

    kind: ClassVar[str] = "guard hold"
    now: float


@attrs.frozen(slots=True)
class DrainPaused:
    """A health check's drain or fail verdict that the DrainGuard paused: it is recorded as the
    node's reason, but the node stays in service."""

    now: float
    verdict: str = attrs.field(validator=attrs.validators.in_(("drain", "fail")))
    message: str = ""

    @property
    def kind(self) -> str:
        return "drain paused"


@attrs.frozen(slots=True)
class GuardRelease:
    """An admin reset a guard: the hold or paused-drain reason it set goes."""

    kind: ClassVar[str] = "guard release"
    now: float
    user: str = ""


# --- reboots (issue 33): `rcontrol reboot`, its issue once the node is idle, its end -----------

NEXT_STATES = ("RESUME", "DOWN")


@attrs.frozen(slots=True)
class RebootRequest:
    """`rcontrol reboot [ASAP] [nextstate=RESUME|DOWN] [reason=...]`: `@` until the node is
    idle; ASAP drains it first so that no new job lands."""

    kind: ClassVar[str] = "reboot"
    now: float
    asap: bool = False
    next_state: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.in_(NEXT_STATES)))
    reason: str | None = None
    user: str = ""


@attrs.frozen(slots=True)
class RebootIssued:
    """The node is idle: RebootProgram is sent to it and the new boot awaited (`^`)."""

    kind: ClassVar[str] = "reboot issued"
    now: float


@attrs.frozen(slots=True)
class RebootTimeout:
    """ResumeTimeout passed since the reboot was issued and the node did not come back."""

    kind: ClassVar[str] = "reboot timeout"
    now: float


# --- reservations (issue 33): a node enters or leaves a reservation's window ----------------


@attrs.frozen(slots=True)
class ReservationChanged:
    """The node's reservations now: in one (RESERVED), in a maintenance one (MAINT), or none."""

    kind: ClassVar[str] = "reservation"
    now: float
    reserved: bool = False
    maint: bool = False
    name: str = ""  # the reservation that started or ended, for the event log


@attrs.frozen(slots=True)
class BootCheck:
    """The health check's verdict on a node's new boot (it is held out until this comes);
    `count`: boots in a row that ended unhealthy, this one included (0 when it passed)."""

    now: float
    verdict: str = attrs.field(validator=attrs.validators.in_(HEALTH_VERDICTS))
    message: str = ""
    count: int = 0
    kind: ClassVar[str] = "boot check"


Event = (
    Registered
    | HeartbeatReceived
    | HeartbeatMissed
    | ResponseTimeout
    | AllocationChanged
    | AdminUpdate
    | ReasonUpdate
    | HealthResult
    | SuspendStarted
    | SuspendTimeout
    | ResumeStarted
    | ResumeTimeout
    | ShutdownNotice
    | ConfigReload
    | AwaitApproval
    | Approve
    | Reject
    | Delete
    | Completing
    | GuardHold
    | DrainPaused
    | GuardRelease
    | RebootRequest
    | RebootIssued
    | RebootTimeout
    | ReservationChanged
    | BootCheck
)

EVENT_KINDS: tuple[str, ...] = (
    "register",
    "register invalid",
    "heartbeat",
    "heartbeat missed",
    "response timeout",
    "allocation",
    *("State=" + r for r in ADMIN_REQUESTS),
    "reason",
    *("health " + v for v in HEALTH_VERDICTS),
    "suspend started",
    "suspend timeout",
    "resume started",
    "resume timeout",
    "shutdown notice",
    "config reload",
    "await approval",
    "approve",
    "reject",
    "delete",
    "completing",
    "guard hold",
    "drain paused",
    "guard release",
    "reboot",
    "reboot issued",
    "reboot timeout",
    "reservation",
    "boot check",
)

# Shortest accepted abbreviation per word (Slurm: 3, POWER_DOWN/POWER_UP 7, *_ASAP/*_FORCE 12).
# Longer words first so "POWER_DOWN_A..." is never read as POWER_DOWN.
_MIN_PREFIX = (
    ("POWER_DOWN_ASAP", 12),
    ("POWER_DOWN_FORCE", 12),
    ("POWER_DOWN", 7),
    ("POWER_UP", 7),
    ("NORESP", 3),
    ("DRAIN", 3),
    ("FAIL", 3),
    ("FUTURE", 3),
    ("RESUME", 3),
    ("UNDRAIN", 3),
    ("DOWN", 3),
    ("IDLE", 3),
    ("CANCEL_REBOOT", 6),
)

VALID_STATES_MESSAGE = (
    "Valid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN POWER_DOWN_ASAP "
    "POWER_DOWN_FORCE POWER_UP UNDRAIN DOWN IDLE"
)


def parse_admin_state(text: str) -> str:
    """Resolve a State= value (case-insensitive, Slurm's prefix abbreviations) to its word."""
    word = text.strip().upper()
    if word:
        for canonical, shortest in _MIN_PREFIX:
            if len(word) >= shortest and canonical.startswith(word):
                return canonical
    raise ValueError(f"invalid node state {text!r}. {VALID_STATES_MESSAGE}")
