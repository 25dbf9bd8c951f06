"""sched/backfill in the controller (issue 44), in-process under trio's MockClock: the loop
starts a short job beside a big one waiting for Resources (the FIFO pass leaves it Priority), a
long one stays, the big one gets its StartTime estimate and SchedNodeList, a start the nodes no
longer allow is not made, and sched/builtin keeps the FIFO pass alone."""

from __future__ import annotations

import attrs
import orjson
import trio

from ranch.ctld.jobs.backfill import QUIET, SETTLE
from ranch.ctld.jobs.jobrecord import job_from_json, job_json
from ranch.protocol import messages as m
from ranch.sched.model import Planned, Start
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, wall
from .test_jobs import job, rec


def scene(extra: str = "") -> tuple[Cluster, dict[str, int]]:
    """n1-n4 up; one job on n1-n2 for an hour, a 4-node job waiting behind it, then a short
    and a long 1-node job (each node whole: --exclusive)."""
    c = Cluster(make_config(extra="HeartbeatInterval=1000\nSlurmdTimeout=5000\n" + extra),
                wall=wall)
    c.start()
    for n in ("n1", "n2", "n3", "n4"):
        register(c, n)
    submit = c.jobs.submission.submit
    ids = {"running": submit(job(num_nodes=2, exclusive=True, time_limit=60)).job_id,
           "big": submit(job(num_nodes=4, exclusive=True, time_limit=60)).job_id,
           "short": submit(job(num_nodes=1, exclusive=True, time_limit=30)).job_id,
           "long": submit(job(num_nodes=1, exclusive=True, time_limit=120)).job_id}
    assert rec(c, ids["running"])["state"] == "RUNNING"
    for name, reason in (("big", "Resources"), ("short", "Priority"), ("long", "Priority")):
        r = rec(c, ids[name])
        assert (r["state"], r["reason"], r["start_time"]) == ("PENDING", reason, None), name
    return c, ids


async def test_a_short_job_backfills_a_long_one_does_not_and_the_big_one_has_its_estimate(
        autojump_clock) -> None:
    c, ids = scene("SchedulerParameters=bf_interval=10")
    end = rec(c, ids["running"])["start_time"] + 3600  # the running job's time limit
    async with trio.open_nursery() as nursery:
        nursery.start_soon(c.jobs.backfill.run)
        await trio.sleep(9)
        assert rec(c, ids["short"])["state"] == "PENDING"  # no cycle before bf_interval
        await trio.sleep(2)
        short, long_, big = (rec(c, ids[k]) for k in ("short", "long", "big"))
        assert short["state"] == "RUNNING" and short["nodes"] in ("n3", "n4")
        assert (long_["state"], long_["reason"]) == ("PENDING", "Priority")
        assert (big["state"], big["reason"]) == ("PENDING", "Resources")
        assert big["start_time"] == end  # to the second, as Slurm's (not the next slot)
        assert big["sched_nodes"] == "n[1-4]"
        assert c.jobs.backfill.backfilled == 1
        nursery.cancel_scope.cancel()


async def test_a_planned_start_is_not_made_on_nodes_that_changed(autojump_clock) -> None:
    c, ids = scene()
    bf = c.jobs.backfill
    snap = bf.snapshot()
    plan = snap.plan()
    assert any(isinstance(e, Start) and e.job_id == ids["short"] for e in plan)
    # the nodes it would take drained meanwhile (an admin, a health check)
    assert c.update_nodes(m.UpdateNodes("n[3-4]", "DRAIN", "fan", "root")).ok
    assert bf.commit(snap, plan) == 0
    assert rec(c, ids["short"])["state"] == "PENDING"
    assert await bf.cycle() == 0  # a fresh plan sees them out of service too
    assert rec(c, ids["big"])["start_time"] is None  # and no estimate without them


async def test_sched_builtin_keeps_the_fifo_pass_alone(autojump_clock) -> None:
    c, ids = scene("SchedulerType=sched/builtin\nSchedulerParameters=bf_interval=10")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(c.jobs.backfill.run)
        await trio.sleep(100)
        for name in ("big", "short", "long"):
            r = rec(c, ids[name])
            assert (r["state"], r["start_time"], r["sched_nodes"]) == ("PENDING", None, ""), name
        assert rec(c, ids["short"])["reason"] == "Priority"
        assert c.jobs.backfill.cycles == 0
        nursery.cancel_scope.cancel()


