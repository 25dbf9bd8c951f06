"""The job table's named handlers: what each row of JOB_ROWS does to a job's view (no I/O)."""

from __future__ import annotations

from typing import Any

import attrs

from ranch.statemachine.jobevents import (
    REQUEUE,
    Allocate,
    Cancel,
    Complete,
    Effects,
    EndReported,
    Event,
    Free,
    Hold,
    Inactive,
    JobView,
    Kill,
    Launch,
    LaunchConfirmed,
    NodeFailing,
    NodeLost,
    NodesReady,
    NotNow,
    Preempt,
    Release,
    Requeue,
    Started,
    UpdateBegin,
    refuse,
)
from ranch.statemachine.jobstates import (
    COMPLETING,
    CONFIGURING,
    END_REPORTS,
    PENDING,
    RUNNING,
    JobState,
)

# --- helpers ---------------------------------------------------------------------------------

def _end(v: JobView, outcome: str, **changes: Any) -> tuple[JobView, Effects]:
    """Every node is done with the run: the job takes `outcome` (or is requeued)."""
    freed: Effects = (Free(v.nodes),) if v.nodes else ()
    if outcome == REQUEUE:
        return attrs.evolve(v, state=PENDING, outcome="", restarts=v.restarts + 1, nodes=(),
                            awaiting=frozenset(), batch_host="", **changes), freed
    return attrs.evolve(v, state=JobState(outcome), outcome="", awaiting=frozenset(),
                        **changes), freed


def _stop(v: JobView, outcome: str, why: str, **changes: Any) -> tuple[JobView, Effects]:
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
    changes: dict[str, Any] = {"awaiting": left}
    if (e.node == v.batch_host and v.exit_code == 0 and v.signal == 0
            and v.outcome not in (JobState.COMPLETED, JobState.PREEMPTED)):
        # cancelled: 0:15, as Slurm; a released allocation and a preempted job keep 0:0
        changes.update(exit_code=e.exit_code, signal=e.signal)
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
    if e.hold:
        v = attrs.evolve(v, held="requeue")
    if v.state is CONFIGURING:
        return _end(v, REQUEUE)
    return _stop(v, REQUEUE, "requeued")


def requeue_completing(v: JobView, e: Requeue) -> tuple[JobView, Effects]:
    """Refused while its processes are still being cleaned up."""
    raise refuse(v, e, f"job {v.id}: Job is completing; requeue it once it has ended")


def requeue_finished(v: JobView, e: Requeue) -> tuple[JobView, Effects]:
    """A finished job back to PENDING for a new run (restarts + 1); held with `hold`."""
    held = "requeue" if e.hold else v.held
    return _end(attrs.evolve(v, nodes=(), held=held), REQUEUE, exit_code=0, signal=0,
                message="")


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


def preempt(v: JobView, e: Preempt) -> tuple[JobView, Effects]:
    """Preempted: requeued (PreemptMode=REQUEUE, a job that may be) or PREEMPTED, as
    slurm_job_preempt's job_requeue or job_signal(SIGKILL, preempt); a running job's processes
    are killed and awaited (COMPLETING) first."""
    outcome = REQUEUE if e.requeue and v.requeue else JobState.PREEMPTED
    if v.state is CONFIGURING:
        return _end(v, outcome)
    return _stop(v, outcome, "preempted")
