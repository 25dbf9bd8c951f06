"""Maintenance reservations in the controller, in-process under trio's MockClock: which jobs
start before a window and which wait, the nodes' MAINT/RESERVED flags while it is open, the
refusals, and the journal records that carry them across a restart."""

from __future__ import annotations

import orjson
import trio

from ranch.ctld.state import deferred
from ranch.ctld.state.overlay import overlay
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, state, wall
from .test_jobs import job, rec

BLOCKED = "ReqNodeNotAvail, May be reserved for other job"


def resv(c: Cluster, action: str, **kw) -> m.ReservationReply:
    return c.reservation(m.ReservationRequest(action=action, user="root", **kw))


async def test_jobs_crossing_a_window_wait_and_the_window_shows_on_its_nodes(
        autojump_clock) -> None:
    c = Cluster(make_config(extra="HeartbeatInterval=1000\nSlurmdTimeout=5000"), wall=wall)
    async with trio.open_nursery() as nursery:
        c.start()
        nursery.start_soon(c.deadlines.run, c.on_deadlines)
        for n in ("n1", "n2"):
            register(c, n)
        r = resv(c, "create", name="maint1", start=wall() + 600, duration=1, nodes="n1",
                 flags=("maint", "ignore_jobs"), users=("root",))
        assert r.ok and r.name == "maint1"
        short = c.jobs.submit(job(nodelist="n1", time_limit=5)).job_id
        long_ = c.jobs.submit(job(nodelist="n1", time_limit=15)).job_id
        endless = c.jobs.submit(job(nodelist="n1")).job_id
        elsewhere = c.jobs.submit(job(time_limit=30, cpus_per_task=4)).job_id
        assert rec(c, short)["state"] == "RUNNING"
        assert (rec(c, long_)["state"], rec(c, long_)["reason"]) == ("PENDING", BLOCKED)
        assert (rec(c, endless)["state"], rec(c, endless)["reason"]) == ("PENDING", BLOCKED)
        assert rec(c, elsewhere)["state"] == "RUNNING"  # on n2, out of the window
        assert state(c, "n1") == "MIXED"
        shown = resv(c, "show").reservations
        assert [(x["name"], x["state"], x["flags"], x["nodes"]) for x in shown] == [
            ("maint1", "INACTIVE", ["MAINT", "IGNORE_JOBS", "SPEC_NODES"], "n1")]
        await trio.sleep(601)  # the window opens
        assert state(c, "n1") == "MIXED+MAINTENANCE+RESERVED"
        assert resv(c, "show", name="maint1").reservations[0]["state"] == "ACTIVE"
        await trio.sleep(60)  # and closes: the reservation goes, the waiting jobs start
        assert "MAINTENANCE" not in state(c, "n1")
        assert resv(c, "show").reservations == ()
        assert rec(c, long_)["state"] == "RUNNING"
        nursery.cancel_scope.cancel()


async def test_update_delete_names_and_refusals(autojump_clock) -> None:
    c = Cluster(make_config(), wall=wall)
    register(c, "n1")
    register(c, "n2")
    busy = c.jobs.submit(job(nodelist="n2", time_limit=60)).job_id
    assert rec(c, busy)["state"] == "RUNNING"
    first = resv(c, "create", start=wall(), duration=30, nodes="n1", flags=("maint",),
                 users=("root",))
    assert first.ok and first.name == "root_1"
    assert state(c, "n1") == "IDLE+MAINTENANCE+RESERVED"
    # n2 runs a job past the start: busy, unless IGNORE_JOBS; n1 is taken unless OVERLAP
    for kw in ({"nodes": "n2"}, {"nodes": "n1"}):
        got = resv(c, "create", start=wall(), duration=10, users=("root",), **kw)
        assert not got.ok and got.errors[0] == "Requested nodes are busy"
    assert resv(c, "create", start=wall(), duration=10, nodes="n1", flags=("overlap",),
                users=("root",)).name == "root_2"  # refusals use no number
    assert not resv(c, "create", start=wall(), nodes="n1", users=("root",)).ok
    assert "Error parsing flags" in resv(c, "create", start=wall(), duration=1, nodes="n1",
                                         flags=("bogus",), users=("root",)).errors[0]
    assert not resv(c, "create", start=wall(), duration=1, nodes="n9", users=("root",)).ok
    up = resv(c, "update", name="root_1", duration=90)
    assert up.ok and resv(c, "show", name="root_1").reservations[0]["duration"] == 5400
    assert resv(c, "delete", name="root_1").ok
    assert resv(c, "delete", name="root_1").errors == ("Requested reservation is invalid",)
    resv(c, "delete", name="root_2")
    assert state(c, "n1") == "IDLE"
    picked = resv(c, "create", start=wall() + 100, duration=5, node_count=1,
                  users=("root",))
    assert picked.ok
    assert resv(c, "show", name=picked.name).reservations[0]["flags"] == []  # no SPEC_NODES


async def test_reservations_survive_a_restart_through_the_journal(autojump_clock) -> None:
    c = Cluster(make_config(), wall=wall)
    snap = orjson.loads(deferred.dumps(c.save_doc()))
    assert resv(c, "create", name="m", start=wall() + 50, duration=5, nodes="n[1-2]",
                flags=("maint",), users=("root",)).ok
    assert resv(c, "create", start=wall() + 50, duration=5, nodes="n3",
                users=("root",)).name == "root_2"
    records = orjson.loads(orjson.dumps(c.take_unsynced()))
    assert {r["resv"] for r in records if "resv" in r} == {"m", "root_2"}
    resv(c, "delete", name="m")
    records += orjson.loads(orjson.dumps(c.take_unsynced()))
    again = Cluster(make_config(), wall=wall)
    again.restore(overlay(snap, records))
    assert [x["name"] for x in resv(again, "show").reservations] == ["root_2"]
    assert resv(again, "create", start=wall(), duration=5, nodes="n4",
                users=("root",)).name == "root_3"  # the names go on counting


async def test_a_negative_duration_is_refused_and_minus_one_is_unlimited(autojump_clock) -> None:
    """As scontrol 22.05 (create_res.c): a negative Duration is invalid, but -1, which is
    time_str2mins's INFINITE; Ranch once took any negative one for a year-long window."""
    c = Cluster(make_config(), wall=wall)
    register(c, "n1")
    bad = resv(c, "create", start=wall(), duration=-5, nodes="n1", users=("root",))
    assert (bad.ok, bad.errors) == (False, ("Invalid duration -5",))
    assert resv(c, "show").reservations == () and state(c, "n1") == "IDLE"
    ok = resv(c, "create", start=wall(), duration=10, nodes="n1", users=("root",))
    assert not resv(c, "update", name=ok.name, duration=-5).ok
    assert resv(c, "show", name=ok.name).reservations[0]["duration"] == 600
    assert resv(c, "update", name=ok.name, duration=-1).ok
    assert resv(c, "show", name=ok.name).reservations[0]["duration"] == 365 * 86400
