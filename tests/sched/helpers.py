"""Plain data for the scheduling core's tests: nodes, partitions and jobs in a few words."""

from __future__ import annotations

from collections.abc import Iterable

from ranch.sched.fifo import Cluster
from ranch.sched.model import UP, Holder, Need, Node, NodeUse, Partition, Pending


def node(name: str, cpus: int = 4, mem: int = 1000, gpus: int = 0, features: Iterable[str] = (),
         rank: int | None = UP, unavailable: bool = False) -> Node:
    return Node(name, cpus, mem, gpus, frozenset(features), rank, unavailable)


def need(nodes: int = 1, cpus: int = 1, mem: int = 0, gpus: int = 0, **kw) -> Need:
    return Need(nodes, cpus, mem, gpus, **kw)


def job(jid: int, part: str = "p", **kw) -> Pending:
    kw.setdefault("need", need())
    return Pending(id=jid, partition=part, **kw)


def cluster(nodes: list[Node], parts: dict[str, list[str]] | None = None,
            uses: dict[str, NodeUse] | None = None, holders: dict[int, Holder] | None = None,
            down: Iterable[str] = (), max_time: dict[str, int] | None = None,
            windows: dict[int | None, frozenset[str]] | None = None) -> Cluster:
    """`parts`: partition -> member names in placement order (default: one "p" of all)."""
    parts = parts if parts is not None else {"p": [n.name for n in nodes]}
    by_name = {n.name: n for n in nodes}
    partitions = {
        name: Partition(name, name not in down, (max_time or {}).get(name),
                        (len(members), sum(by_name[m].cpus for m in members)))
        for name, members in parts.items()}
    return Cluster(nodes=by_name, partitions=partitions, members=parts, uses=uses or {},
                   holders=holders or {}, pending_parts=set(parts), windows=windows or {})


def used(cpus: int = 0, mem: int = 0, gpus: Iterable[int] = (), jobs: Iterable[int] = (1,)
         ) -> NodeUse:
    return NodeUse(cpus, mem, set(gpus), set(jobs))
