"""sched/backfill's preemption: a job that cannot start now starts now with preemptable jobs gone
(Slurm 22.05's _try_sched with slurm_find_preemptable_jobs, _will_run_test's "now"), on nodes
no reservation of a job ahead holds for its limit; the victims as ranch/sched/preempt.py picks."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import attrs

from ranch.sched.fifo import Cluster
from ranch.sched.model import Holder, NodeUse, Pending, Planned
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


__all__ = ["Preempt", "Preempting", "preempt_now"]
