"""The simulator under PriorityType=priority/multifactor: the controller's own factors reorder a
hand-built trace against priority/basic (job size under PriorityFavorSmall, a higher partition
PriorityTier, fair share from usage accrued in virtual time), and rsimulate's before/after
report shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ranch.cli import rsimulate
from ranch.conf.build import parse_config_text
from ranch.sim.engine import Simulator
from ranch.sim.multifactor import Multifactor, order_for
from ranch.sim.trace import TraceJob, write_swf

BASE = """\
ClusterName=sim
SlurmctldHost=h(127.0.0.1)
NodeName=n[1-2] CPUs=1 RealMemory=100
PartitionName=main Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
SchedulerType=sched/builtin
"""
SMALL = BASE + "PriorityType=priority/multifactor\nPriorityWeightJobSize=1000\n" \
    "PriorityFavorSmall=YES\n"


def job(i: int, submit: float, runtime: float, nodes: int, account: str = "a",
        partition: str = "") -> TraceJob:
    return TraceJob(id=i, submit=submit, runtime=runtime, time_limit=60, procs=nodes,
                    nodes=nodes, exclusive=True, account=account, user=f"u{i}",
                    partition=partition)


def run(text: str, trace: list[TraceJob]) -> dict[int, float | None]:
    cfg = parse_config_text(text)
    return {r.job.id: r.start for r in Simulator(cfg, order_for(cfg, trace)).run(trace).runs}


# J1 holds both nodes until t=100; J2 wants both for 50 s, J3 (submitted after it) one for 30 s
TRACE = [job(1, 0, 100, 2), job(2, 10, 50, 2), job(3, 20, 30, 1)]


def test_priority_basic_keeps_submission_order() -> None:
    assert run(BASE, TRACE) == {1: 0, 2: 100, 3: 150}


def test_favor_small_puts_the_small_job_first() -> None:
    # J3's size factor (1 of 2 nodes and CPUs left: 0.5) beats J2's (0): 500 against 1
    assert run(SMALL, TRACE) == {1: 0, 2: 130, 3: 100}


def test_the_factors_are_the_controllers() -> None:
    cfg = parse_config_text(SMALL)
    order = Multifactor(cfg, TRACE)
    for j in TRACE:
        order.submitted(j, j.submit)
    assert order.factors[3].jobsize == pytest.approx(500.0)
    assert order.values == {1: 1, 2: 1, 3: 500}


def test_a_higher_partition_tier_goes_first_whatever_the_priority() -> None:
    basic = BASE + "PartitionName=high Nodes=n[1-2] MaxTime=INFINITE State=UP PriorityTier=2\n"
    multi = basic + "PriorityType=priority/multifactor\nPriorityWeightJobSize=1000\n"
    trace = [job(1, 0, 100, 2), job(2, 10, 50, 2), job(3, 20, 50, 1, partition="high")]
    cfg = parse_config_text(multi)
    order = Multifactor(cfg, trace)
    for j in trace:
        order.submitted(j, j.submit)
    # favouring large jobs J2 (both nodes: 1000) outranks J3 (half: 500), but J3's partition
    # has the higher PriorityTier: it goes first, and J2 waits for it
    assert order.values[2] > order.values[3]
    assert run(basic, trace) == {1: 0, 2: 100, 3: 150}
    assert run(multi, trace) == {1: 0, 2: 150, 3: 100}


def test_fair_share_follows_usage_accrued_in_virtual_time() -> None:
    # account a's J1 runs 1,000 s on both nodes; a's J2 then b's J3 wait for them. Every
    # minute's calc period charges J1 to a, so by J2's submission Fair Tree ranks b first
    text = BASE + ("PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\n"
                   "PriorityCalcPeriod=1\n")
    trace = [job(1, 0, 1000, 2), job(2, 900, 50, 2), job(3, 950, 50, 2, account="b")]
    assert run(BASE, trace) == {1: 0, 2: 1000, 3: 1050}
    assert run(text, trace) == {1: 0, 2: 1050, 3: 1000}
    cfg = parse_config_text(text)
    order = Multifactor(cfg, trace)
    Simulator(cfg, order).run(trace)
    ids = {f"{a.account}/{a.user}": a.id for a in order.db.assocs}
    # J1's 2 CPUs x 1,000 s, decayed by the 7-day half-life over the periods since it ran
    assert 1990 < order.usage.assocs[ids["a/u1"]] < 2000
    assert order.usage.assocs[ids["b/u3"]] < 100
    assert order.fs[ids["b/u3"]] > order.fs[ids["a/u2"]]


def test_rsimulate_reports_before_and_after(tmp_path: Path, capsys) -> None:
    before, after = tmp_path / "basic.conf", tmp_path / "multi.conf"
    before.write_text(BASE)
    after.write_text(SMALL)
    swf = tmp_path / "t.swf"
    with open(swf, "w") as f:
        write_swf(f, [j for j in TRACE])
    assert rsimulate.main(["--conf", str(before), "--conf-after", str(after), "--swf",
                           str(swf), "--whole-nodes", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["before"]["priority"] == "priority/basic"
    assert got["after"]["priority"] == "priority/multifactor"
    # waits: basic 0, 90, 130; favour small 0, 120, 80
    assert got["before"]["wait_mean"] == pytest.approx(220 / 3)
    assert got["after"]["wait_mean"] == pytest.approx(200 / 3)
    assert got["change"]["wait_mean"] == pytest.approx(-20 / 3)
    assert rsimulate.main(["--conf", str(before), "--conf-after", str(after), "--swf",
                           str(swf), "--whole-nodes"]) == 0
    out = capsys.readouterr().out
    assert "before (sched/builtin, priority/basic)" in out
    assert "after (sched/builtin, priority/multifactor)" in out
