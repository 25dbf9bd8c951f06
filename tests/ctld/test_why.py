"""rqueue --why in the controller (issue 44), in-process under trio's MockClock: the owner reads
the live queue, nodes, reservations and limits and answers GetWhy; PrivateData=jobs keeps
another user's job out of reach; rqueue --why renders the answer."""

from __future__ import annotations

import orjson

from ranch.cli.why_view import render
from ranch.protocol import codec
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, wall
from .test_jobs import job, rec


def scene(extra: str = "") -> tuple[Cluster, dict[str, int]]:
    """n1-n4 up; one job on n1-n2 for an hour, a 4-node job waiting behind it, then a 1-node
    job of two hours (each node whole: --exclusive)."""
    c = Cluster(make_config(extra="HeartbeatInterval=1000\nSlurmdTimeout=5000\n" + extra),
                wall=wall)
    c.start()
    for n in ("n1", "n2", "n3", "n4"):
        register(c, n)
    submit = c.jobs.submission.submit
    ids = {"running": submit(job(num_nodes=2, exclusive=True, time_limit=60)).job_id,
           "big": submit(job(num_nodes=4, exclusive=True, time_limit=60)).job_id,
           "long": submit(job(num_nodes=1, exclusive=True, time_limit=120)).job_id}
    return c, ids


async def test_a_job_behind_a_reservation_of_a_job_ahead_and_a_shorter_limit(
        autojump_clock) -> None:
    c, ids = scene()
    got = await c.jobs.why.answer(m.GetWhy(ids["long"]))
    assert isinstance(got, m.WhyReply), got
    assert (got.state, got.reason) == ("PENDING", "Priority")
    assert got.binding.startswith(f"Priority: jobs {ids['big']} ahead of it hold reservations "
                                  "on n[1-4] from "), got.binding
    end = rec(c, ids["running"])["start_time"] + 3600
    # the big job's reservation ends at its start (to the second) + 1 h rounded down to
    # bf_resolution, as backfill.c's end_reserve (tests/conformance/test_backfill.py)
    assert got.start == (end + 3600) // 60 * 60
    # a limit that ends before the big job's reservation: the planner starts it now
    assert got.suggestions and got.suggestions[0].option.startswith("--time=")
    assert "it would start now" in got.suggestions[0].text
    assert codec.decode("WhyReply", codec.encode(got)) == got  # it crosses the wire whole
    text = render(orjson.loads(orjson.dumps(codec.converter.unstructure(got))))
    assert f"JobId={ids['long']} PENDING Reason=Priority" in text
    assert "Sooner (each checked by the planner):" in text and "--time=" in text


async def test_a_drained_node_is_named_with_its_reason(autojump_clock) -> None:
    c, ids = scene()
    assert c.update_nodes(m.UpdateNodes("n4", "DRAIN", "fan failure", "root")).ok
    got = await c.jobs.why.answer(m.GetWhy(ids["big"]))
    assert isinstance(got, m.WhyReply), got
    assert "at least 4 node(s), whole nodes" in got.binding
    assert "1 out of service" in got.binding and "only 3 in service" in got.binding
    assert any(e.startswith("n4: ") and "drain" in e and "(fan failure)" in e
               for e in got.evidence), got.evidence
    assert got.start is None and got.estimate.startswith("no estimate")


async def test_a_maintenance_window_it_would_cross(autojump_clock) -> None:
    c, ids = scene()
    soon = wall() + 1800
    reply = c.reservation(m.ReservationRequest(action="create", name="maint", start=soon,
                                               duration=60, nodes="n[3-4]", flags=("MAINT",),
                                               users=("root",), user="root"))
    assert reply.ok, reply
    c.jobs.kick()
    c.jobs.starts.run()
    got = await c.jobs.why.answer(m.GetWhy(ids["long"]))
    assert isinstance(got, m.WhyReply), got
    assert "a reservation holds n[3-4] from" in got.binding, got.binding


