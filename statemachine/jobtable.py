"""THE job transition table: every change of a batch job's state, in one place a user can audit.

Read JOB_ROWS (bottom of this file) first: each row says which event, in which states, runs which
named handler, and which states it may lead to. An event the table does not list for a state is
refused with JobRefused, worded as scontrol words it. Handlers return the job's new JobView and
the effects (launch, kill, release) that ctld carries out; they never do I/O.

Every event about a job's processes names the run it is about (`restarts`): a report of another
run is never taken for the current one (the handlers ignore it; ctld kills the stale run).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from statemachine.jobstates import (
    ACTIVE,
    COMPLETING,
    CONFIGURING,
    END_REPORTS,
    FINAL,
    PENDING,
    RUNNING,
    JobState,
)

REQUEUE = "REQUEUE"  # a COMPLETING job's outcome: back to PENDING once its processes are gone
FINISHED = "FINISHED"  # the table's class for every FINAL state
SAME = "SAME"


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
    held: str = ""  # "" | "user" | "admin"
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


Event = (Allocate | NodesReady | LaunchConfirmed | EndReported | Cancel | NodeLost | NodeFailing
         | Requeue | Hold | Release | UpdateBegin | Complete | Inactive | NotNow)
EVENT_KINDS = tuple(c.kind for c in (Allocate, NodesReady, LaunchConfirmed, EndReported, Cancel,
                                     NodeLost, NodeFailing, Requeue, Hold, Release, UpdateBegin,
                                     Complete, Inactive, NotNow))


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
Handler = Callable[[JobView, Event], tuple[JobView, Effects]]


# --- helpers ---------------------------------------------------------------------------------

def job_class(v: JobView) -> str:
    return FINISHED if v.state in FINAL else str(v.state)


def refuse(v: JobView, e: Event, why: str) -> JobRefused:
    return JobRefused(why, job_id=v.id, state=str(v.state), event=e.kind)


def _end(v: JobView, outcome: str, **changes: object) -> tuple[JobView, Effects]:
    """Every node is done with the run: the job takes `outcome` (or is requeued)."""
    freed: Effects = (Free(v.nodes),) if v.nodes else ()
    if outcome == REQUEUE:
        return attrs.evolve(v, state=PENDING, outcome="", restarts=v.restarts + 1, nodes=(),
                            awaiting=frozenset(), batch_host="", **changes), freed
    return attrs.evolve(v, state=JobState(outcome), outcome="", awaiting=frozenset(),
                        **changes), freed


def _stop(v: JobView, outcome: str, why: str, **changes: object) -> tuple[JobView, Effects]:
    """End the run everywhere it still runs: COMPLETING until those nodes report, or at once."""
    if not v.awaiting:
        return _end(v, outcome, **changes)
    return (attrs.evolve(v, state=COMPLETING, outcome=outcome, **changes),
            (Kill(tuple(sorted(v.awaiting)), why),))


def _lost_outcome(v: JobView, requeue: bool) -> str:
    return REQUEUE if requeue and v.requeue else JobState.NODE_FAIL


def _same_run(v: JobView, node: str, restarts: int) -> bool:
    return restarts == v.restarts and node in v.awaiting


# --- handlers --------------------------------------------------------------------------------

def ignore(v: JobView, e: Event) -> tuple[JobView, Effects]:
    """Nothing changes (a repeat, or news about a run that is not the current one)."""
    return v, ()


def allocate(v: JobView, e: Allocate) -> tuple[JobView, Effects]:
    """Placed: RUNNING and launched at once, or CONFIGURING while some of its nodes boot."""
    if v.held:
        raise refuse(v, e, f"job {v.id} is held")
    batch = e.nodes[0] if e.nodes else ""
    if e.booting:
        return attrs.evolve(v, state=CONFIGURING, nodes=e.nodes, batch_host=batch,
                            exit_code=0, signal=0, message=""), ()
    return (attrs.evolve(v, state=RUNNING, nodes=e.nodes, awaiting=frozenset(e.nodes),
                         batch_host=batch, exit_code=0, signal=0, message=""),
            (Launch(e.nodes),))


def launch(v: JobView, e: NodesReady) -> tuple[JobView, Effects]:
    """Every node of a CONFIGURING job is up: launch the run."""
    return attrs.evolve(v, state=RUNNING, awaiting=frozenset(v.nodes)), (Launch(v.nodes),)


def confirm_launch(v: JobView, e: LaunchConfirmed) -> tuple[JobView, Effects]:
    """The batch host started the current run: its start time becomes the job's."""
    if not _same_run(v, e.node, e.restarts) or e.node != v.batch_host:
        return v, ()
    return v, (Started(e.started_at),)


