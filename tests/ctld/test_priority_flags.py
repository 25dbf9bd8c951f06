"""priority/multifactor's association factor, site factor and PriorityFlags in an assembled
controller (issue 44): an association's Priority (its own or inherited) over the highest of the
cluster's, rcontrol update SiteFactor= (an operator's, added unweighted), INCR_ONLY,
CALCULATE_RUNNING and ACCRUE_ALWAYS as priority_multifactor.c applies them."""

from __future__ import annotations

import attrs
import trio

from ranch.assoc import ops, serial
from ranch.assoc.db import AcctDb
from ranch.ctld.jobs.jobrecord import job_from_json, job_json
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import job, make_config, register, wall
from .test_priorities import CONF, control, prio

# job size (1 node of 4 and 1 CPU of 16, halved, x1000) and partition main (1 of 4, x2000)
SMALL = int((1 / 4 + 1 / 16) / 2 * 1000) + 500


def tree(physics: str = "10", alice: str = "", chem: str = "40") -> AcctDb:
    """physics (Priority `physics`) with alice (her own `alice`, else physics'), chem with bob
    (`chem` on the account: the highest)."""
    db = AcctDb.fresh().add_cluster("test")
    db = ops.add_accounts(db, ("physics",), settings={"Priority": physics}).db
    db = ops.add_accounts(db, ("chem",), settings={"Priority": chem}).db
    db = ops.add_users(db, ("alice",), ("physics",), default_account="physics",
                       settings={"Priority": alice} if alice else None).db
    return ops.add_users(db, ("bob",), ("chem",), default_account="chem").db


def cluster(extra: str = "", db: AcctDb | None = None) -> Cluster:
    c = Cluster(make_config(text=CONF.format(extra="PriorityWeightFairshare=0\n" + extra)),
                wall=wall)
    c.controller.accounts.restore(serial.to_json(db or tree()))
    c.jobs.priorities.use_config()
    c.start()
    return c


def row(c: Cluster, jid: int) -> m.PriorityRow:
    return next(r for r in c.jobs.priorities.reply(m.PriorityRequest()).rows if r.job_id == jid)


def test_association_priority_survives_the_trees_record() -> None:
    """The tree's journal record (assoc/serial.py) carries it; an account's passes down."""
    db = serial.from_json(serial.to_json(tree(alice="7")))
    alice = db.find_assoc("test", "physics", "alice", "")
    bob = db.find_assoc("test", "chem", "bob", "")
    assert alice is not None and bob is not None
    assert (db.effective(alice, "Priority"), db.effective(bob, "Priority")) == ("7", "40")


async def test_association_priority_is_inherited_and_normalised(autojump_clock) -> None:
    c = cluster("PriorityWeightAssoc=1000")
    alice = c.jobs.submission.submit(job()).job_id
    bob = c.jobs.submission.submit(attrs.evolve(job(), user="bob", uid=1001)).job_id
    # alice takes physics' 10 of the highest, chem's 40 (bob's inherited too)
    assert row(c, alice).assoc == 10 / 40 * 1000 and row(c, bob).assoc == 1000.0
    assert prio(c, alice) == 250 + SMALL and prio(c, bob) == 1000 + SMALL
    # her own Priority wins over her account's; the highest is hers now
    c.controller.accounts.restore(serial.to_json(tree(alice="80")))
    c.jobs.priorities.recompute()
    assert (row(c, alice).assoc, row(c, bob).assoc) == (1000.0, 500.0)
    # NO_NORMAL_ASSOC: the Priority itself, weighted
    c = cluster("PriorityWeightAssoc=2\nPriorityFlags=NO_NORMAL_ASSOC")
    alice = c.jobs.submission.submit(job()).job_id
    assert row(c, alice).assoc == 20.0 and prio(c, alice) == 20 + SMALL
    # no weight: no factor, whatever the tree holds
    c = cluster()
    assert row(c, c.jobs.submission.submit(job()).job_id).assoc == 0.0