async def test_a_running_job_and_an_unknown_one(autojump_clock) -> None:
    c, ids = scene()
    got = await c.jobs.why.answer(m.GetWhy(ids["running"]))
    assert isinstance(got, m.WhyReply) and got.state == "RUNNING"
    assert got.binding.startswith("RUNNING: started ") and got.binding.endswith("n[1-2]")
    missing = await c.jobs.why.answer(m.GetWhy(999))
    assert isinstance(missing, m.Error) and "Invalid job id" in missing.message
    other = await c.jobs.why.answer(m.GetWhy(ids["big"], only_uid=4242))
    assert isinstance(other, m.Error)  # PrivateData=jobs: another user's job is no job


async def test_each_start_and_top_reservation_is_recorded_with_its_inputs(autojump_clock) -> None:
    """Why did `short` start before `big`? The event log says: backfill started it, `big` was
    ahead of it with its reservation; `rcontrol events --job BIG` finds that record."""
    from ranch.cli.events_view import event_line, names_job

    c, ids = scene()
    short = c.jobs.submission.submit(job(num_nodes=1, exclusive=True, time_limit=30)).job_id
    log = c.controller.eventlog
    first = [e for e in log.query() if e["kind"] == "start"]
    assert [(e["job"], e["scheduler"], e["ahead"]) for e in first] == [
        (ids["running"], "main", [])]  # the first job: nothing ahead of it
    assert await c.jobs.backfill.cycle() == 1
    starts = [e for e in log.query() if e["kind"] == "start" and e["job"] == short]
    assert len(starts) == 1
    rec_ = starts[0]
    assert rec_["scheduler"] == "backfill" and rec_["nodes"] in ("n3", "n4")
    assert [a["job"] for a in rec_["ahead"]] == [ids["big"], ids["long"]]
    assert rec_["ahead"][0]["reason"].startswith("Resources; reserved n[1-4] from ")
    assert rec_["why"].startswith("backfilled: ends by ")
    reserves = [e for e in log.query() if e["kind"] == "reserve"]
    assert [(e["job"], e["rank"], e["nodes"]) for e in reserves] == [
        (ids["big"], 1, "n[1-4]"), (ids["long"], 2, "n1")]  # after big: first fit
    # the same plan again: no new reservation record (only changes are written)
    await c.jobs.backfill.cycle()
    assert len([e for e in log.query() if e["kind"] == "reserve"]) == 2
    about_big = [e for e in log.query() if names_job(e, ids["big"])]
    assert {e["kind"] for e in about_big} == {"start", "reserve"}
    line = event_line(rec_)
    assert f"JobId={short} Scheduler=backfill" in line and f'Ahead="{ids["big"]}(' in line


async def test_ranch_estimate_all_gives_the_untested_jobs_an_estimate_and_no_start(
        autojump_clock) -> None:
    """bf_max_job_test=1: backfill tests the big job only; with ranch_estimate_all the short
    job past it gets an estimate (now: it fits beside the big one's reservation) but backfill
    does not start it, as without the word; the long one gets its start after the big one."""
    for word, estimated in (("", False), (",ranch_estimate_all", True)):
        c, ids = scene(f"SchedulerParameters=bf_max_job_test=1{word}")
        assert c.jobs.settings.config.scheduler.estimate_all is estimated
        short = c.jobs.submission.submit(job(num_nodes=1, exclusive=True, time_limit=30)).job_id
        assert await c.jobs.backfill.cycle() == 0  # starts obey bf_max_job_test
        big, long_, shorts = (rec(c, j) for j in (ids["big"], ids["long"], short))
        assert big["start_time"] is not None and shorts["state"] == "PENDING"
        if not estimated:
            assert (long_["start_time"], shorts["start_time"]) == (None, None)
            continue
        assert shorts["start_time"] == wall() and shorts["sched_nodes"] in ("n3", "n4")
        assert long_["start_time"] >= (big["start_time"] + 3600) // 60 * 60
