"""A job state's names as squeue shows and orders them: plain strings, no enum, so that rqueue
reads them without importing enum (2 ms of its start; statemachine/jobstates.py holds JobState
itself and takes these from here)."""

from __future__ import annotations

# squeue and sacct list these for `-t active` style filters (squeue's default shows them).
LISTED_ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED",
                           "REQUEUED", "REQUEUE_HOLD", "STOPPED"})

# squeue %t
COMPACT: dict[str, str] = {
    "PENDING": "PD", "CONFIGURING": "CF", "RUNNING": "R", "COMPLETING": "CG",
    "SUSPENDED": "S", "COMPLETED": "CD", "FAILED": "F", "CANCELLED": "CA", "TIMEOUT": "TO",
    "NODE_FAIL": "NF", "OUT_OF_MEMORY": "OOM", "BOOT_FAIL": "BF", "PREEMPTED": "PR",
    "DEADLINE": "DL", "REQUEUED": "RQ", "REQUEUE_HOLD": "RH", "SPECIAL_EXIT": "SE",
    "STOPPED": "ST",
}
LONG: dict[str, str] = {v: k for k, v in COMPACT.items()}
# squeue sorts "P,t,-p": partition, then the base state's number in slurm.h (PENDING first)
ORDER: dict[str, int] = {
    "PENDING": 0, "RUNNING": 1, "CONFIGURING": 1, "COMPLETING": 1, "SUSPENDED": 2,
    "COMPLETED": 3, "CANCELLED": 4, "FAILED": 5, "TIMEOUT": 6, "NODE_FAIL": 7, "PREEMPTED": 8,
    "BOOT_FAIL": 9, "DEADLINE": 10, "OUT_OF_MEMORY": 11, "REQUEUED": 0, "REQUEUE_HOLD": 0,
    "SPECIAL_EXIT": 0, "STOPPED": 1,
}
