"""The job store and node records as ranch/sched's data, read lazily and kept between passes."""

# Lazily: a pass that starts its job on the first node looks at no other node (10,000 nodes
# made into views for every submission's pass would cost more than the pass).

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ranch.ctld.jobs import partlimits
from ranch.ctld.jobs.jobrecord import Job
from ranch.sched.model import Holder, Node, Partition, Pending, rank_of, unavailable


class NodeViews(Mapping[str, Node]):
    """Each node record as a sched Node, rebuilt only when its state or config object changed
    (both are frozen and replaced on change), so a view read after a start is current."""

    def __init__(self) -> None:
        self.records: Mapping[str, Any] = {}
        self._kept: dict[str, tuple[object, object, Node]] = {}

    def over(self, records: Mapping[str, Any]) -> NodeViews:
        """Read these records from now on (the registry's node table)."""
        self.records = records
        if len(self._kept) > 2 * len(records) + 64:
            self._kept.clear()  # nodes that went (dynamic ones, a reconfigure)
        return self

    def __getitem__(self, name: str) -> Node:
        rec = self.records[name]
        st, cfg = rec.state, rec.cfg
        hit = self._kept.get(name)
        if hit is not None and hit[0] is st and hit[1] is cfg:
            return hit[2]
        view = Node(name, cfg.cpus, cfg.real_memory, cfg.gpus, frozenset(cfg.features),
                    rank_of(st), unavailable(st))
        self._kept[name] = (st, cfg, view)
        return view

    def __contains__(self, name: object) -> bool:
        return name in self.records

    def __iter__(self) -> Iterator[str]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


class Holders(dict[int, Holder]):
    """Of each job in the store, what --exclusive=user asks of the nodes it holds: made the
    first time a pass asks (a plain dict after that: a placement asks for every job on every
    node it looks at); a job the store no longer has is a KeyError. One for each pass."""

    def __init__(self, jobs: Mapping[int, Job]) -> None:
        super().__init__()
        self.jobs = jobs

    def __missing__(self, job_id: int) -> Holder:
        req = self.jobs[job_id].req
        got = self[job_id] = Holder(req.uid, req.oversubscribe == "USER")
        return got


class Partitions(dict[str, Partition]):
    """The config's partitions with their members' size now, each made the first time the
    pass asks (a plain dict after that); an unknown name is a KeyError. One for each pass."""

    def __init__(self, configs: Mapping[str, Any], members: Callable[[Any], Sequence[Any]],
                 sizes: partlimits.Sizes) -> None:
        super().__init__()
        self.configs = configs
        self.members = members
        self.sizes = sizes

    def __missing__(self, name: str) -> Partition:
        pc = self.configs[name]
        nodes = self.members(pc)
        size = self.sizes.of(name, nodes, (n.cfg.cpus for n in nodes))
        got = self[name] = Partition(name, pc.state == "UP", pc.max_time, size)
        return got


class MemberNames(Mapping[str, Sequence[str]]):
    """Each partition's node names in placement order, kept while its member list is the
    same object (JobStarts.members keeps that until the membership changes)."""

    def __init__(self) -> None:
        self.configs: Mapping[str, Any] = {}
        self.members: Callable[[Any], Sequence[Any]] = lambda pc: ()
        self._kept: dict[str, tuple[object, list[str]]] = {}

    def over(self, configs: Mapping[str, Any], members: Callable[[Any], Sequence[Any]]
             ) -> MemberNames:
        self.configs, self.members = configs, members
        return self

    def __getitem__(self, name: str) -> Sequence[str]:
        records = self.members(self.configs[name])
        hit = self._kept.get(name)
        if hit is not None and hit[0] is records:
            return hit[1]
        names = [n.name for n in records]
        if len(self._kept) >= 256:
            self._kept.clear()
        self._kept[name] = (records, names)
        return names

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self.configs else default

    def __contains__(self, name: object) -> bool:
        return name in self.configs

    def __iter__(self) -> Iterator[str]:
        return iter(self.configs)

    def __len__(self) -> int:
        return len(self.configs)


class Windows(dict[int | None, frozenset[str]]):
    """For each time limit a pass asks about, the nodes the reservations keep such a job off
    now (asked of them once a pass: a plain dict after that)."""

    def __init__(self, blocked: Callable[[float | None, float], frozenset[str]], now: float
                 ) -> None:
        super().__init__()
        self.blocked = blocked
        self.now = now

    def __missing__(self, limit: int | None) -> frozenset[str]:
        got = self[limit] = self.blocked(None if limit is None else limit * 60.0, self.now)
        return got


def pending(job: Job) -> Pending:
    """The job's request as it stands (its partition, need and nodes), for the core."""
    req = job.req
    return Pending(id=job.id, partition=job.partition, need=job.need, priority=job.priority,
                   time_limit=job.time_limit, req_nodes=job.req_nodes, exc_nodes=job.exc_nodes,
                   constraint=req.constraint or "", uid=req.uid,
                   user_exclusive=req.oversubscribe == "USER", ntasks=req.ntasks,
                   cpus_per_task=req.cpus_per_task, num_nodes=req.num_nodes)


class Views:
    """What JobStarts keeps between passes to show the core the records: the node views, the
    partitions' member names, and each pending job's view while what it is made of is the
    same (a pass looks at every pending job; building each anew cost more than the look)."""

    def __init__(self) -> None:
        self.nodes = NodeViews()
        self.members = MemberNames()
        self._pending: dict[int, tuple[tuple[object, ...], Pending]] = {}

    def pending(self, job: Job) -> Pending:
        key = (job.req, job.need, job.partition, job.priority, job.time_limit, job.req_nodes,
               job.exc_nodes)
        hit = self._pending.get(job.id)
        if hit is not None and hit[0] == key:
            return hit[1]
        view = pending(job)
        self._pending[job.id] = (key, view)
        return view

    def prune(self, queue: Sequence[Job]) -> None:
        """Forget the views of jobs no longer pending, once they outnumber those that are."""
        if len(self._pending) > 2 * len(queue) + 1024:
            self._pending = {j.id: hit for j in queue if (hit := self._pending.get(j.id))}
