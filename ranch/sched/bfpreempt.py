"""sched/backfill's preemption: a job that cannot start now starts now with preemptable jobs gone
(Slurm 22.05's _try_sched with slurm_find_preemptable_jobs, _will_run_test's "now"), on nodes
no reservation of a job ahead holds for its limit; the victims as ranch/sched/preempt.py picks."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Protocol

import attrs

from ranch.sched.bffit import NEVER
from ranch.sched.bfmap import Clock, SlotMap
from ranch.sched.fifo import Cluster
from ranch.sched.model import Holder, Node, NodeUse, Pending, Planned
from ranch.sched.preempt import Policy, Preemption, Runner, choose


@attrs.frozen
class Preempting:
    """What a cycle may preempt: the policy, the running jobs (wall-clock starts), each
    pending job's QOS by id (those that may preempt), and the wall clock the exempt times
    are read against."""

    policy: Policy
    running: tuple[Runner, ...]
    qos: Mapping[int, str] = attrs.field(eq=False)
    now: float = 0.0


@attrs.frozen
class Preempt(Planned):
    """A Planned start now, once `victims` are gone (the commit stops them)."""

    victims: Preemption


class Cycle(Protocol):
    """What this reads of a planning cycle (ranch/sched/backfill.py's Cycle)."""

    cluster: Cluster
    clock: Clock
    map: SlotMap
    uses: dict[str, NodeUse]
    holders: dict[int, Holder]
    preempting: Preempting | None
    taken: set[int]  # jobs this cycle's preemptors stop
    no_victims: set[tuple]  # requests that found none

    def mask(self, names: Iterable[str]) -> int: ...
    def _minutes(self, job: Pending) -> int | None: ...
    def _masks(self, job: Pending) -> tuple[int, int]: ...
    def _windowed(self, start: float, minutes: int | None) -> int: ...
    def _of(self, mask: int) -> Iterator[Node]: ...


def planned_now(cycle: Cycle, job: Pending, reason: str) -> Preempt | None:
    """The job planned now with the victims whose going lets it start, on nodes no
    reservation ahead (nor window) holds before it would end (backfill's avail_bitmap);
    those nodes reserved for it from now, as a _start_job that found them busy leaves."""
    pre = cycle.preempting
    if pre is None:
        return None
    minutes, now = cycle._minutes(job), cycle.clock.now
    # victims are only taken and reservations only added as the cycle goes on: a request
    # that found none finds none later in it
    key = (pre.qos.get(job.id), job.partition, job.need, minutes, job.req_nodes,
           job.exc_nodes, job.constraint, job.uid, job.user_exclusive)
    if key[0] is None or key in cycle.no_victims:
        return None
    way = NEVER if minutes is None else cycle.clock.through(now + minutes * 60)
    elig, req = cycle._masks(job)
    free = (elig | req) & cycle.map.free(0, way) & ~cycle._windowed(now, minutes)
    got = None if req & ~free else preempt_now(
        cycle.cluster, cycle.uses, cycle.holders, job, {n.name for n in cycle._of(free)}, pre,
        cycle.taken)
    if got is None:
        cycle.no_victims.add(key)
        return None
    cycle.map.block(*cycle.clock.held(now, minutes), cycle.mask(got.nodes))
    return Preempt(job.id, job.partition, now, got.nodes, reason, got)


def preempt_now(cluster: Cluster, uses: Mapping[str, NodeUse], holders: Mapping[int, Holder],
                job: Pending, free: Collection[str], inputs: Preempting,
                taken: set[int]) -> Preemption | None:
    """The victims whose going lets `job` start now on the nodes `free` of reservations ahead
    (`uses`, `holders`: the cycle's, its own starts included), or None. Jobs an earlier
    preemptor of this cycle chose (`taken`, which gets these) are no candidates again."""
    qos = inputs.qos.get(job.id)
    rule = inputs.policy.qos.get(qos) if qos is not None else None
    if qos is None or rule is None or not rule.preempt:
        return None
    names = [n for n in cluster.members.get(job.partition, ()) if n in free]
    if not names:
        return None
    trial = attrs.evolve(cluster, uses=uses, holders=holders,
                         members={**cluster.members, job.partition: names}, windows={})
    running = [r for r in inputs.running if r.id not in taken]
    got = choose(trial, job, qos, running, inputs.policy, inputs.now)
    if got is None or not got.victims:
        return None
    taken.update(v.job_id for v in got.victims)
    return got


__all__ = ["Preempt", "Preempting", "planned_now", "preempt_now"]