async def test_the_estimate_is_not_saved_and_an_old_record_loads(autojump_clock) -> None:
    c, ids = scene()
    await c.jobs.backfill.cycle()
    big = c.jobs.store.jobs[ids["big"]]
    assert big.est_start is not None and big.sched_nodes
    saved = job_json(big)
    assert "est_start" not in saved and "sched_nodes" not in saved
    back = job_from_json(saved)
    assert (back.est_start, back.sched_nodes) == (None, ())


async def test_rqueue_start_and_show_job_print_the_estimate(autojump_clock) -> None:
    """squeue --start's columns and scontrol's StartTime=/SchedNodeList= from the records the
    controller sends: the big job's estimate and nodes, N/A and (null) for a job with none."""
    from ranch.cli.rqueue import read_args, render, select, start_defaults
    from ranch.cli.show_jobs import job_lines
    from ranch.conf.timefmt import slurm_timestamp

    c, ids = scene()
    held_id = c.jobs.submission.submit(job(hold=True, time_limit=5)).job_id  # rbatch -H
    await c.jobs.backfill.cycle()
    records = [orjson.loads(orjson.dumps(rec(c, j))) for j in sorted(c.jobs.store.jobs)]
    args = read_args(["--start"])
    assert not isinstance(args, int)
    start_defaults(args)
    lines = render(args, select(args, records), wall()).splitlines()
    assert lines[0].split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "START_TIME",
                                "NODES", "SCHEDNODES", "NODELIST(REASON)"]
    rows = {r.split()[0]: r.split() for r in lines[1:]}
    assert set(rows) == {str(ids["big"]), str(ids["long"]), str(held_id)}  # pending only
    big = rec(c, ids["big"])
    when = slurm_timestamp(big["start_time"], "N/A")
    assert rows[str(ids["big"])][5:] == [when, "4", "n[1-4]", "(Resources)"]
    assert rows[str(held_id)][5:] == ["N/A", "1", "(null)", "(JobHeldUser)"]
    shown = " ".join(job_lines(records[[r["job_id"] for r in records].index(ids["big"])],
                               wall()))
    assert f"StartTime={when} " in shown and " NodeList= SchedNodeList=n[1-4]" in shown
    held = " ".join(job_lines(rec(c, held_id), wall()))
    assert "StartTime=Unknown " in held and "SchedNodeList" not in held
    assert " NodeList=(null)" in held


async def test_a_long_queue_is_planned_in_slices_and_committed_alike(autojump_clock,
                                                                      monkeypatch) -> None:
    """The snapshot and the plan let the event loop run between slices (here after every
    job: SLICE 0), and the plan's starts and estimates are those of one that did not."""
    from ranch.ctld.jobs import backfill

    c, ids = scene()
    for _ in range(300):  # held: in the queue, never placed
        c.jobs.submission.submit(job(hold=True, time_limit=5))
    monkeypatch.setattr(backfill, "SLICE", 0.0)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await trio.sleep(0)
        before = ticks
        assert await c.jobs.backfill.cycle() == 1
        ran_between = ticks - before
        nursery.cancel_scope.cancel()
    assert ran_between >= 300  # the loop ran between the slices, not once at the end
    assert rec(c, ids["short"])["state"] == "RUNNING"
    assert rec(c, ids["big"])["sched_nodes"] == "n[1-4]"


async def test_a_run_that_would_cross_a_maintenance_window_is_planned_after_it(
        autojump_clock) -> None:
    """n1 runs a 30-minute job; a 60-minute job that only n1 holds (-w n1) would end inside a
    maintenance window from +45 to +75 min if it started when n1 frees: its estimate is the
    window's end, as Slurm's backfill plans around reservations; a job that ends before the
    window still starts now on n1's neighbour."""
    from tests.ctld.test_reservations import resv

    c = Cluster(make_config(extra="HeartbeatInterval=1000\nSlurmdTimeout=5000"), wall=wall)
    c.start()
    for n in ("n1", "n2"):
        register(c, n)
    submit = c.jobs.submission.submit
    running = submit(job(nodelist="n1", exclusive=True, time_limit=30)).job_id
    assert rec(c, running)["state"] == "RUNNING"
    begin = wall() + 45 * 60
    assert resv(c, "create", name="maint1", start=begin, duration=30, nodes="n1",
                flags=("maint", "ignore_jobs"), users=("root",)).ok
    waiting = submit(job(nodelist="n1", exclusive=True, time_limit=60)).job_id
    assert rec(c, waiting)["state"] == "PENDING"
    await c.jobs.backfill.cycle()
    r = rec(c, waiting)
    assert r["sched_nodes"] == "n1"
    assert begin + 30 * 60 <= r["start_time"] <= begin + 30 * 60 + 60  # bf_resolution
    # without the window the plan would have it start as n1 frees (the map is what moved it)
    snap = c.jobs.backfill.snapshot()
    assert [w.nodes for w in snap.windows] == [frozenset({"n1"})]
    bare = attrs.evolve(snap, windows=()).plan()
    est = next(e for e in bare if e.job_id == waiting)
    assert isinstance(est, Planned) and est.start < begin


