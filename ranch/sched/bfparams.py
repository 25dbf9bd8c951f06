"""sched/backfill's settings (SchedulerParameters' bf_* keys) and its node order."""

from __future__ import annotations

import attrs

from ranch.sched.fifo import Cluster
from ranch.sched.model import Node


@attrs.frozen
class Params:
    """SchedulerParameters' bf_* keys, in Slurm's units and with its defaults; 0 means no
    limit for the bf_max_* counts (bf_max_job_test=0: every job, the "estimate for all")."""

    window: int = 1440  # bf_window, minutes
    resolution: int = 60  # bf_resolution, seconds
    max_job_test: int = 500
    max_job_user: int = 0
    max_job_part: int = 0
    min_prio_reserve: int = 0
    # ranch_estimate_all (a Ranch extension): the jobs a bf_max_* limit leaves untested get an
    # estimate too, planned after every tested job; for display only, they start nothing
    estimate_all: bool = False
    # bf_busy_nodes: a job's reservation takes nodes already in use before idle ones (starts
    # now do not: Slurm applies it when selecting resources for a later start only)
    busy_nodes: bool = False


def node_order(cluster: Cluster) -> list[Node]:
    """The nodes that take work, in placement order: by rank (up, booting, powered down),
    then by Weight and config order as partitions list them. Bit i of every mask is node i."""
    seen: dict[str, Node] = {}
    for part in sorted(cluster.members):
        for name in cluster.members[part]:
            if name in cluster.nodes:
                seen.setdefault(name, cluster.nodes[name])
    for name, n in cluster.nodes.items():
        seen.setdefault(name, n)
    up = [n for n in seen.values() if n.rank is not None]
    return sorted(up, key=lambda n: n.rank or 0)
