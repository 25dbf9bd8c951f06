"""A batch job's states, named once: Slurm's names, squeue's compact codes and sort order.

Small and import-free on purpose: rqueue, the web page and rnoded read these names without
loading the job table (statemachine/jobtable.py), which decides every change between them.
"""

from __future__ import annotations

from enum import StrEnum

from ranch.statemachine.finalstates import FINAL_STATES
from ranch.statemachine.jobcodes import COMPACT, LISTED_ACTIVE, LONG, ORDER

__all__ = ["ACTIVE", "COMPACT", "COMPLETING", "CONFIGURING", "END_REPORTS", "FINAL",
           "LISTED_ACTIVE", "LONG", "ORDER", "PENDING", "RUNNING", "JobState", "end_reason"]


class JobState(StrEnum):
    """Slurm 22.05's job states (slurm.h job_states and the flags squeue shows as states)."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"  # allocated; its nodes are booting (powering up)
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"  # ended; its processes are still being cleaned up somewhere
    SUSPENDED = "SUSPENDED"
    COMPLETED = "COMPLETED"  # the batch script exited 0
    FAILED = "FAILED"  # it exited non-zero, was killed by a signal nobody sent, or never launched
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BOOT_FAIL = "BOOT_FAIL"
    PREEMPTED = "PREEMPTED"
    DEADLINE = "DEADLINE"
    REQUEUED = "REQUEUED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    STOPPED = "STOPPED"


PENDING = JobState.PENDING
CONFIGURING = JobState.CONFIGURING
RUNNING = JobState.RUNNING
COMPLETING = JobState.COMPLETING

# States in which a job holds nodes (its processes run or are being cleaned up).
ACTIVE = frozenset({CONFIGURING, RUNNING, COMPLETING})
# States that end a job: it holds nothing and changes no more (except by requeue).
FINAL = frozenset(JobState(name) for name in FINAL_STATES)
def end_reason(state: str, exit_code: int, signal: int, pending_reason: str) -> str:
    """The Reason a job keeps once it ended, as slurmctld 22.05 sets it (job_mgr.c
    _job_complete; checked against a real Slurm by tests/conformance/): a non-zero exit is
    NonZeroExitCode, a script killed by a signal JobLaunchFailure, the time limit TimeLimit, a
    job cancelled before it ran keeps the reason it waited for (JobHeldUser...)."""
    if state == JobState.FAILED:
        if pending_reason == "BadConstraints":  # salloc -I refused before it ran (NotNow)
            return pending_reason
        return "NonZeroExitCode" if exit_code else ("JobLaunchFailure" if signal else "None")
    if state == JobState.TIMEOUT:  # an allocation's silent command: InactiveLimit (Inactive)
        return "InactiveLimit" if pending_reason == "InactiveLimit" else "TimeLimit"
    if state == JobState.NODE_FAIL:
        return "NodeDown"
    if state == JobState.OUT_OF_MEMORY:
        return "OutOfMemory"
    if state == JobState.CANCELLED and pending_reason:
        return pending_reason
    return "None"


# How a node's JobEnd.state ends the job (LAUNCH_FAILED: it never started, which Slurm shows
# as FAILED with the launch error in its reason).
END_REPORTS: dict[str, JobState] = {
    "COMPLETED": JobState.COMPLETED, "FAILED": JobState.FAILED, "TIMEOUT": JobState.TIMEOUT,
    "CANCELLED": JobState.CANCELLED, "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "LAUNCH_FAILED": JobState.FAILED,
}
