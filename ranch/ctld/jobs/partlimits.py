"""A job against its partitions' limits, as slurmctld 22.05 judges it: a time limit over
MaxTime, more nodes than the partition has, more CPUs than its nodes hold together. With
EnforcePartLimits=NO (the default) such a job is queued and waits with the limit's reason; ALL
refuses it if any partition it names is exceeded, ANY if every one is. A job naming several
partitions (`-p debug,main`) runs in the first of them that can start it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

# (the pending reason under NO, slurmctld's refusal under ALL/ANY)
TIME = ("PartitionTimeLimit", "Requested time limit is invalid (missing or exceeds some limit)")
NODES = ("PartitionNodeLimit", "Node count specification invalid")
CPUS = ("PartitionConfig", "More processors requested than permitted")


def over(time_limit: int | None, nodes: int, cpus: int, pc: Any, size: tuple[int, int]
         ) -> tuple[str, str] | None:
    """The partition limit the job exceeds (reason, refusal), or None. `nodes` and `cpus`
    are the job's whole ask; `size` the partition's (node count, CPUs), from Sizes."""
    if pc.max_time is not None and (time_limit is None or time_limit > pc.max_time):
        return TIME
    if nodes > size[0]:
        return NODES
    if cpus > size[1]:
        return CPUS
    return None


def job_over(job: Any, pc: Any, size: tuple[int, int]) -> str:
    """The scheduling pass's question: the reason a pending job waits in this partition for
    its limits, or ""."""
    need = job.need
    cpus = job.req.ntasks * job.req.cpus_per_task if need.spread else need.cpus * need.nodes
    # the nodes asked for (-N, -w), not those -n's tasks would take: `-n 5` on two 2-CPU
    # nodes is PartitionConfig in slurmctld, not PartitionNodeLimit
    nodes = max(job.req.num_nodes, len(job.req_nodes))
    got = over(job.time_limit, nodes, cpus, pc, size)
    return got[0] if got else ""


class Sizes:
    """Each partition's (node count, CPUs), kept while its members are the same object (the
    pass and the submission checks ask once a job: summing 10,000 nodes each time would make
    every pass O(jobs x nodes))."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[object, tuple[int, int]]] = {}

    def of(self, name: str, members: object, node_cpus: Iterable[int]) -> tuple[int, int]:
        hit = self._kept.get(name)
        if hit is not None and hit[0] is members:
            return hit[1]
        cpus = list(node_cpus)
        got = (len(cpus), sum(cpus))
        if len(self._kept) >= 256:
            self._kept.clear()
        self._kept[name] = (members, got)
        return got


def choose(results: Sequence[Any], enforce: str) -> list[Any] | Any:
    """From each named partition's check (a Checked, with `over` set where it exceeds a
    limit, or an m.Error), the partitions the job may wait in, in order; or the refusal."""
    fits = [r for r in results if not _refused(r) and not r.over]
    exceeding = [r for r in results if not _refused(r) and r.over]
    errors = [r for r in results if _refused(r)]
    if enforce == "ALL" and exceeding:
        return _limit_error(exceeding[0])
    if fits:  # NO: it may wait in those it exceeds too (measured: it runs where it fits)
        return fits if enforce == "ANY" else [r for r in results if not _refused(r)]
    if errors:  # a partition that can never hold it outweighs one it only exceeds
        return errors[0]
    if enforce == "ANY":
        return _limit_error(exceeding[0])
    return exceeding


def _refused(result: Any) -> bool:
    return not hasattr(result, "over")


def _limit_error(checked: Any) -> Any:
    from ranch.protocol import messages as m

    return m.Error("bad_request", checked.over[1])
