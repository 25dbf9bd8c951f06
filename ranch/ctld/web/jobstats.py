"""Job counts for the page header and the job families of /metrics, from the controller's job
records (ranch.ctld.jobs.joblisting.JobListing.record, the records rqueue gets).

Names, looked up in the projects' sources: Slurm 25.11's metrics/openmetrics plugin
(SchedMD/slurm src/plugins/metrics/openmetrics/openmetrics.c, metrics_p_parse_jobs_metrics):
`slurm_jobs`, `slurm_jobs_<state>` and `slurm_jobs_cpus_alloc|gpus_alloc|memory_alloc|
nodes_alloc`; prometheus-slurm-exporter (vpenso/prometheus-slurm-exporter queue.go):
`slurm_queue_<state>` by squeue's state, and `slurm_queue_pending_dependency`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ranch.statemachine.jobstates import ACTIVE, FINAL

MIB = 1024 * 1024
_ACTIVE, _ENDED = ACTIVE, FINAL  # named once, in statemachine/jobstates.py

# Slurm's per-state job gauges: (metric suffix, help, Ranch job state or None = never here).
_SLURM_STATES: tuple[tuple[str, str, str | None], ...] = (
    ("bootfail", "Number of jobs in BootFail state", None),
    ("cancelled", "Number of jobs in Cancelled state", "CANCELLED"),
    ("completed", "Number of jobs in Completed state", "COMPLETED"),
    ("completing", "Number of jobs in Completing state", "COMPLETING"),
    ("configuring", "Number of jobs in Configuring state", "CONFIGURING"),
    ("deadline", "Number of jobs in Deadline state", None),
    ("expediting", "Number of jobs in Expediting state", None),
    ("failed", "Number of jobs in Failed state", "FAILED"),
    ("fed_requeued", "Number of jobs requeued in a federation", None),
    ("node_failed", "Number of jobs in Node Failed state", "NODE_FAIL"),
    ("outofmemory", "Number of jobs in Out of Memory state", "OUT_OF_MEMORY"),
    ("pending", "Number of jobs in Pending state", "PENDING"),
    ("powerup_node", "Number of jobs in PowerUp Node state", None),
    ("preempted", "Number of jobs in Preempted state", None),
    ("requeued", "Number of jobs in Requeued state", None),
    ("resizing", "Number of jobs in Resizing state", None),
    ("revoked", "Number of jobs in Revoked state", None),
    ("running", "Number of jobs in Running state", "RUNNING"),
    ("signaling", "Number of jobs being signaled", None),
    ("stageout", "Number of jobs in StageOut state", None),
    ("suspended", "Number of jobs in Suspended state", None),
    ("timeout", "Number of jobs in Timeout state", "TIMEOUT"),
)
# The exporter's queue gauges: (suffix, help, squeue state or None = never here).
_QUEUE_STATES: tuple[tuple[str, str, str | None], ...] = (
    ("pending", "Pending jobs in queue", "PENDING"),
    ("running", "Running jobs in the cluster", "RUNNING"),
    ("suspended", "Suspended jobs in the cluster", None),
    ("cancelled", "Cancelled jobs in the cluster", "CANCELLED"),
    ("completing", "Completing jobs in the cluster", "COMPLETING"),
    ("completed", "Completed jobs in the cluster", "COMPLETED"),
    ("configuring", "Configuring jobs in the cluster", "CONFIGURING"),
    ("failed", "Number of failed jobs", "FAILED"),
    ("timeout", "Jobs stopped by timeout", "TIMEOUT"),
    ("preempted", "Number of preempted jobs", None),
    ("node_fail", "Number of jobs stopped due to node fail", "NODE_FAIL"),
)


# the fields of a job's record counts() reads (ctld/web/queuecache.py keeps these alone)
COUNTED = ("state", "held", "reason", "node_count", "cpus", "gpus_per_node", "mem_per_node")


def counts(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Jobs per state (squeue's long names) plus `total`, `held`, `dependency` (pending on a
    dependency) and what active jobs hold: `cpus_alloc`, `gpus_alloc`, `memory_alloc` (bytes),
    `nodes_alloc`."""
    out: dict[str, int] = {"total": 0, "held": 0, "dependency": 0, "cpus_alloc": 0,
                           "gpus_alloc": 0, "memory_alloc": 0, "nodes_alloc": 0}
    for j in records:
        st = j["state"]
        out["total"] += 1
        out[st] = out.get(st, 0) + 1
        if st == "PENDING":
            out["held"] += bool(j.get("held"))
            out["dependency"] += j.get("reason") == "Dependency"
        elif st in _ACTIVE:
            nodes = int(j.get("node_count") or 0)
            out["nodes_alloc"] += nodes
            out["cpus_alloc"] += int(j.get("cpus") or 0)
            out["gpus_alloc"] += int(j.get("gpus_per_node") or 0) * nodes
            out["memory_alloc"] += int(j.get("mem_per_node") or 0) * nodes * MIB
    return out


def _gauge(lines: list[str], name: str, help_text: str, value: int) -> None:
    lines.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n{name} {value}\n")


def metrics_text(c: dict[str, int]) -> str:
    """The job families of /metrics for counts() `c`."""
    lines: list[str] = []
    _gauge(lines, "slurm_jobs", "Total number of jobs", c["total"])
    for suffix, help_text, state in _SLURM_STATES:
        _gauge(lines, f"slurm_jobs_{suffix}", help_text, c.get(state, 0) if state else 0)
    _gauge(lines, "slurm_jobs_hold", "Number of jobs in Hold state", c["held"])
    # Slurm counts a job as started once it left PENDING, finished once it ended.
    _gauge(lines, "slurm_jobs_started", "Number of started jobs",
           c["total"] - c.get("PENDING", 0))
    _gauge(lines, "slurm_jobs_finished", "Number of finished jobs",
           sum(c.get(s, 0) for s in _ENDED))
    _gauge(lines, "slurm_jobs_cpus_alloc", "Total number of Cpus allocated by jobs",
           c["cpus_alloc"])
    _gauge(lines, "slurm_jobs_gpus_alloc", "Total number of GPUs allocated by jobs",
           c["gpus_alloc"])
    _gauge(lines, "slurm_jobs_memory_alloc", "Total memory bytes allocated by jobs",
           c["memory_alloc"])
    _gauge(lines, "slurm_jobs_nodes_alloc", "Total number of nodes allocated by jobs",
           c["nodes_alloc"])
    for suffix, help_text, state in _QUEUE_STATES:
        _gauge(lines, f"slurm_queue_{suffix}", help_text, c.get(state, 0) if state else 0)
    _gauge(lines, "slurm_queue_pending_dependency",
           "Pending jobs because of dependency in queue", c["dependency"])
    return "".join(lines)
