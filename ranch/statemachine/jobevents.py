"""What the job table (statemachine/jobtable.py) reads and gives: a job's view, events, effects."""

from __future__ import annotations

import attrs

from ranch.statemachine.jobstates import PENDING, JobState

REQUEUE = "REQUEUE"  # a COMPLETING job's outcome: back to PENDING once its processes are gone


class JobRefused(Exception):
    """An event the table does not allow in the job's state; the message is for the user."""

    def __init__(self, message: str, *, job_id: int = 0, state: str = "", event: str = "") -> None:
        super().__init__(message)
        self.job_id = job_id
        self.state = state
        self.event = event


@attrs.frozen(slots=True)
class JobView:
    """What the table reads and writes of a job (the rest of the record is ctld's)."""

    id: int
    state: JobState = PENDING
    outcome: str = ""  # the state a COMPLETING job takes once `awaiting` empties, or REQUEUE
    held: str = ""  # "" | "user" | "admin" | "requeue" (requeuehold: its owner may release it)
    restarts: int = 0  # the current run (SLURM_RESTART_COUNT)
    requeue: bool = True  # the job may be requeued (--requeue / --no-requeue)
    nodes: tuple[str, ...] = ()
    awaiting: frozenset[str] = frozenset()  # nodes whose ending of this run is still due
    exit_code: int = 0
    signal: int = 0
    message: str = ""
    batch_host: str = ""


# --- events ----------------------------------------------------------------------------------

@attrs.frozen(slots=True)
class Allocate:
    """The scheduler placed the job; `booting`: some of its nodes power up first (CF)."""

    nodes: tuple[str, ...]
    booting: bool = False
    kind = "allocate"


@attrs.frozen(slots=True)
class NodesReady:
    """Every node of a CONFIGURING job registered: launch."""

    kind = "nodes ready"


@attrs.frozen(slots=True)
class LaunchConfirmed:
    """A node started its part of run `restarts` at `started_at` (wall clock)."""

    node: str
    restarts: int
    started_at: float
    kind = "launch confirmed"


@attrs.frozen(slots=True)
class EndReported:
    """A node's JobEnd: its part of run `restarts` ended (`state` as the node saw it)."""

    node: str
    restarts: int
    state: str  # COMPLETED FAILED TIMEOUT CANCELLED OUT_OF_MEMORY LAUNCH_FAILED
    exit_code: int = 0
    signal: int = 0
    message: str = ""
    kind = "end reported"


@attrs.frozen(slots=True)
class Cancel:
    kind = "cancel"


@attrs.frozen(slots=True)
class NodeLost:
    """A node of the job is gone (DOWN, ResumeTimeout, or it does not run the job): nothing of
    the run is left to wait for there. `requeue`: the node's loss lets the job be requeued."""

    node: str
    requeue: bool = True
    why: str = ""
    kind = "node lost"


@attrs.frozen(slots=True)
class NodeFailing:
    """State=FAIL: the node is alive; the job's processes are killed and awaited first."""

    node: str
    requeue: bool = True
    kind = "node failing"


@attrs.frozen(slots=True)
class Requeue:
    """rcontrol requeue; `hold`: requeuehold, the next run held until released."""

    hold: bool = False
    kind = "requeue"


@attrs.frozen(slots=True)
class Hold:
    admin: bool = False
    kind = "hold"


@attrs.frozen(slots=True)
class Release:
    kind = "release"


@attrs.frozen(slots=True)
class UpdateBegin:
    """rcontrol update JobId=N StartTime=T."""

    kind = "update begin"


@attrs.frozen(slots=True)
class Complete:
    """An allocation's owner releases it (ralloc's command ended): how that command ended."""

    exit_code: int = 0
    signal: int = 0
    kind = "complete"


@attrs.frozen(slots=True)
class Inactive:
    """An allocation's command (ralloc, rrun outside a job) has not said it is alive for
    InactiveLimit seconds: slurmctld's inactivity limit ends it."""

    kind = "inactive"


@attrs.frozen(slots=True)
class NotNow:
    """An --immediate allocation did not start in the scheduling pass after its submission."""

    kind = "not now"


@attrs.frozen(slots=True)
class Preempt:
    """preempt/qos stops the job for a higher one: requeued when `requeue` (PreemptMode=REQUEUE)
    and the job may be, else PREEMPTED (CANCEL, or a job that may not be requeued)."""

    requeue: bool = False
    kind = "preempt"


Event = (Allocate | NodesReady | LaunchConfirmed | EndReported | Cancel | NodeLost | NodeFailing
         | Requeue | Hold | Release | UpdateBegin | Complete | Inactive | NotNow | Preempt)
EVENT_KINDS = tuple(c.kind for c in (Allocate, NodesReady, LaunchConfirmed, EndReported, Cancel,
                                     NodeLost, NodeFailing, Requeue, Hold, Release, UpdateBegin,
                                     Complete, Inactive, NotNow, Preempt))


# --- effects: what ctld does after a transition ----------------------------------------------

@attrs.frozen(slots=True)
class Launch:
    """Send LaunchJob for the current run to these nodes (after the run is on disk)."""

    nodes: tuple[str, ...]


@attrs.frozen(slots=True)
class Kill:
    """End the run's processes on these nodes (KillJob naming the run)."""

    nodes: tuple[str, ...]
    why: str


@attrs.frozen(slots=True)
class Free:
    """The job's resources on these nodes are free again."""

    nodes: tuple[str, ...]


@attrs.frozen(slots=True)
class Started:
    """The run's processes started at this wall-clock time (the node said so)."""

    at: float


Effect = Launch | Kill | Free | Started
Effects = tuple[Effect, ...]


def refuse(v: JobView, e: Event, why: str) -> JobRefused:
    return JobRefused(why, job_id=v.id, state=str(v.state), event=e.kind)