async def test_site_factor_is_an_operators_added_unweighted_and_kept(autojump_clock) -> None:
    c = cluster()
    jid = c.jobs.submission.submit(job()).job_id
    assert prio(c, jid) == SMALL
    got = control(c, "update", jid, uid=1000, updates=(("SiteFactor", "500"),))
    assert not got.ok and prio(c, jid) == SMALL
    assert control(c, "update", jid, updates=(("SiteFactor", "500"),)).ok
    assert prio(c, jid) == SMALL + 500 and row(c, jid).site == 500
    assert control(c, "update", jid, updates=(("SiteFactor", "-100000"),)).ok
    assert prio(c, jid) == 1  # the sum is at least 1 (0 is a held job's)
    c.jobs.priorities.recompute()
    assert row(c, jid).site == -100000 and prio(c, jid) == 1
    assert not control(c, "update", jid, updates=(("SiteFactor", "2147483646"),)).ok
    record = c.jobs.store.jobs[jid]
    assert job_from_json(job_json(record)).site_factor == -100000  # saved with the job


async def test_incr_only_keeps_the_highest_priority_a_recompute_gave(autojump_clock) -> None:
    for flags, kept in (("", False), ("PriorityFlags=INCR_ONLY", True)):
        c = cluster("PriorityWeightAssoc=1000\n" + flags)
        jid = c.jobs.submission.submit(job()).job_id
        assert prio(c, jid) == 250 + SMALL
        # physics' Priority falls to 4: a recompute lowers the job's, unless INCR_ONLY
        c.controller.accounts.restore(serial.to_json(tree(physics="4")))
        c.jobs.priorities.recompute()
        assert row(c, jid).assoc == 100.0  # the factors are new either way
        assert prio(c, jid) == (250 + SMALL if kept else 100 + SMALL)
        # and it rises as ever
        c.controller.accounts.restore(serial.to_json(tree(physics="40")))
        c.jobs.priorities.recompute()
        assert prio(c, jid) == 1000 + SMALL


async def test_calculate_running_recomputes_and_lists_running_jobs(autojump_clock) -> None:
    for flags, listed in (("", False), ("PriorityFlags=CALCULATE_RUNNING", True)):
        c = cluster("PriorityWeightAssoc=1000\n" + flags)
        register(c, "n1")
        jid = c.jobs.submission.submit(job()).job_id
        assert c.jobs.store.jobs[jid].state == "RUNNING"
        before = prio(c, jid)
        c.controller.accounts.restore(serial.to_json(tree(physics="40")))
        c.jobs.priorities.recompute()
        rows = c.jobs.priorities.reply(m.PriorityRequest()).rows
        assert (jid in {r.job_id for r in rows}) is listed
        assert prio(c, jid) == (1000 + SMALL if listed else before)


async def test_accrue_always_ages_held_dependent_and_later_jobs(autojump_clock) -> None:
    for flags, always in (("", False), ("PriorityFlags=ACCRUE_ALWAYS", True)):
        c = cluster("PriorityWeightAge=3600\nPriorityMaxAge=1:00:00\n" + flags)
        later = c.jobs.submission.submit(job(begin_time=wall() + 3600)).job_id
        held = c.jobs.submission.submit(job(hold=True)).job_id
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.jobs.priorities.run)
            await trio.sleep(10 * 60 + 1)
            nursery.cancel_scope.cancel()
        # ten minutes of an hour's PriorityMaxAge, x3600: 600 (from submission) or none
        assert c.jobs.priorities.factors[held].age == (600.0 if always else 0.0)
        rows = {r.job_id: r for r in c.jobs.priorities.reply(m.PriorityRequest()).rows}
        assert held not in rows  # held: priority 0, never listed
        # a later begin: listed (and aged) only under ACCRUE_ALWAYS, as sprio's filter
        assert (later in rows) is always
        if always:
            assert rows[later].age == 600.0
