"""preempt/qos's choice of victims, as Slurm 22.05 makes it, from plain data (no I/O)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import attrs

from ranch.sched.fifo import Cluster, Pass
from ranch.sched.model import NodeUse, Pending, Share, Start

# The modes a victim may be stopped by (a QOS's "cluster" or "": the cluster's PreemptMode).
OFF, CANCEL, REQUEUE, SUSPEND = "off", "cancel", "requeue", "suspend"
STOPPABLE = (CANCEL, REQUEUE)  # cons_tres's _run_now removes only these from its trial map
REORDER_COUNT = 1  # SchedulerParameters preempt_reorder_count's default


@attrs.frozen
class QosRule:
    """What preemption reads of one QOS (the accounting tree's Qos record)."""

    name: str
    priority: int = 0
    preempt: frozenset[str] = frozenset()  # the QOS this one may preempt
    mode: str = ""  # off | cancel | requeue | suspend; "" or "cluster": the cluster's
    grace_time: int = 0  # seconds between SIGTERM and the kill
    exempt_time: int | None = None  # PreemptExemptTime, seconds; None: not set


@attrs.frozen
class Policy:
    """PreemptType=preempt/qos's settings: the cluster's PreemptMode and PreemptExemptTime,
    and the QOS by name."""

    mode: str = OFF
    exempt_time: int | None = None
    qos: Mapping[str, QosRule] = attrs.field(factory=dict)

    @property
    def enabled(self) -> bool:
        return self.mode != OFF


@attrs.frozen
class Runner:
    """A running job that might be preempted: its QOS, start (wall clock), nodes held."""

    id: int
    qos: str
    start: float
    shares: Mapping[str, Share] = attrs.field(eq=False)


@attrs.frozen
class Victim:
    """A job to stop for the preemptor, and how (cancel, requeue) with its grace seconds."""

    job_id: int
    mode: str
    grace_time: int = 0


@attrs.frozen
class Preemption:
    """The preemptor starts on `nodes` once these victims are gone; `order`: the candidates
    in the order they were tried (the event log's evidence)."""

    job_id: int
    victims: tuple[Victim, ...]
    nodes: tuple[str, ...]
    order: tuple[int, ...]


def mode_of(qos: str, policy: Policy) -> str:
    """The PreemptMode that stops a job of this QOS: its QOS's unless "cluster" (preempt_qos.c
    _job_preempt_mode; GANG and WITHIN are not modes of their own)."""
    rule = policy.qos.get(qos)
    if rule is not None and rule.mode not in ("", "cluster"):
        return rule.mode
    return policy.mode


def preemptable(victim: str, preemptor: str, policy: Policy) -> bool:
    """preempt_p_preemptable: both jobs have a QOS, not the same one, and the preemptor's
    Preempt list names the victim's."""
    ee, orr = policy.qos.get(victim), policy.qos.get(preemptor)
    if ee is None or orr is None or ee.name == orr.name:
        return False
    return ee.name in orr.preempt


def exempt_until(job: Runner, policy: Policy) -> float:
    """acct_policy_get_preemptable_time: the job's start plus its QOS's PreemptExemptTime, else
    the cluster's; before then it may not be preempted."""
    rule = policy.qos.get(job.qos)
    if rule is not None and rule.exempt_time is not None:
        return job.start + rule.exempt_time
    if policy.exempt_time is not None:
        return job.start + policy.exempt_time
    return job.start


def preempt_prio(job: Runner, policy: Policy) -> int:
    """_gen_job_prio: the QOS priority (16 bits) above the node count, so that lower QOS and
    then smaller jobs go first."""
    rule = policy.qos.get(job.qos)
    prio = min(rule.priority, 0xFFFF) << 16 if rule is not None and rule.priority > 0 else 0
    return prio + min(len(job.shares), 0xFFFF)


def candidates(preemptor_qos: str, part_nodes: Sequence[str], running: Sequence[Runner],
               policy: Policy, now: float) -> list[Runner]:
    """slurm_find_preemptable_jobs: the running jobs on the partition's nodes that the
    preemptor may preempt and whose exempt time is over, lowest preemption priority first
    (then job id: Slurm's job list is in creation order)."""
    members = set(part_nodes)
    got = [r for r in running
           if preemptable(r.qos, preemptor_qos, policy) and now >= exempt_until(r, policy)
           and any(n in members for n in r.shares)]
    return sorted(got, key=lambda r: (preempt_prio(r, policy), r.id))


def exempt_ends(preemptor_qos: str, part_nodes: Sequence[str], running: Sequence[Runner],
                policy: Policy, now: float) -> float | None:
    """When the first job the preemptor could preempt on the partition, still within its
    exempt time, becomes a candidate (None: none is waiting out its exempt time)."""
    members = set(part_nodes)
    ends = [exempt_until(r, policy) for r in running
            if preemptable(r.qos, preemptor_qos, policy) and any(n in members for n in r.shares)]
    later = [t for t in ends if t > now]
    return min(later) if later else None


def choose(cluster: Cluster, job: Pending, qos: str, running: Sequence[Runner],
           policy: Policy, now: float, reorder: int = REORDER_COUNT) -> Preemption | None:
    """The victims whose going lets the pending job start now, as cons_tres's _run_now picks
    them: candidates removed one by one in order until the job fits; the last one needed then
    leads, the others by how many of the chosen nodes they hold, and the trial is made again
    (`reorder` times); the victims are the removed jobs on the nodes finally chosen. None
    when preemption is off, the job already fits, or no set of candidates lets it start."""
    if not policy.enabled or _fits(cluster, job, {}) is not None:
        return None
    order = candidates(qos, cluster.members.get(job.partition, ()), running, policy, now)
    if not order:
        return None
    passes = 0
    while True:
        got = _trial(cluster, job, order, policy)
        if got is None:
            return None
        last, nodes = got
        passes += 1
        if passes - 1 > reorder or len(order) <= passes:
            break
        chosen = set(nodes)
        usable = {r.id: sum(1 for n in r.shares if n in chosen) for r in order[:last]}
        usable[order[last].id] = 99999
        order = sorted(order, key=lambda r: -usable.get(r.id, 0))
    chosen = set(nodes)
    victims = tuple(Victim(r.id, mode_of(r.qos, policy), _grace(r, policy))
                    for r in order[:last + 1]
                    if mode_of(r.qos, policy) in STOPPABLE and any(n in chosen for n in r.shares))
    return Preemption(job.id, victims, nodes, tuple(r.id for r in order))


def _trial(cluster: Cluster, job: Pending, order: Sequence[Runner], policy: Policy
           ) -> tuple[int, tuple[str, ...]] | None:
    """Remove the candidates in order until the job fits: (the index of the last one removed,
    the nodes the job would take), or None if it fits with none of them left. Freeing more never
    makes a fit fail, so the first prefix that fits is found by bisection (what _run_now's scan
    finds, in log-many placements rather than one per candidate)."""
    stoppable = [i for i, r in enumerate(order) if mode_of(r.qos, policy) in STOPPABLE]
    if not stoppable:
        return None
    start = _fits(cluster, job, _freed(cluster, [order[i] for i in stoppable]))
    if start is None:
        return None
    lo, hi = 1, len(stoppable)  # the job fits with the first `hi` gone (`start`: how)
    while lo < hi:
        mid = (lo + hi) // 2
        got = _fits(cluster, job, _freed(cluster, [order[i] for i in stoppable[:mid]]))
        if got is not None:
            hi, start = mid, got
        else:
            lo = mid + 1
    return stoppable[hi - 1], tuple(start.shares)


def _freed(cluster: Cluster, gone: Sequence[Runner]) -> dict[str, NodeUse]:
    """What the nodes those jobs hold would hold without them."""
    freed: dict[str, NodeUse] = {}
    for victim in gone:
        for name, share in victim.shares.items():
            use = freed.get(name)
            if use is None:
                base = cluster.uses.get(name)
                use = freed[name] = base.copy() if base is not None else NodeUse()
            use.remove(victim.id, share)
    return freed


def _fits(cluster: Cluster, job: Pending, freed: Mapping[str, NodeUse]) -> Start | None:
    """The job's start if its partition's pass would place it with `freed` in place of what
    those nodes hold (a fresh pass: nothing ahead of it blocks it)."""
    uses = _Overlay(freed, cluster.uses) if freed else cluster.uses
    trial = attrs.evolve(cluster, uses=uses, pending_parts={job.partition})
    decision = Pass(trial).consider(job)
    return decision if isinstance(decision, Start) else None


class _Overlay(Mapping[str, NodeUse]):
    """What the nodes hold with the trial's victims gone: their copies over the live map."""

    def __init__(self, top: Mapping[str, NodeUse], base: Mapping[str, NodeUse]) -> None:
        self._top, self._base = top, base

    def __getitem__(self, name: str) -> NodeUse:
        got = self._top.get(name)
        return got if got is not None else self._base[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._top
        yield from (n for n in self._base if n not in self._top)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _grace(job: Runner, policy: Policy) -> int:
    rule = policy.qos.get(job.qos)
    return rule.grace_time if rule is not None else 0


__all__ = ["CANCEL", "OFF", "REQUEUE", "STOPPABLE", "SUSPEND", "Policy", "Preemption", "QosRule",
           "Runner", "Victim", "candidates", "choose", "exempt_ends", "exempt_until", "mode_of",
           "preempt_prio", "preemptable"]
