"""Effects: plain data telling the I/O shell (ctld) what to do after a transition."""

from __future__ import annotations

from typing import Literal

import attrs

from ranch.statemachine.model import Reason


@attrs.frozen(slots=True)
class KillJobs:
    requeue: bool  # requeue batch jobs that allow it (Slurm's NODE_FAIL path)
    # The node is alive (State=FAIL): its processes are killed and awaited (COMPLETING, so the
    # node shows `failg`) before the jobs move on; False: the node is gone, nothing to await.
    wait: bool = False


@attrs.frozen(slots=True)
class RunSuspendProgram:
    pass


@attrs.frozen(slots=True)
class RunResumeProgram:
    pass


@attrs.frozen(slots=True)
class RunResumeFailProgram:
    pass


@attrs.frozen(slots=True)
class RunRebootProgram:
    """Tell the node's rnoded to run RebootProgram (it is idle; the reboot was issued)."""


@attrs.frozen(slots=True)
class ReasonRecorded:
    reason: Reason


@attrs.frozen(slots=True)
class Membership:
    # "up" (entered service), "down", "drain", "fail", "not_responding", "powered_down", "future"
    kind: str


@attrs.frozen(slots=True)
class ScheduleTimeout:
    kind: Literal["suspend", "resume", "reboot"]


@attrs.frozen(slots=True)
class RequestRegistration:
    """Ask the node to register again (its registration decides whether it comes back)."""


@attrs.frozen(slots=True)
class Evict:
    """Close the node's connection: it was rejected or deleted (its next registration decides)."""


Effect = (
    KillJobs
    | RunSuspendProgram
    | RunResumeProgram
    | RunResumeFailProgram
    | RunRebootProgram
    | ReasonRecorded
    | Membership
    | ScheduleTimeout
    | RequestRegistration
    | Evict
)
