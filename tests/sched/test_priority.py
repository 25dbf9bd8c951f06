"""priority/multifactor's factors and total (sched/priority.py) against values worked by hand
from Slurm 22.05's priority_multifactor.c."""

from __future__ import annotations

import pytest

from ranch.assoc import fairshare, ops
from ranch.assoc.db import AcctDb
from ranch.sched import priority as p
from ranch.sched.priority import Cluster, JobInput, Settings, Weights

W = Weights(age=1000, assoc=0, fairshare=10000, jobsize=1000, partition=2000, qos=5000)
C = Cluster(nodes=4, cpus=16, part_max=10, qos_max=100)


def job(**kw: object) -> JobInput:
    base: dict = {"accrue": 0.0, "min_nodes": 1, "cpus": 2}
    base.update(kw)
    return JobInput(**base)


def test_age_grows_to_max_age_then_stays_one() -> None:
    s = Settings(weights=W, max_age=1000)
    assert p.factors(job(accrue=100.0), s, C, 350.9).age == pytest.approx(250 / 1000 * 1000)
    assert p.factors(job(accrue=100.0), s, C, 5000.0).norm[0] == 1.0
    assert p.factors(job(accrue=None), s, C, 5000.0).age == 0.0  # not eligible: no age
    assert p.factors(job(accrue=500.0), s, C, 100.0).age == 0.0  # accrues from the future


def test_job_size_favours_large_small_and_relative_to_time() -> None:
    j = job(min_nodes=2, cpus=8, time_limit=60)
    assert p.job_size(j, Settings(), C) == pytest.approx((2 / 4 + 8 / 16) / 2)
    assert p.job_size(j, Settings(favor_small=True), C) == pytest.approx((2 / 4 + 8 / 16) / 2)
    j1 = job(min_nodes=1, cpus=2)
    assert p.job_size(j1, Settings(favor_small=True), C) == pytest.approx((3 / 4 + 14 / 16) / 2)
    rel = Settings(flags=frozenset({"SMALL_RELATIVE_TO_TIME"}))
    # 2 nodes x 4 CPUs a node on average = 8 CPUs, over 60 minutes, over 16 CPUs
    assert p.job_size(j, rel, C) == pytest.approx(8 / 60 / 16)
    assert p.job_size(j, attrs_evolve(rel, favor_small=True), C) == pytest.approx(
        1 - 8 / 60 / 16)
    # no limit: the partition's MaxTime; UNLIMITED is slurmctld's INFINITE minutes
    assert p.job_size(job(min_nodes=1, cpus=2, part_max_time=30), rel, C) \
        == pytest.approx(4 / 30 / 16)


def attrs_evolve(s: Settings, **kw: object) -> Settings:
    import attrs

    return attrs.evolve(s, **kw)


def test_partition_and_qos_normalised_by_the_highest_unless_no_normal() -> None:
    s = Settings(weights=W)
    f = p.factors(job(part_factor=5, qos_priority=20), s, C, 0.0)
    assert f.partition == pytest.approx(0.5 * 2000) and f.qos == pytest.approx(0.2 * 5000)
    raw = Settings(weights=W, flags=frozenset({"NO_NORMAL_PART", "NO_NORMAL_QOS"}))
    f = p.factors(job(part_factor=5, qos_priority=20), raw, C, 0.0)
    assert f.partition == 5 * 2000 and f.qos == 20 * 5000


def test_assoc_factor_and_tres_weights() -> None:
    s = Settings(weights=Weights(assoc=100, tres=(("cpu", 1000.0), ("gres/gpu", 3000.0))))
    j = job(assoc_priority=3, tres=(("gres/gpu", 1.0), ("cpu", 4.0), ("mem", 100.0)),
            part_tres=(("cpu", 16.0), ("gres/gpu", 4.0), ("mem", 1000.0)))
    f = p.factors(j, s, Cluster(nodes=4, cpus=16, assoc_max=6), 0.0)
    assert f.assoc == pytest.approx(50.0)
    assert f.tres == (("cpu", 250.0), ("gres/gpu", 750.0))  # mem weighs 0: left out
    assert f.tres_norm == (("cpu", 0.25), ("gres/gpu", 0.25))
    assert p.total(f) == 50 + 250 + 750


