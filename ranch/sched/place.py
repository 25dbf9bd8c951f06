"""Where a job may run: what is free on a node, first fit by Weight, tasks spread over nodes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ranch.sched.model import UP, Need, Node, NodeUse, Shape, Share

Placed = tuple[dict[str, Share] | None, str]  # (shares by node name, "") or (None, reason)


def capacity_fits(shape: Shape, need: Need) -> bool:
    """Could this node ever hold the job (an empty node of this configuration)?"""
    return shape.cpus >= need.cpus and shape.real_memory >= need.mem and shape.gpus >= need.gpus


def share_on(node: Shape, use: NodeUse | None, need: Need) -> Share | None:
    """The share the job would get on this node now, or None if it does not fit."""
    if need.exclusive:
        if use is not None and use.jobs:
            return None
        if not capacity_fits(node, need):
            return None
        mem = need.mem or node.real_memory
        return Share(node.cpus, mem, tuple(range(need.gpus)) if need.gpus else ())
    used_cpus = use.cpus if use else 0
    used_mem = use.mem if use else 0
    if node.cpus - used_cpus < need.cpus or node.real_memory - used_mem < need.mem:
        return None
    gpus: tuple[int, ...] = ()
    if need.gpus:
        taken = use.gpus if use else set()
        free = [i for i in range(node.gpus) if i not in taken]
        if len(free) < need.gpus:
            return None
        gpus = tuple(free[: need.gpus])
    return Share(need.cpus, need.mem, gpus)


def order(nodes: Iterable[Node]) -> Iterator[tuple[Node, int]]:
    """(node, rank) of the nodes that take work, in placement order: UP, then BOOTING, then OFF,
    each in the order `nodes` come (by Weight, then config order). Lazy: a placement that finds
    room among the first UP nodes ranks no others (10,000 nodes sorted for every job cost the
    scheduler 24 ms a job)."""
    later: list[tuple[int, Node]] = []
    for node in nodes:
        rank = node.rank
        if rank == UP:
            yield node, rank
        elif rank is not None:
            later.append((rank, node))
    later.sort(key=lambda t: t[0])  # stable: Weight and config order kept within a rank
    for rank, node in later:
        yield node, rank


def place(need: Need, required: Sequence[Node], others: Iterable[Node],
          uses: Mapping[str, NodeUse]) -> Placed:
    """First fit: every `required` node (-w) plus the first free ones of `others` (which come
    by Weight, then config order).

    Returns (shares by node name, "") or (None, pending reason)."""
    if need.spread:
        return _place_spread(need, required, others, uses)
    shares: dict[str, Share] = {}
    for node in required:
        if node.rank is None:
            return None, "ReqNodeNotAvail"
        share = share_on(node, uses.get(node.name), need)
        if share is None:
            return None, "Resources"
        shares[node.name] = share
    if len(shares) >= need.nodes:
        return shares, ""
    usable = 0
    for node, _rank in order(others):
        if node.name in shares:
            continue
        if capacity_fits(node, need):
            usable += 1
        share = share_on(node, uses.get(node.name), need)
        if share is None:
            continue
        shares[node.name] = share
        if len(shares) >= need.nodes:
            return shares, ""
    return None, _short(usable + len(required), need)


def _short(usable: int, need: Need) -> str:
    if usable < need.nodes:
        return "ReqNodeNotAvail"  # not enough nodes in service to ever hold it now
    return "Resources"


def cpus_per_node(ntasks: int, cpus_per_task: int, nodes: int) -> int:
    return math.ceil(ntasks / max(nodes, 1)) * cpus_per_task


def task_capacity(shape: Shape, need: Need) -> int:
    """Tasks of a spread job an empty node of this configuration could ever hold."""
    if not capacity_fits(shape, need):
        return 0
    held = shape.cpus // need.cpus_per_task
    return min(held, shape.gpus // need.gpus_per_task) if need.gpus_per_task else held


class _Spread:
    """Tasks of one job being laid over nodes: what each node took, and how many are left."""

    def __init__(self, need: Need, uses: Mapping[str, NodeUse]) -> None:
        self.need = need
        self.uses = uses
        self.shares: dict[str, Share] = {}
        self.left = need.tasks

    @property
    def done(self) -> bool:
        return self.left <= 0 and len(self.shares) >= self.need.nodes

    def take(self, node: Node) -> bool:
        """As many tasks on `node` as its free CPUs (and GPUs) hold, keeping one for each
        node still needed to reach the minimum; False if not even one fits."""
        need, use = self.need, self.uses.get(node.name)
        one = share_on(node, use, need)  # one task, with the node's memory and GPUs
        if one is None:
            return False
        if need.exclusive:
            free = node.cpus // need.cpus_per_task
        else:
            free = (node.cpus - (use.cpus if use else 0)) // need.cpus_per_task
        gpus = one.gpus
        idle: list[int] = []
        if need.gpus_per_task:
            taken = use.gpus if use and not need.exclusive else set()
            idle = [i for i in range(node.gpus) if i not in taken]
            free = min(free, len(idle) // need.gpus_per_task)
        reserve = max(0, need.nodes - len(self.shares) - 1)
        k = max(1, min(free, self.left - reserve))
        if need.gpus_per_task:
            gpus = tuple(idle[: k * need.gpus_per_task])
        cpus = one.cpus if need.exclusive else k * need.cpus_per_task
        self.shares[node.name] = Share(cpus, one.mem, gpus)
        self.left -= k
        return True

    def holds_all(self, node: Node) -> bool:
        """Whether this node alone holds every task now."""
        need, use = self.need, self.uses.get(node.name)
        idle_gpus = node.gpus - len(use.gpus if use else ())
        return (share_on(node, use, need) is not None
                and need.tasks * need.cpus_per_task <= node.cpus - (use.cpus if use else 0)
                and need.tasks * need.gpus_per_task <= idle_gpus)


def _place_spread(need: Need, required: Sequence[Node], others: Iterable[Node],
                  uses: Mapping[str, NodeUse]) -> Placed:
    """First fit for tasks over nodes: each node in placement order takes as many tasks as its
    free CPUs hold (keeping one for each node still needed to reach the minimum)."""
    lay = _Spread(need, uses)
    for node in required:
        if node.rank is None:
            return None, "ReqNodeNotAvail"
        if not lay.take(node):
            return None, "Resources"
    if lay.done:
        return lay.shares, ""
    ranked: Iterable[tuple[Node, int]] = order(others)
    if not lay.shares and need.nodes <= 1 and not need.exclusive:
        # one node that holds every task now is taken alone, as cons_tres does (measured:
        # -n 2 beside a 1-CPU job on c1 runs on c2 alone, not on c1 and c2); the nodes
        # looked at are kept for the first fit below (`order` is lazy)
        seen = []
        for node, rank in ranked:
            seen.append((node, rank))
            if lay.holds_all(node):
                lay.take(node)
                return lay.shares, ""
        ranked = seen
    return _spread_first_fit(lay, ranked, len(required))


def _spread_first_fit(lay: _Spread, ranked: Iterable[tuple[Node, int]], required: int
                      ) -> Placed:
    """The rest of a spread job's tasks over the ranked nodes, first fit."""
    need = lay.need
    usable = 0
    for node, _rank in ranked:
        if node.name in lay.shares:
            continue
        if capacity_fits(node, need):
            usable += 1
        if need.max_nodes and len(lay.shares) >= need.max_nodes:
            continue  # at the maximum: only counting what could ever hold it
        lay.take(node)
        if lay.done:
            return lay.shares, ""
    return None, _short(usable + required, need)