SIG_OOM_SHOWN = 125  # Slurm's SIG_OOM (253) with the signalled bit (128) taken off


def end_running(v: JobView, e: EndReported) -> tuple[JobView, Effects]:
    """A node ended its part. The batch host's end (or any node's failure) ends the job; the
    other nodes are then stopped and awaited (COMPLETING)."""
    if not _same_run(v, e.node, e.restarts):
        return v, ()
    outcome = END_REPORTS.get(e.state, JobState.FAILED)
    left = v.awaiting - {e.node}
    freed: Effects = (Free((e.node,)),)
    if e.node != v.batch_host and outcome not in (JobState.FAILED, JobState.OUT_OF_MEMORY):
        return attrs.evolve(v, awaiting=left), freed  # a helper node let go early: keep running
    message = e.message
    if e.state == "LAUNCH_FAILED":
        message = f"launch failed on {e.node}: {e.message}"
    code, sig = e.exit_code, e.signal
    if outcome == JobState.OUT_OF_MEMORY:
        # Slurm reports an OOM kill as its dummy signal SIG_OOM (253): ExitCode 0:125
        code, sig = 0, SIG_OOM_SHOWN
    v2 = attrs.evolve(v, awaiting=left, exit_code=code, signal=sig, message=message)
    new, effects = _stop(v2, outcome, "ended")
    return new, freed + effects


def end_completing(v: JobView, e: EndReported) -> tuple[JobView, Effects]:
    """A node of a COMPLETING job is done; the last one gives the job its outcome."""
    if not _same_run(v, e.node, e.restarts):
        return v, ()
    left = v.awaiting - {e.node}
    changes: dict[str, object] = {"awaiting": left}
    if (e.node == v.batch_host and v.exit_code == 0 and v.signal == 0
            and v.outcome != JobState.COMPLETED):  # a released allocation keeps its 0:0
        changes.update(exit_code=e.exit_code, signal=e.signal)  # cancelled: 0:15, as Slurm
    v2 = attrs.evolve(v, **changes)
    if left:
        return v2, (Free((e.node,)),)
    new, effects = _end(v2, v.outcome)
    return new, effects


def cancel_pending(v: JobView, e: Cancel) -> tuple[JobView, Effects]:
    """Cancelled before it ran: CANCELLED at once (its nodes, if any, freed)."""
    return _end(v, JobState.CANCELLED)


def cancel_active(v: JobView, e: Cancel) -> tuple[JobView, Effects]:
    """Cancelled while running: its processes are killed and awaited (COMPLETING)."""
    return _stop(v, JobState.CANCELLED, "cancelled")


def cancel_done(v: JobView, e: Cancel) -> tuple[JobView, Effects]:
    """Refused: scancel's 'Job/step already completing or completed'."""
    raise refuse(v, e, f"Kill job error on job id {v.id}: Job/step already completing or "
                       "completed")


def lose_node(v: JobView, e: NodeLost) -> tuple[JobView, Effects]:
    """The node is gone: what ran there is lost. The job is requeued (or NODE_FAIL) at once;
    its copies on other nodes are told to stop (their stale run is killed when they report)."""
    if e.node not in (v.nodes if v.state is CONFIGURING else v.awaiting):
        return v, ()
    others = tuple(sorted(v.awaiting - {e.node}))
    new, effects = _end(v, _lost_outcome(v, e.requeue), message=e.why or f"node {e.node} failed")
    return new, ((Kill(others, "node_down"),) if others else ()) + effects


def lose_node_completing(v: JobView, e: NodeLost) -> tuple[JobView, Effects]:
    """A node of a COMPLETING job is gone: nothing more to await there."""
    if e.node not in v.awaiting:
        return v, ()
    left = v.awaiting - {e.node}
    if left:
        return attrs.evolve(v, awaiting=left), (Free((e.node,)),)
    return _end(attrs.evolve(v, awaiting=left), v.outcome)


def fail_node_configuring(v: JobView, e: NodeFailing) -> tuple[JobView, Effects]:
    """State=FAIL on a node a CONFIGURING job waits for: requeued or NODE_FAIL."""
    return _end(v, _lost_outcome(v, e.requeue), message=f"node {e.node} failed")