async def test_both_schedulers_count_their_cycles_for_rdiag(autojump_clock) -> None:
    """sdiag's figures from the controller: each submission's FIFO pass is a main cycle; a
    backfill cycle counts its start, the jobs it looked at and the queue it planned over."""
    from ranch.cli.rdiag import render

    c, _ = scene()
    before = c.jobs.sched_stats.record()
    assert before["schedule_cycle_total"] >= 4  # a pass after each of the four submissions
    assert before["schedule_cycle_max"] >= before["schedule_cycle_last"] > 0
    assert before["bf_cycle_counter"] == 0 and before["bf_when_last_cycle"] == 0
    assert await c.jobs.backfill.cycle() == 1
    s = c.jobs.sched_stats.record()
    assert (s["bf_cycle_counter"], s["bf_backfilled_jobs"], s["bf_when_last_cycle"]) == (
        1, 1, int(wall()))
    # big, short and long pending: all three looked at and tried
    assert (s["bf_last_depth"], s["bf_last_depth_try"], s["bf_queue_len"]) == (3, 3, 3)
    assert s["bf_cycle_max"] == s["bf_cycle_last"] == s["bf_cycle_mean"] > 0
    assert "\tTotal backfilled jobs (since last slurm start): 1\n" in render(s)


async def test_a_cycle_with_no_runnable_job_is_no_cycle_of_sdiags(autojump_clock) -> None:
    """slurmctld's backfill returns before its statistics when no job may run: a held job
    alone leaves rdiag's backfill figures as they were."""
    c = Cluster(make_config(extra="HeartbeatInterval=1000\nSlurmdTimeout=5000"), wall=wall)
    c.start()
    register(c, "n1")
    c.jobs.submission.submit(job(hold=True, time_limit=5))
    assert await c.jobs.backfill.cycle() == 0
    s = c.jobs.sched_stats.record()
    assert (s["bf_cycle_counter"], s["bf_when_last_cycle"], s["bf_queue_len"]) == (0, 0, 0)


async def test_a_completing_job_frees_the_nodes_it_still_holds_now_not_at_its_limit() -> None:
    # Slurm frees an ended job's resources at once (a job placed on its COMPLETING nodes
    # starts at now + 1): the planner must not see the node that has yet to report as busy
    # until the ended job's limit, or a one-node job backfills on the node that did report
    from ranch.ctld.jobs.willrun import running_ends
    from tests.ctld.test_jobs import Beats, end, up

    c = Cluster(make_config(), wall=wall)
    conns = up(c, "n1", "n2")
    j = c.jobs.submission.submit(job(num_nodes=2, time_limit=60)).job_id
    assert c.jobs.commands.cancel(m.CancelJobs((j,), "alice", 1000)).ok
    Beats(c, conns)("n1", jobs_ended=(end(j, "CANCELLED"),))
    assert rec(c, j)["state"] == "COMPLETING"
    now = wall()
    ends = running_ends(c.jobs.store, now)
    assert [(e.job_id, e.at, sorted(e.shares)) for e in ends] == [(j, now, ["n2"])]


