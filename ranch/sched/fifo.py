"""The FIFO pass (sched/builtin): a partition stops at its first job waiting for resources."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

import attrs

from ranch.conf import hostlist
from ranch.sched.features import NodeFilter
from ranch.sched.limits import job_over
from ranch.sched.model import (
    Decision,
    Holder,
    Node,
    NodeUse,
    Partition,
    Pending,
    Share,
    Start,
    Wait,
    take,
)
from ranch.sched.place import place

RESERVED = "ReqNodeNotAvail, May be reserved for other job"  # slurmctld's words
EMPTY: frozenset[str] = frozenset()


@attrs.frozen
class Cluster:
    """What a pass places on. Mappings, read at each step: the controller hands live views
    (a start it applied shows in the next step), a caller with plain dicts uses schedule()."""

    nodes: Mapping[str, Node]
    partitions: Mapping[str, Partition]
    # partition -> its nodes (each one of `nodes`) by Weight, then config order
    members: Mapping[str, Sequence[str]]
    uses: Mapping[str, NodeUse]  # what running jobs (and this pass's starts) hold
    holders: Mapping[int, Holder]  # job id -> its --exclusive=user side, for jobs on nodes
    pending_parts: Collection[str]  # the partitions that have pending jobs
    # time limit (minutes, None: none) -> the nodes a job of that limit may not start on now:
    # those of the windows (reservations) it would cross; a limit not there: none
    windows: Mapping[int | None, frozenset[str]] = attrs.field(factory=dict)


class Pass:
    """One FIFO pass in progress: which partitions wait on a job ahead. The caller offers the
    pending jobs in priority order while `stopped` is false, applies each Start to the
    cluster's `uses` before the next job, and keeps each Wait's reason on its job."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.blocked: set[str] = set()  # partitions whose first waiting job waits on Resources
        # every partition with pending jobs waits on a job ahead: nothing below may start
        self.stopped = False

    def consider(self, job: Pending, alternatives: Iterable[Pending] = ()) -> Decision:
        """Start the job in its partition now or, failing that, in the first of `alternatives`
        (-p a,b: the same job resolved for each further partition) that can start it; else
        why it waits (the reason its first partition gives)."""
        shares, why = self._in(job)
        if shares is not None:
            return Start(job.id, job.partition, shares)
        for alt in alternatives:
            got, _ = self._in(alt)
            if got is not None:
                return Start(job.id, alt.partition, got)
        return Wait(job.id, why)

    def _in(self, job: Pending) -> tuple[dict[str, Share] | None, str]:
        try:
            part = self.cluster.partitions[job.partition]
        except KeyError:
            return None, "PartitionDown"
        if not part.up:
            return None, "PartitionDown"
        why = job_over(job, part)  # EnforcePartLimits=NO let it wait
        if why:
            return None, why
        if part.name in self.blocked:
            return None, "Priority"
        shares, why = self._place(job, part)
        if why == "Resources" and not job.req_nodes:
            self.blocked.add(part.name)
            self.stopped = self.blocked.issuperset(self.cluster.pending_parts)
        return shares, why

    def _members(self, part: Partition) -> Iterator[Node]:
        nodes = self.cluster.nodes
        return (nodes[n] for n in self.cluster.members.get(part.name, ()))

    def _place(self, job: Pending, part: Partition) -> tuple[dict[str, Share] | None, str]:
        nodes, uses = self.cluster.nodes, self.cluster.uses
        required = [nodes[n] for n in dict.fromkeys(job.req_nodes) if n in nodes]
        excluded = set(job.exc_nodes)
        ok = NodeFilter(job, uses, self.cluster.holders)  # -C Features, --exclusive=user
        if not all(ok(n) for n in required):
            return None, "Resources"
        try:  # reservations: no node whose window the job's time limit would cross
            held = self.cluster.windows[job.time_limit]
        except KeyError:
            held = EMPTY
        if held and any(n.name in held for n in required):
            return None, RESERVED
        others = (n for n in self._members(part)
                  if n.name not in excluded and ok(n) and n.name not in held)
        shares, why = place(job.need, required, others, uses)
        if shares is not None:
            return shares, ""
        why = ok.explain(why)
        if held and why in ("Resources", "ReqNodeNotAvail") and any(
                n in held for n in self.cluster.members.get(part.name, ())):
            return None, RESERVED
        if why == "ReqNodeNotAvail" and required:
            down = [n.name for n in required if n.unavailable]
            if down:
                why = f"ReqNodeNotAvail, UnavailableNodes:{hostlist.fold(down)}"
        return None, why


@attrs.frozen
class Queued:
    """A pending job for schedule(): its request, the reason it waits whatever the nodes
    (held, dependency, BeginTime, array limit: decided before placement), and its request in
    each further partition it names."""

    job: Pending
    waits: str = ""
    alternatives: tuple[Pending, ...] = ()


def schedule(cluster: Cluster, queue: Sequence[Queued]) -> tuple[Decision, ...]:
    """A whole FIFO pass over plain data: a decision for each job up to the point where every
    partition waits (the jobs after it keep the reasons they had). `cluster` is not changed."""
    uses = {n: u.copy() for n, u in cluster.uses.items()}
    holders = dict(cluster.holders)
    run = Pass(attrs.evolve(cluster, uses=uses, holders=holders))
    out: list[Decision] = []
    for q in queue:
        if run.stopped:
            break
        decision = Wait(q.job.id, q.waits) if q.waits else run.consider(q.job, q.alternatives)
        if isinstance(decision, Start):
            take(uses, decision.job_id, decision.shares)
            holders[q.job.id] = Holder(q.job.uid, q.job.user_exclusive)
        out.append(decision)
    return tuple(out)