def fail_node_running(v: JobView, e: NodeFailing) -> tuple[JobView, Effects]:
    """State=FAIL: the job's processes are killed and awaited, then requeue or NODE_FAIL."""
    return _stop(v, _lost_outcome(v, e.requeue), "node_fail", message=f"node {e.node} failed")


def requeue_pending(v: JobView, e: Requeue) -> tuple[JobView, Effects]:
    """Refused: the job has not run yet."""
    raise refuse(v, e, f"job {v.id}: Job is pending execution")


def requeue_active(v: JobView, e: Requeue) -> tuple[JobView, Effects]:
    """Requeue (unless --no-requeue): stop this run, then PENDING for the next one."""
    if not v.requeue:
        raise refuse(v, e, f"job {v.id}: Requeue of this job is disabled (--no-requeue)")
    if v.state is CONFIGURING:
        return _end(v, REQUEUE)
    return _stop(v, REQUEUE, "requeued")


def requeue_completing(v: JobView, e: Requeue) -> tuple[JobView, Effects]:
    """Refused while its processes are still being cleaned up."""
    raise refuse(v, e, f"job {v.id}: Job is completing; requeue it once it has ended")


def requeue_finished(v: JobView, e: Requeue) -> tuple[JobView, Effects]:
    """A finished job back to PENDING for a new run (restarts + 1)."""
    return _end(attrs.evolve(v, nodes=()), REQUEUE, exit_code=0, signal=0, message="")


def hold(v: JobView, e: Hold) -> tuple[JobView, Effects]:
    """Held: it stays PENDING with JobHeldUser/JobHeldAdmin until released."""
    return attrs.evolve(v, held="admin" if e.admin else "user"), ()


def not_pending(v: JobView, e: Event) -> tuple[JobView, Effects]:
    """Refused: 'Job is no longer pending execution'."""
    raise refuse(v, e, f"job {v.id}: Job is no longer pending execution")


def release(v: JobView, e: Release) -> tuple[JobView, Effects]:
    """Released: it may be scheduled again."""
    if not v.held:
        raise refuse(v, e, f"job {v.id}: Job is not held")
    return attrs.evolve(v, held=""), ()


def release_not_held(v: JobView, e: Release) -> tuple[JobView, Effects]:
    """Refused: 'Job is not held'."""
    raise refuse(v, e, f"job {v.id}: Job is not held")


def update_begin(v: JobView, e: UpdateBegin) -> tuple[JobView, Effects]:
    """A pending job's BeginTime changed (the scheduler reads it)."""
    return v, ()


def complete_running(v: JobView, e: Complete) -> tuple[JobView, Effects]:
    """Released by its owner: COMPLETED (0:0), or FAILED with the command's exit code (N:0) or
    the signal that killed it (0:SIG), as slurmctld's job_complete; its nodes are stopped and
    awaited (COMPLETING)."""
    failed = e.exit_code != 0 or e.signal != 0
    return _stop(v, JobState.FAILED if failed else JobState.COMPLETED, "released",
                 exit_code=e.exit_code, signal=0 if e.exit_code else e.signal, message="")


def complete_pending(v: JobView, e: Complete) -> tuple[JobView, Effects]:
    """Released before it was granted (salloc's Ctrl-C while waiting): CANCELLED, as Slurm."""
    return _end(v, JobState.CANCELLED)


def complete_done(v: JobView, e: Complete) -> tuple[JobView, Effects]:
    """Refused: Slurm's ESLURM_ALREADY_DONE (a COMPLETING job's release is a repeat: nothing
    changes, as slurmctld answers it)."""
    if v.state is COMPLETING:
        return v, ()
    raise refuse(v, e, f"job {v.id}: Job/step already completing or completed")


def inactive(v: JobView, e: Inactive) -> tuple[JobView, Effects]:
    """Its command went silent: TIMEOUT (0:0, as slurmctld's job_time_limit ends it), its
    nodes stopped and awaited (COMPLETING)."""
    return _stop(v, JobState.TIMEOUT, "inactive", exit_code=0, signal=0, message="")


def not_now(v: JobView, e: NotNow) -> tuple[JobView, Effects]:
    """salloc -I refused: FAILED at once with ExitCode 0:1, as slurmctld's job_allocate ends an
    immediate job it cannot start (ctld sets Reason BadConstraints)."""
    return _end(v, JobState.FAILED, exit_code=0, signal=1, message="")


