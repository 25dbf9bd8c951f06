"""The simulator on hand-built traces whose schedule is worked out by hand: the FIFO pass alone
(sched/builtin) and with the backfill planner, a job killed at its limit, a refused job, the
priority order as a parameter, and the report's figures."""

from __future__ import annotations

import pytest

from ranch.conf.build import parse_config_text
from ranch.sim.engine import Simulator, basic_priority
from ranch.sim.report import summary
from ranch.sim.trace import TraceJob

CONF = """\
ClusterName=sim
SlurmctldHost=h(127.0.0.1)
NodeName=n[1-2] CPUs=1 RealMemory=100
PartitionName=main Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
SchedulerType={sched}
SchedulerParameters=bf_interval=30
"""


def conf(sched: str):
    return parse_config_text(CONF.format(sched=sched))


def job(i: int, submit: float, runtime: float, limit: int, nodes: int, account: str = "a"):
    return TraceJob(id=i, submit=submit, runtime=runtime, time_limit=limit, procs=nodes,
                    nodes=nodes, exclusive=True, account=account)


# J1 holds one node for 100 s (limit 10 min); J2 wants both nodes; J3, one node for a minute.
TRACE = [job(1, 0, 100, 10, 1), job(2, 10, 50, 5, 2, "b"), job(3, 20, 30, 1, 1, "b")]


def starts(out) -> dict[int, tuple[float | None, float | None, str]]:
    return {r.job.id: (r.start, r.end, r.by) for r in out.runs}


def test_fifo_alone_keeps_the_small_job_behind_the_big_one() -> None:
    out = Simulator(conf("sched/builtin")).run(TRACE)
    assert starts(out) == {1: (0, 100, "fifo"), 2: (100, 150, "fifo"), 3: (150, 180, "fifo")}
    rep = summary(out)
    assert rep["makespan"] == 180
    assert rep["utilisation"] == pytest.approx(100 * 230 / (2 * 180), abs=0.01)
    assert rep["wait_mean"] == pytest.approx((0 + 90 + 130) / 3)
    # bounded slowdown, tau 10 s: 1, 140/50, 160/30
    assert rep["bounded_slowdown_mean"] == pytest.approx((1 + 2.8 + 160 / 30) / 3)
    assert rep["accounts"]["b"]["wait_p95"] == 130
    assert rep["accounts"]["a"]["wait_mean"] == 0


def test_backfill_starts_the_small_job_in_the_first_cycle_after_it_came() -> None:
    out = Simulator(conf("sched/backfill")).run(TRACE)
    # the cycle at t=30 finds J3 done (30 + 60 s) long before J2's reservation (J1's limit,
    # t=600) and starts it on the free node; J2 starts when J1 ends, by the event pass
    assert starts(out) == {1: (0, 100, "fifo"), 2: (100, 150, "fifo"),
                           3: (30, 60, "backfill")}
    rep = summary(out)
    assert rep["backfilled"] == 1 and rep["makespan"] == 150
    assert rep["utilisation"] == pytest.approx(100 * 230 / (2 * 150), abs=0.01)


def test_a_job_that_would_delay_the_reservation_does_not_backfill() -> None:
    # J3 now asks 15 minutes: it would still run at J1's limit (t=600), when J2 is due
    trace = [*TRACE[:2], job(3, 20, 30, 15, 1, "b")]
    out = Simulator(conf("sched/backfill")).run(trace)
    assert starts(out)[3] == (150, 180, "fifo")


def test_a_job_is_killed_at_its_time_limit() -> None:
    out = Simulator(conf("sched/builtin")).run([job(1, 0, 1000, 1, 1)])
    assert starts(out) == {1: (0, 60, "fifo")}


def test_a_job_no_partition_could_hold_is_refused_not_waited_on() -> None:
    out = Simulator(conf("sched/builtin")).run([job(1, 0, 10, 1, 3), job(2, 5, 10, 1, 2)])
    assert [j.id for j, _ in out.refused] == [1]
    assert starts(out) == {2: (5, 15, "fifo")}
    assert summary(out)["refused"] == 1


def test_the_queue_order_is_the_priority_callable_given() -> None:
    # the newest job first: J3 is ahead of J2 when J1 ends, so the pass starts J3 then, and
    # J2 (both nodes) only once J3 has ended
    def newest_first(j: TraceJob, now: float) -> int:
        return -basic_priority(j, now)

    out = Simulator(conf("sched/builtin"), priority=newest_first).run(TRACE)
    assert starts(out) == {1: (0, 100, "fifo"), 3: (20, 50, "fifo"), 2: (100, 150, "fifo")}


def test_processors_spread_over_the_fewest_nodes_of_the_partition() -> None:
    cfg = parse_config_text(CONF.format(sched="sched/builtin").replace("CPUs=1", "CPUs=4"))
    sim = Simulator(cfg)
    pend, run = sim.request(TraceJob(id=1, submit=0, runtime=1, time_limit=1, procs=6))
    assert (pend.need.nodes, pend.need.cpus, pend.need.exclusive, run.cpus) == (2, 3, False, 6)


def test_kendall_tau_counts_pairs_in_and_out_of_order_and_ties() -> None:
    from ranch.sim.report import kendall_tau, kendall_tau_b

    assert kendall_tau([1, 2, 3, 4], [1, 2, 3, 4]) == 1
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1
    assert kendall_tau([1, 2, 3, 4], [2, 1, 3, 4]) == pytest.approx(4 / 6)
    a = {1: 0.0, 2: 1.0, 3: 2.0}
    assert kendall_tau_b(a, {1: 0.0, 2: 1.0, 3: 2.0}) == 1
    assert kendall_tau_b(a, {1: 2.0, 2: 1.0, 3: 0.0}) == -1
    # 1 and 2 start in the same second on the second side: that pair is a tie, not a swap
    assert kendall_tau_b(a, {1: 5.0, 2: 5.0, 3: 6.0}) == pytest.approx(2 / (3 * 2) ** 0.5)
