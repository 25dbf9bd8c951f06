"""A job against its partition's limits, as slurmctld 22.05 judges it (MaxTime, nodes, CPUs)."""

from __future__ import annotations

from ranch.sched.model import Partition, Pending

# (the pending reason under EnforcePartLimits=NO, slurmctld's refusal under ALL/ANY)
TIME = ("PartitionTimeLimit", "Requested time limit is invalid (missing or exceeds some limit)")
NODES = ("PartitionNodeLimit", "Node count specification invalid")
CPUS = ("PartitionConfig", "More processors requested than permitted")


def over(time_limit: int | None, nodes: int, cpus: int, max_time: int | None,
         size: tuple[int, int]) -> tuple[str, str] | None:
    """The partition limit the job exceeds (reason, refusal), or None. `nodes` and `cpus`
    are the job's whole ask; `size` the partition's (node count, CPUs)."""
    if max_time is not None and (time_limit is None or time_limit > max_time):
        return TIME
    if nodes > size[0]:
        return NODES
    if cpus > size[1]:
        return CPUS
    return None


def job_over(job: Pending, part: Partition) -> str:
    """The scheduling pass's question: the reason a pending job waits in this partition for
    its limits, or ""."""
    need = job.need
    cpus = job.ntasks * job.cpus_per_task if need.spread else need.cpus * need.nodes
    # the nodes asked for (-N, -w), not those -n's tasks would take: `-n 5` on two 2-CPU
    # nodes is PartitionConfig in slurmctld, not PartitionNodeLimit
    nodes = max(job.num_nodes, len(job.req_nodes))
    got = over(job.time_limit, nodes, cpus, part.max_time, part.size)
    return got[0] if got else ""
