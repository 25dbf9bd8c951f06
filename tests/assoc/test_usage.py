"""Usage decay and the fair-share figures (assoc/usage.py, assoc/shares.py) against values worked
by hand from Slurm 22.05's formulas (priority_multifactor.c, fair_tree.c)."""

from __future__ import annotations

import math

import pytest

from ranch.assoc import ops, shares, usage
from ranch.assoc.db import AcctDb
from ranch.assoc.usage import RunningJob, Usage, UsageSettings

DAY = 86400


def tree() -> AcctDb:
    """root > {physics (2 shares) > alice, bob; chem (1) > bob}; QOS half (UsageFactor 0.5)."""
    db = AcctDb.fresh().add_cluster("c1")
    db = ops.add_qos(db, ("half",), usage_factor=0.5).db
    db = ops.add_accounts(db, ("physics",), shares=2).db
    db = ops.add_accounts(db, ("chem",)).db
    db = ops.add_users(db, ("alice", "bob"), ("physics",)).db
    return ops.add_users(db, ("bob",), ("chem",)).db


def job(user: str, account: str, cpus: float, start: float, qos: str = "normal") -> RunningJob:
    return RunningJob(user, account, "main", qos, (("cpu", cpus), ("mem", 2048.0),
                                                   ("node", 1.0)), start)


def ids(db: AcctDb) -> dict[str, int]:
    return {f"{a.account}/{a.user}": a.id for a in db.assocs}


def test_decay_factor_is_one_minus_ln2_over_the_half_life() -> None:
    assert usage.decay_factor(7 * DAY) == pytest.approx(1 - 0.693 / 604800)
    assert usage.decay_factor(0) == 1.0
    # a half-life's worth of seconds halves the usage (to Slurm's 0.693 rounding)
    assert usage.decay_factor(3600) ** 3600 == pytest.approx(0.5, rel=1e-3)


def test_billing_is_cpus_unless_weighted() -> None:
    tres = (("cpu", 4.0), ("mem", 8192.0), ("gres/gpu", 2.0))
    assert usage.billable(tres, ()) == 4.0
    assert usage.billable(tres, (("cpu", 1.0), ("mem", 0.25 / 1024), ("gres/gpu", 2.0))) \
        == 4 + 2 + 4


def test_max_tres_bills_the_highest_node_tres_plus_the_others() -> None:
    """PriorityFlags=MAX_TRES (assoc_mgr_tres_weighted): cpu, mem, node and gres/* take their
    highest weighted value; any other TRES is added; a billing weight is never counted."""
    tres = (("cpu", 4.0), ("mem", 8192.0), ("node", 1.0), ("gres/gpu", 2.0), ("fs/disk", 3.0))
    weights = (("cpu", 1.0), ("mem", 0.25 / 1024), ("gres/gpu", 2.0), ("fs/disk", 0.5),
               ("billing", 9.0))
    assert usage.billable(tres, weights) == 4 + 2 + 4 + 1.5
    assert usage.billable(tres, weights, max_tres=True) == 4 + 1.5
    assert usage.billable(tres, (), max_tres=True) == 4.0  # no weights: the CPUs still
    s = UsageSettings(half_life=0, calc_period=300, weights=weights[:3], max_tres=True)
    db = tree()
    u = usage.accrue(Usage(), db, "c1", s, [job("alice", "physics", 4, 900)], 1000.0)
    u = usage.accrue(u, db, "c1", s, [job("alice", "physics", 4, 900)], 1300.0)
    assert u.assocs[ids(db)["physics/alice"]] == 300 * 4.0  # max(4 CPUs, 2 GB: 0.5): not 4.5


def test_first_period_marks_the_time_then_jobs_accrue_to_every_ancestor() -> None:
    db, s = tree(), UsageSettings(half_life=0, calc_period=300)
    u = usage.accrue(Usage(), db, "c1", s, [job("alice", "physics", 4, 900)], 1000.0)
    assert u.assocs == {} and u.last_decay == 1000.0
    u = usage.accrue(u, db, "c1", s, [job("alice", "physics", 4, 900)], 1300.0)
    n = ids(db)
    assert u.assocs[n["physics/alice"]] == 1200.0  # 300 s x 4 CPUs, no decay
    assert u.assocs[n["physics/"]] == 1200.0 and u.assocs[n["root/"]] == 1200.0
    assert n["chem/"] not in u.assocs
    assert u.qos == {"normal": 1200.0}


def test_decay_scales_old_usage_and_new_usage_by_the_run_delta() -> None:
    db, s = tree(), UsageSettings(half_life=3600, calc_period=300)
    n = ids(db)
    d = 1 - 0.693 / 3600
    u = Usage({n["chem/bob"]: 1000.0, n["chem/"]: 1000.0, n["root/"]: 1000.0}, {}, 5000.0, 5000.0)
    # bob's job in QOS half started 100 s before this period ends: run_delta 100
    u = usage.accrue(u, db, "c1", s, [job("bob", "chem", 2, 5200, "half")], 5300.0)
    want = 1000 * d ** 300 + 100 * d ** 100 * 2 * 0.5
    assert u.assocs[n["chem/bob"]] == pytest.approx(want)
    assert u.assocs[n["root/"]] == pytest.approx(want)
    assert u.qos == {"half": pytest.approx(100 * d ** 100)}


