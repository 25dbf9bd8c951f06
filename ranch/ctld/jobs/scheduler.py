"""Where a job may run: which nodes take new work, what is free on them, first fit by Weight.

Pure functions over node records and their allocations; ctld/jobs/store.py owns the queue and
acts on what these return.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs

from ranch.statemachine.model import Base, Flag
from ranch.statemachine.predicates import takes_new_work, takes_work_after_boot

# Node ranks for placement: Slurm fills powered-up nodes first, then booting ones, then powered-
# down ones (which the allocation powers up), each group by Weight then config order.
UP, BOOTING, OFF = 0, 1, 2


@attrs.frozen
class Share:
    """What one job holds on one node."""

    cpus: int
    mem: int
    gpus: tuple[int, ...] = ()


@attrs.define
class NodeUse:
    """Everything allocated on one node, summed over its jobs."""

    cpus: int = 0
    mem: int = 0
    gpus: set[int] = attrs.Factory(set)
    jobs: set[int] = attrs.Factory(set)

    def add(self, job_id: int, share: Share) -> None:
        self.cpus += share.cpus
        self.mem += share.mem
        self.gpus.update(share.gpus)
        self.jobs.add(job_id)

    def remove(self, job_id: int, share: Share) -> None:
        """Give back what `job_id` held here (nothing if it holds nothing here)."""
        if job_id not in self.jobs:
            return
        self.jobs.discard(job_id)
        self.cpus -= share.cpus
        self.mem -= share.mem
        self.gpus.difference_update(share.gpus)


@attrs.frozen
class Need:
    """A job's request per node, resolved against the config."""

    nodes: int
    cpus: int
    mem: int
    gpus: int
    exclusive: bool = False
    # sbatch -n without -N (or -N min-max): the tasks spread over as many nodes as they need,
    # each node taking what its free CPUs hold; `nodes` is then the minimum, `cpus` one task's.
    spread: bool = False
    tasks: int = 1
    cpus_per_task: int = 1
    max_nodes: int = 0  # 0: no upper bound
    # spread with --gpus-per-task: each task's GPUs (`gpus` is then one task's too), so a node
    # takes only as many tasks as its free GPUs hold as well
    gpus_per_task: int = 0


def node_rank(node: Any) -> int | None:
    """UP/BOOTING/OFF for a node that may take new work now, None for one that may not."""
    st = node.state
    if not takes_work_after_boot(st):
        return None
    if Flag.POWERING_UP in st.flags:
        return BOOTING
    if Flag.POWERED_DOWN in st.flags:
        return OFF if st.base is Base.IDLE else None
    return UP if takes_new_work(st) else None  # NO_RESPOND and the like


def capacity_fits(cfg: Any, need: Need) -> bool:
    """Could this node ever hold the job (an empty node of this configuration)?"""
    return cfg.cpus >= need.cpus and cfg.real_memory >= need.mem and cfg.gpus >= need.gpus


def share_on(cfg: Any, use: NodeUse | None, need: Need) -> Share | None:
    """The share the job would get on this node now, or None if it does not fit."""
    if need.exclusive:
        if use is not None and use.jobs:
            return None
        if not capacity_fits(cfg, need):
            return None
        mem = need.mem or cfg.real_memory
        return Share(cfg.cpus, mem, tuple(range(need.gpus)) if need.gpus else ())
    used_cpus = use.cpus if use else 0
    used_mem = use.mem if use else 0
    if cfg.cpus - used_cpus < need.cpus or cfg.real_memory - used_mem < need.mem:
        return None
    gpus: tuple[int, ...] = ()
    if need.gpus:
        taken = use.gpus if use else set()
        free = [i for i in range(cfg.gpus) if i not in taken]
        if len(free) < need.gpus:
            return None
        gpus = tuple(free[: need.gpus])
    return Share(need.cpus, need.mem, gpus)


def order(nodes: Iterable[Any]) -> Iterator[tuple[Any, int]]:
    """(node, rank) of the nodes that take work, in placement order: UP, then BOOTING, then OFF,
    each in the order `nodes` come (by Weight, then config order: JobStarts.members). Lazy: a
    placement that finds room among the first UP nodes ranks no others (10,000 nodes sorted for
    every job cost the scheduler 24 ms a job)."""
    later: list[tuple[int, Any]] = []
    for node in nodes:
        rank = node_rank(node)
        if rank == UP:
            yield node, rank
        elif rank is not None:
            later.append((rank, node))
    later.sort(key=lambda t: t[0])  # stable: Weight and config order kept within a rank
    for rank, node in later:
        yield node, rank


