"""sched/backfill's preemption from plain data: a preemptor behind a blocked job it may not preempt
is planned now with its victims; nodes a job ahead has reserved over its limit are kept out;
two preemptors of one cycle do not choose the same victim; a job whose QOS preempts none waits."""

from __future__ import annotations

from ranch.sched.backfill import plan
from ranch.sched.bfpreempt import Preempt, Preempting
from ranch.sched.fifo import Queued
from ranch.sched.model import Planned, Start
from ranch.sched.preempt import CANCEL, REQUEUE, Policy, QosRule, Runner, Victim

from .helpers import cluster, job, need, node
from .test_backfill import NOW, brief, running

QOS = {"high": QosRule("high", priority=100, preempt=frozenset({"low"})),
       "low": QosRule("low", mode=CANCEL), "normal": QosRule("normal")}
POLICY = Policy(mode=REQUEUE, qos=QOS)
# a, b: a low job each, c: a normal one; all three end in two hours
RUNS = {10: (7200, {"a": 4}), 11: (7200, {"b": 4}), 12: (7200, {"c": 4})}
QOS_OF_RUN = {10: "low", 11: "low", 12: "normal"}


def setup(qos: dict[int, str]):
    uses, ends = running(RUNS)
    c = cluster([node("a"), node("b"), node("c")], uses=uses)
    runners = tuple(Runner(jid, QOS_OF_RUN[jid], NOW - 600, e.shares)
                    for jid, e in zip(RUNS, ends, strict=True))
    return c, ends, Preempting(POLICY, runners, qos, NOW)


def blocked_then(*behind) -> list[Queued]:
    """Job 1 (normal QOS) wants all three nodes for an hour: it waits on Resources, reserved
    from the runs' end; then the jobs given."""
    return [Queued(job(1, need=need(nodes=3, cpus=4), time_limit=60)), *behind]


def test_a_preemptor_behind_a_blocked_job_it_may_not_preempt_is_planned_now() -> None:
    c, ends, pre = setup({2: "high"})
    got = plan(c, blocked_then(Queued(job(2, need=need(cpus=4), time_limit=30))), ends, NOW,
               preempting=pre)
    assert brief(got) == {1: ("at", 120, "a", "b", "c"), 2: ("at", 0, "a")}
    est = got[1]
    assert isinstance(est, Preempt)
    assert est.victims.victims == (Victim(10, CANCEL),)  # the low job on a, by its QOS' mode
    assert est.victims.nodes == ("a",) and est.victims.order == (10, 11)
    assert est.reason == "Priority"  # behind job 1, which waits on Resources
    assert plan(c, blocked_then(Queued(job(2, need=need(cpus=4), time_limit=30))), ends,
                NOW) == (got[0], Planned(2, "p", NOW + 7200 + 3600, ("a",), "Priority"))


def test_nodes_a_job_ahead_holds_within_the_preemptors_limit_are_kept_out() -> None:
    c, ends, pre = setup({2: "high"})
    # three hours: every node is job 1's from the second hour on; nothing to preempt for
    got = plan(c, blocked_then(Queued(job(2, need=need(cpus=4), time_limit=180))), ends, NOW,
               preempting=pre)
    assert brief(got)[2] == ("at", 180, "a")
    assert not isinstance(got[1], Preempt)


def test_two_preemptors_of_one_cycle_take_different_victims_and_a_third_none() -> None:
    c, ends, pre = setup({2: "high", 3: "high", 4: "high"})
    queue = blocked_then(*(Queued(job(j, need=need(cpus=4), time_limit=30)) for j in (2, 3, 4)))
    got = plan(c, queue, ends, NOW, preempting=pre)
    b = brief(got)
    assert (b[2], b[3]) == (("at", 0, "a"), ("at", 0, "b"))
    assert [v.job_id for v in got[1].victims.victims] == [10]
    assert [v.job_id for v in got[2].victims.victims] == [11]
    assert not isinstance(got[3], Preempt)  # c's job is of QOS normal: no victim left


def test_a_job_whose_qos_preempts_none_waits_and_a_fit_starts_without_victims() -> None:
    c, ends, pre = setup({3: "high"})
    got = plan(c, blocked_then(Queued(job(2, need=need(cpus=4), time_limit=30))), ends, NOW,
               preempting=pre)
    assert not isinstance(got[1], Preempt)  # job 2 is no preemptor (not in the cycle's QOS map)
    uses, ends = running({10: (7200, {"a": 4})})
    free = cluster([node("a"), node("b")], uses=uses)
    pre = Preempting(POLICY, (Runner(10, "low", NOW - 600, ends[0].shares),), {2: "high"}, NOW)
    got = plan(free, [Queued(job(2, need=need(cpus=4), time_limit=30))], ends, NOW,
               preempting=pre)
    assert got == (Start(2, "p", got[0].shares),) and list(got[0].shares) == ["b"]