def test_reset_period_clears_usage_only_without_decay() -> None:
    db = tree()
    n = ids(db)
    start = 1_700_000_000.0  # 2023-11-14 22:13 UTC
    u = Usage({n["root/"]: 50.0}, {}, start, start)
    daily = UsageSettings(half_life=0, reset="DAILY")
    assert usage.accrue(u, db, "c1", daily, [], start + 3600).assocs == {n["root/"]: 50.0}
    assert usage.accrue(u, db, "c1", daily, [], start + 2 * 3600).assocs == {}
    decaying = UsageSettings(half_life=DAY, reset="DAILY")
    assert usage.accrue(u, db, "c1", decaying, [], start + 2 * 3600).assocs != {}


def test_shares_effective_usage_levelfs_and_fair_tree_rank() -> None:
    db = tree()
    n = ids(db)
    # alice used 300, bob (physics) 100, bob (chem) 0; root's own user nothing
    raw = {n["physics/alice"]: 300.0, n["physics/bob"]: 100.0, n["physics/"]: 400.0,
           n["root/"]: 400.0}
    rows = {(r.account, r.user): r for r in shares.rows(db, "c1", raw)}
    phys, chem = rows[("physics", "")], rows[("chem", "")]
    # root's children: root (user, 1 share), chem (1), physics (2): 4 shares
    assert phys.norm_shares == 0.5 and chem.norm_shares == 0.25
    assert rows[("root", "root")].norm_shares == 0.25
    assert phys.effective_usage == 1.0 and chem.effective_usage == 0.0
    assert phys.level_fs == 0.5 and math.isinf(chem.level_fs)
    alice, bob = rows[("physics", "alice")], rows[("physics", "bob")]
    assert alice.effective_usage == 0.75 and bob.effective_usage == 0.25
    assert alice.level_fs == pytest.approx(0.5 / 0.75) and bob.level_fs == 2.0
    assert alice.norm_usage == 0.75
    # Fair Tree walks root's user and chem (both inf, tied) before physics: root's user and
    # chem's bob (the tie carried into chem) share rank 4 of 4; physics's bob (LevelFS 2) 2/4,
    # alice 1/4 (the rank counts down by the users passed, ties included)
    assert rows[("root", "root")].fairshare == 1.0 and rows[("chem", "bob")].fairshare == 1.0
    assert bob.fairshare == 0.5 and alice.fairshare == 0.25
    assert phys.fairshare is None  # sshare leaves accounts blank under Fair Tree
    # the classic factor of alice's figures: 2^(-0.75/0.5)
    assert shares.classic(0.75, 0.5) == pytest.approx(2 ** -1.5)


def test_rows_walk_users_first_then_accounts_by_name() -> None:
    got = [(r.depth, r.account, r.user) for r in shares.rows(tree(), "c1", {})]
    assert got == [(0, "root", ""), (1, "root", "root"), (1, "chem", ""), (2, "chem", "bob"),
                   (1, "physics", ""), (2, "physics", "alice"), (2, "physics", "bob")]


def test_usage_round_trips_and_a_damaged_record_is_refused() -> None:
    u = Usage({3: 1.5}, {"normal": 2.0}, 10.0, 5.0)
    assert usage.from_json(usage.to_json(u)) == u
    with pytest.raises(ValueError, match="usage record assocs"):
        usage.from_json({**usage.to_json(u), "assocs": {"3": -1}})
    with pytest.raises(ValueError, match="last_decay"):
        usage.from_json({**usage.to_json(u), "last_decay": "x"})


def test_the_history_seed_integrates_each_run_decayed_to_now() -> None:
    db = tree()
    n = ids(db)
    ran = [RunningJob("alice", "physics", "main", "normal", (("cpu", 2.0),), 1000.0, 1100.0),
           RunningJob("bob", "chem", "main", "half", (("cpu", 4.0),), 1000.0, 1050.0)]
    flat = usage.seeded(db, "c1", UsageSettings(half_life=0, reset="MONTHLY"), ran, 5000.0)
    assert flat.assocs[n["physics/alice"]] == 200.0  # 100 s x 2 CPUs
    assert flat.assocs[n["chem/bob"]] == 100.0  # 50 s x 4 CPUs x UsageFactor 0.5
    assert flat.assocs[n["root/"]] == 300.0 and flat.last_decay == 5000.0
    d = 1 - 0.693 / 3600
    decayed = usage.seeded(db, "c1", UsageSettings(half_life=3600), ran[:1], 5000.0)
    # the per-second sum the calc periods approach: sum of 2 * d^(now - t) over the run
    by_seconds = sum(2 * d ** (5000 - t) for t in range(1000, 1100))
    assert decayed.assocs[n["physics/alice"]] == pytest.approx(by_seconds, rel=1e-3)