def test_total_sums_then_clamps_and_truncates() -> None:
    f = p.Factors(age=10.6, fairshare=0.5, nice=0)
    assert p.total(f) == 11  # 11.1 truncated
    assert p.total(p.Factors(age=5.0, nice=100)) == 1  # never 0: that is a held job's
    assert p.total(p.Factors(qos=5e9)) == p.TOP
    assert p.total(p.Factors(age=5.0, nice=-10, site=3)) == 18
    assert p.shown_total(p.Factors(age=5.0, nice=100)) == 1.0


def test_weights_of_zero_leave_factors_zero() -> None:
    f = p.factors(job(part_factor=5, qos_priority=20, fairshare=0.7), Settings(), C, 1e9)
    assert (f.age, f.fairshare, f.jobsize, f.partition, f.qos) == (0, 0, 0, 0, 0)
    assert p.total(f) == 1


def tree() -> AcctDb:
    """root > {root (sacctmgr's own user), physics (2 shares) > alice, bob; chem (1) > carol}:
    four shares at the top level."""
    db = AcctDb.fresh().add_cluster("c1")
    db = ops.add_accounts(db, ("physics",), shares=2).db
    db = ops.add_accounts(db, ("chem",)).db
    db = ops.add_users(db, ("alice", "bob"), ("physics",)).db
    return ops.add_users(db, ("carol",), ("chem",)).db


def ids(db: AcctDb) -> dict[str, int]:
    return {f"{a.account}/{a.user}": a.id for a in db.assocs}


def test_fair_tree_ranks_users_and_ties_without_usage() -> None:
    db = tree()
    i = ids(db)
    none = fairshare.factors(db, "c1", {})
    assert {none[i[k]] for k in ("physics/alice", "physics/bob", "chem/carol")} == {1.0}
    used = {i["root/"]: 100.0, i["physics/"]: 90.0, i["physics/alice"]: 90.0,
            i["chem/"]: 10.0, i["chem/carol"]: 10.0}
    fs = fairshare.factors(db, "c1", used)
    # root's user has no usage (LevelFS inf): first; chem's 1/4 shares over 0.1 usage beat
    # physics' 2/4 over 0.9; in physics bob has none
    assert fs[i["root/root"]] == 1.0
    assert fs[i["chem/carol"]] == 0.75
    assert fs[i["physics/bob"]] == 0.5
    assert fs[i["physics/alice"]] == 0.25


def test_classic_fair_share_is_two_to_the_minus_effective_over_shares() -> None:
    db = tree()
    i = ids(db)
    used = {i["root/"]: 100.0, i["physics/"]: 90.0, i["physics/alice"]: 90.0,
            i["chem/"]: 10.0, i["chem/carol"]: 10.0}
    fs = fairshare.factors(db, "c1", used, flags=("NO_FAIR_TREE",))
    # physics: UE = UA = 0.9, S = 2/4; alice: UE = 0.9 + (0.9-0.9)/2, S = 2/4 * 1/2
    assert fs[i["physics/"]] == pytest.approx(2 ** (-0.9 / 0.5))
    assert fs[i["physics/alice"]] == pytest.approx(2 ** (-0.9 / 0.25))
    # bob: UA 0, UE = 0 + (0.9 - 0) * 1/2
    assert fs[i["physics/bob"]] == pytest.approx(2 ** (-0.45 / 0.25))
    assert fs[i["chem/carol"]] == pytest.approx(2 ** (-0.1 / 0.25))
    assert fairshare.factors(db, "c1", {}, flags=("NO_FAIR_TREE",))[i["chem/carol"]] == 1.0


def test_top_moves_the_chosen_up_and_the_others_down_by_nice() -> None:
    # jobs 1..3 of one user at 300, 200, 100: top 3 takes 300, 1 and 2 share its gain of 200
    got = p.top([(3, 100, 0)], [(1, 300, 0), (2, 200, 0)])
    assert got[3] == (300, -200)
    assert got[1] == (200, 100) and got[2] == (100, 100)
    # an other left at or above the last chosen goes one below it
    got = p.top([(3, 100, 0)], [(1, 300, 0), (2, 299, 0)])
    assert got[1] == (200, 100) and got[2] == (299 - 100, 100)
    got = p.top([(3, 299, 0)], [(1, 300, 0)])
    assert got == {3: (300, -1), 1: (299, 1)}
    # two chosen in order: they take the two highest
    got = p.top([(3, 100, 0), (2, 200, 0)], [(1, 300, 0)])
    assert (got[3], got[2]) == ((300, -200), (200, 0))
    assert got[1] == (100, 200)
