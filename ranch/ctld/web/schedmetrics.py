"""The scheduler's families of /metrics: sdiag's figures (ctld/jobs/schedstats.py) under the names
prometheus-slurm-exporter gives them (vpenso/prometheus-slurm-exporter scheduler.go, which reads
sdiag): cycle times in microseconds, as sdiag prints them. Its `slurm_scheduler_threads`,
`_queue_size` and `_dbd_queue_size` are left out: rctld has no agent threads or queues to count."""

from __future__ import annotations

from typing import Any

_PREFIX = "Information provided by the Slurm sdiag command, "
# (metric, sdiag field under slurmrestd's name, help after the exporter's prefix)
FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("slurm_scheduler_last_cycle", "schedule_cycle_last",
     "scheduler last cycle time in (microseconds)"),
    ("slurm_scheduler_mean_cycle", "schedule_cycle_mean",
     "scheduler mean cycle time in (microseconds)"),
    ("slurm_scheduler_cycle_per_minute", "schedule_cycle_per_minute",
     "number scheduler cycles per minute"),
    ("slurm_scheduler_backfill_last_cycle", "bf_cycle_last",
     "scheduler backfill last cycle time in (microseconds)"),
    ("slurm_scheduler_backfill_mean_cycle", "bf_cycle_mean",
     "scheduler backfill mean cycle time in (microseconds)"),
    ("slurm_scheduler_backfill_depth_mean", "bf_depth_mean", "scheduler backfill mean depth"),
    ("slurm_scheduler_backfilled_jobs_since_start_total", "bf_backfilled_jobs",
     "number of jobs started thanks to backfilling since last slurm start"),
    ("slurm_scheduler_backfilled_jobs_since_cycle_total", "bf_last_backfilled_jobs",
     "number of jobs started thanks to backfilling since last time stats where reset"),
    ("slurm_scheduler_backfilled_heterogeneous_total", "bf_backfilled_het_jobs",
     "number of heterogeneous job components started thanks to backfilling since last Slurm "
     "start"),
)


def scheduler_text(stats: dict[str, Any]) -> str:
    return "".join(f"# HELP {name} {_PREFIX}{help_text}\n# TYPE {name} gauge\n"
                   f"{name} {int(stats[field])}\n" for name, field, help_text in FAMILIES)