def place(
    need: Need,
    required: Sequence[Any],
    others: Iterable[Any],
    uses: dict[str, NodeUse],
) -> tuple[dict[str, Share] | None, str]:
    """First fit: every `required` node (-w) plus the first free ones of `others` (which come
    by Weight, then config order).

    Returns (shares by node name, "") or (None, pending reason)."""
    if need.spread:
        return _place_spread(need, required, others, uses)
    shares: dict[str, Share] = {}
    for node in required:
        if node_rank(node) is None:
            return None, "ReqNodeNotAvail"
        share = share_on(node.cfg, uses.get(node.name), need)
        if share is None:
            return None, "Resources"
        shares[node.name] = share
    if len(shares) >= need.nodes:
        return shares, ""
    usable = 0
    for node, _rank in order(others):
        if node.name in shares:
            continue
        if capacity_fits(node.cfg, need):
            usable += 1
        share = share_on(node.cfg, uses.get(node.name), need)
        if share is None:
            continue
        shares[node.name] = share
        if len(shares) >= need.nodes:
            return shares, ""
    if usable + len(required) < need.nodes:
        return None, "ReqNodeNotAvail"  # not enough nodes in service to ever hold it now
    return None, "Resources"


def cpus_per_node(ntasks: int, cpus_per_task: int, nodes: int) -> int:
    return math.ceil(ntasks / max(nodes, 1)) * cpus_per_task


def task_capacity(cfg: Any, need: Need) -> int:
    """Tasks of a spread job an empty node of this configuration could ever hold."""
    if not capacity_fits(cfg, need):
        return 0
    held = cfg.cpus // need.cpus_per_task
    return min(held, cfg.gpus // need.gpus_per_task) if need.gpus_per_task else held


def _place_spread(
    need: Need,
    required: Sequence[Any],
    others: Iterable[Any],
    uses: dict[str, NodeUse],
) -> tuple[dict[str, Share] | None, str]:
    """First fit for tasks over nodes: each node in placement order takes as many tasks as its
    free CPUs hold (keeping one for each node still needed to reach the minimum)."""
    shares: dict[str, Share] = {}
    left = need.tasks

    def take(node: Any) -> bool:
        nonlocal left
        use = uses.get(node.name)
        one = share_on(node.cfg, use, need)  # one task, with the node's memory and GPUs
        if one is None:
            return False
        if need.exclusive:
            free = node.cfg.cpus // need.cpus_per_task
        else:
            free = (node.cfg.cpus - (use.cpus if use else 0)) // need.cpus_per_task
        gpus = one.gpus
        if need.gpus_per_task:
            taken = use.gpus if use and not need.exclusive else set()
            idle = [i for i in range(node.cfg.gpus) if i not in taken]
            free = min(free, len(idle) // need.gpus_per_task)
        reserve = max(0, need.nodes - len(shares) - 1)
        k = max(1, min(free, left - reserve))
        if need.gpus_per_task:
            gpus = tuple(idle[: k * need.gpus_per_task])
        cpus = one.cpus if need.exclusive else k * need.cpus_per_task
        shares[node.name] = Share(cpus, one.mem, gpus)
        left -= k
        return True

    for node in required:
        if node_rank(node) is None:
            return None, "ReqNodeNotAvail"
        if not take(node):
            return None, "Resources"
    if left <= 0 and len(shares) >= need.nodes:
        return shares, ""
    ranked: Iterable[tuple[Any, int]] = order(others)
    if not shares and need.nodes <= 1 and not need.exclusive:
        # one node that holds every task now is taken alone, as cons_tres does (measured:
        # -n 2 beside a 1-CPU job on c1 runs on c2 alone, not on c1 and c2); the nodes
        # looked at are kept for the first fit below (`order` is lazy)
        seen = []
        for node, rank in ranked:
            seen.append((node, rank))
            use = uses.get(node.name)
            idle_gpus = node.cfg.gpus - len(use.gpus if use else ())
            if (share_on(node.cfg, use, need) is not None and need.tasks * need.cpus_per_task
                    <= node.cfg.cpus - (use.cpus if use else 0)
                    and need.tasks * need.gpus_per_task <= idle_gpus):
                take(node)
                return shares, ""
        ranked = seen
    usable = 0
    for node, _rank in ranked:
        if node.name in shares:
            continue
        if capacity_fits(node.cfg, need):
            usable += 1
        if need.max_nodes and len(shares) >= need.max_nodes:
            continue  # at the maximum: only counting what could ever hold it
        take(node)
        if left <= 0 and len(shares) >= need.nodes:
            return shares, ""
    if usable + len(required) < need.nodes:
        return None, "ReqNodeNotAvail"
    return None, "Resources"