async def test_a_cycle_with_nothing_new_waits_for_the_change_and_follows_its_pass(
        autojump_clock) -> None:
    """As slurmctld's _more_work, no cycle plans the same queue on the same nodes twice; and
    one that fell due meanwhile runs right after the event pass of the change, not at the
    timer's next tick (a free-running timer that sat just before the jobs' ends made each
    hole they opened wait an interval: tests/conformance/test_replay.py under load)."""
    c, ids = scene("SchedulerParameters=bf_interval=10")
    bf = c.jobs.backfill
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bf.run)
        await trio.sleep(11)
        assert rec(c, ids["short"])["state"] == "RUNNING" and bf.cycles == 1
        await trio.sleep(14)  # t=25: due since t=20, nothing changed
        assert bf.cycles == 1
        began = trio.current_time()
        late = c.jobs.submission.submit(job(num_nodes=1, exclusive=True, time_limit=30)).job_id
        assert rec(c, late)["state"] == "PENDING"  # the FIFO pass: the big job waits first
        await trio.sleep(QUIET / 2)  # the passes have not paused yet: more may come
        assert bf.cycles == 1
        more = c.jobs.submission.submit(job(num_nodes=1, exclusive=True, time_limit=30)).job_id
        await trio.sleep(QUIET * 1.01)  # a pause after the last: both in one cycle
        assert bf.cycles == 2 and rec(c, late)["state"] == "RUNNING"
        assert trio.current_time() - began < QUIET * 2
        assert rec(c, more)["state"] == "PENDING"  # no node left for it
        # passes that never pause hold a cycle back SETTLE at most
        second = trio.current_time()
        await trio.sleep(9.5)
        for _ in range(int((0.5 + SETTLE) / (QUIET / 2)) + 4):
            c.jobs.submission.submit(job(num_nodes=1, exclusive=True, time_limit=30))
            await trio.sleep(QUIET / 2)
            if bf.cycles == 3:
                break
        assert bf.cycles == 3 and 10 <= trio.current_time() - second <= 10 + SETTLE + QUIET
        nursery.cancel_scope.cancel()


async def test_cycles_after_a_pass_each_second_keep_their_place_in_the_second(
        autojump_clock) -> None:
    """News once a second, on the same fraction of it (jobs that end on whole seconds): each
    cycle runs QUIET after its pass, every second alike. Counting the pause from when the cycle
    fell due instead put each cycle QUIET later than the last, until one sat past the next
    second and the hole it was to fill waited for it (the replay of
    tests/conformance/test_replay.py: 27 and 36 started a second and five seconds late)."""
    c, _ids = scene("SchedulerParameters=bf_interval=1")
    bf = c.jobs.backfill
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bf.run)
        await trio.sleep(3.05)
        lags = []
        for _ in range(10):
            cycles, poked = bf.cycles, trio.current_time()
            c.jobs.submission.submit(job(num_nodes=1, exclusive=True, time_limit=30))
            while bf.cycles == cycles:
                await trio.sleep(0.01)
            lags.append(round(trio.current_time() - poked, 2))
            await trio.sleep_until(poked + 1)
        assert max(lags) <= QUIET + 0.02, lags
        nursery.cancel_scope.cancel()


async def test_a_due_cycle_waits_for_an_ended_job_to_release_its_nodes(autojump_clock) -> None:
    """A job that ended on one node and not yet on the other is a hole half-open: the cycle
    waits for the release (at most a bf_interval more: a node may not answer)."""
    from tests.ctld.test_jobs import Beats, end, up

    c = Cluster(make_config(extra="SchedulerParameters=bf_interval=10"), wall=wall)
    conns = up(c, "n1", "n2")
    bf = c.jobs.backfill
    j = c.jobs.submission.submit(job(num_nodes=2, time_limit=60)).job_id
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bf.run)
        await trio.sleep(11)
        cycles = bf.cycles
        assert c.jobs.commands.cancel(m.CancelJobs((j,), "alice", 1000)).ok
        Beats(c, conns)("n1", jobs_ended=(end(j, "CANCELLED"),))
        assert rec(c, j)["state"] == "COMPLETING"
        await trio.sleep(14)  # t=25: due since t=20, news since, n2 has not said yet
        assert bf.cycles == cycles
        Beats(c, conns)("n2", jobs_ended=(end(j, "CANCELLED"),))
        assert rec(c, j)["state"] == "CANCELLED"
        began = trio.current_time()
        await trio.sleep(QUIET * 1.01)
        assert bf.cycles == cycles + 1 and trio.current_time() - began < QUIET * 1.1
        Beats(c, conns)("n1")  # a node that never answers holds the cycles back no longer
        j = c.jobs.submission.submit(job(num_nodes=2, time_limit=60)).job_id
        assert c.jobs.commands.cancel(m.CancelJobs((j,), "alice", 1000)).ok
        Beats(c, conns)("n1", jobs_ended=(end(j, "CANCELLED"),))
        await trio.sleep(19)  # due at t=35, released or not at t=45
        assert bf.cycles == cycles + 1 and rec(c, j)["state"] == "COMPLETING"
        await trio.sleep(2)
        assert bf.cycles == cycles + 2
        nursery.cancel_scope.cancel()