# --- THE TABLE -------------------------------------------------------------------------------

@attrs.frozen
class Row:
    event: str
    states: tuple[str, ...]
    handler: Handler
    to: tuple[str, ...] = (SAME,)


_PD, _CF, _R, _CG, _DONE = str(PENDING), str(CONFIGURING), str(RUNNING), str(COMPLETING), FINISHED
CLASSES = (_PD, _CF, _R, _CG, _DONE)

# fmt: off
JOB_ROWS: tuple[Row, ...] = (
    Row("allocate",         (_PD,),             allocate,              (_R, _CF)),
    Row("allocate",         (_CF, _R, _CG, _DONE), not_pending),
    Row("nodes ready",      (_CF,),             launch,                (_R,)),
    Row("nodes ready",      (_PD, _R, _CG, _DONE), ignore),
    Row("launch confirmed", (_R, _CG),          confirm_launch),
    Row("launch confirmed", (_PD, _CF, _DONE),  ignore),   # an old run's news: ctld kills it
    Row("end reported",     (_R,),              end_running,           (SAME, _CG, _DONE, _PD)),
    Row("end reported",     (_CG,),             end_completing,        (SAME, _DONE, _PD)),
    Row("end reported",     (_PD, _CF, _DONE),  ignore),   # an old run's ending
    Row("cancel",           (_PD, _CF),         cancel_pending,        (_DONE,)),
    Row("cancel",           (_R,),              cancel_active,         (_CG, _DONE)),
    Row("cancel",           (_CG, _DONE),       cancel_done),
    Row("node lost",        (_CF, _R),          lose_node,             (_PD, _DONE)),
    Row("node lost",        (_CG,),             lose_node_completing,  (SAME, _PD, _DONE)),
    Row("node lost",        (_PD, _DONE),       ignore),
    Row("node failing",     (_CF,),             fail_node_configuring, (_PD, _DONE)),
    Row("node failing",     (_R,),              fail_node_running,     (_CG, _PD, _DONE)),
    Row("node failing",     (_PD, _CG, _DONE),  ignore),
    Row("requeue",          (_PD,),             requeue_pending),
    Row("requeue",          (_CF, _R),          requeue_active,        (_CG, _PD)),
    Row("requeue",          (_CG,),             requeue_completing),
    Row("requeue",          (_DONE,),           requeue_finished,      (_PD,)),
    Row("hold",             (_PD,),             hold),
    Row("hold",             (_CF, _R, _CG, _DONE), not_pending),
    Row("release",          (_PD,),             release),
    Row("release",          (_CF, _R, _CG, _DONE), release_not_held),
    Row("update begin",     (_PD,),             update_begin),
    Row("update begin",     (_CF, _R, _CG, _DONE), not_pending),
    Row("complete",         (_PD, _CF),         complete_pending,      (_DONE,)),
    Row("complete",         (_R,),              complete_running,      (_CG, _DONE)),
    Row("complete",         (_CG, _DONE),       complete_done),
    Row("inactive",         (_CF, _R),          inactive,              (_CG, _DONE)),
    Row("inactive",         (_PD, _CG, _DONE),  ignore),   # pending: not yet; ended: too late
    Row("not now",          (_PD,),             not_now,               (_DONE,)),
    Row("not now",          (_CF, _R, _CG, _DONE), ignore),  # it started after all
)
# fmt: on


def _build(rows: tuple[Row, ...]) -> dict[tuple[str, str], Handler]:
    table: dict[tuple[str, str], Handler] = {}
    for row in rows:
        if row.event not in EVENT_KINDS:
            raise AssertionError(f"job table row for unknown event {row.event!r}")
        for cls in row.states:
            if (cls, row.event) in table:
                raise AssertionError(f"job table has two rows for ({cls}, {row.event})")
            table[(cls, row.event)] = row.handler
    return table


JOB_TABLE = _build(JOB_ROWS)


def apply_job(view: JobView, event: Event) -> tuple[JobView, Effects]:
    """The only way a job's state changes. Raises JobRefused for what JOB_ROWS refuses."""
    handler = JOB_TABLE.get((job_class(view), event.kind))
    if handler is None:
        raise refuse(view, event, f"job {view.id}: cannot {event.kind} a {view.state} job")
    return handler(view, event)


__all__ = ["ACTIVE", "FINAL", "JOB_ROWS", "JOB_TABLE", "REQUEUE", "JobRefused", "JobView",
           "apply_job"]
