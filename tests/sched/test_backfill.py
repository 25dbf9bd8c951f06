"""The backfill planner from plain data: Slurm's classic scenarios (a short job backfills beside
a big one waiting, a long one does not, the top job's reservation holds, bf_max_job_test,
bf_max_job_user/part, bf_min_prio_reserve, bf_window, a maintenance window), each by hand."""

from __future__ import annotations

from ranch.sched.backfill import BEYOND, NEVER_FITS, Params, plan
from ranch.sched.fifo import RESERVED, Queued
from ranch.sched.model import Ending, NodeUse, Planned, Share, Start, Unplanned, Window

from .helpers import cluster, job, need, node

NOW = 1_700_000_100.0  # on a 5-minute boundary: slot 0 begins now


def running(spec: dict[int, tuple[float | None, dict[str, int]]]):
    """job id -> (end bound in seconds from NOW or None, node -> CPUs): (uses, ends)."""
    uses: dict[str, NodeUse] = {}
    ends = []
    for jid, (end, on) in spec.items():
        shares = {n: Share(c, 0) for n, c in on.items()}
        for n, share in shares.items():
            uses.setdefault(n, NodeUse()).add(jid, share)
        if end is not None:
            ends.append(Ending(NOW + end, jid, shares))
    return uses, ends


def brief(estimates) -> dict[int, tuple]:
    out: dict[int, tuple] = {}
    for e in estimates:
        if isinstance(e, Start):
            out[e.job_id] = ("start", *sorted(e.shares))
        elif isinstance(e, Planned):
            out[e.job_id] = ("at", (e.start - NOW) / 60, *e.nodes)
        else:
            out[e.job_id] = ("n/a", e.why)
    return out


def two_nodes_one_busy_an_hour():
    """a busy until +60 min, b idle; job 1 wants both for an hour."""
    uses, ends = running({100: (3600, {"a": 4})})
    return cluster([node("a"), node("b")], uses=uses), ends


def test_a_short_job_backfills_beside_the_big_one_waiting() -> None:
    c, ends = two_nodes_one_busy_an_hour()
    queue = [Queued(job(1, need=need(nodes=2, cpus=4), time_limit=60)),
             Queued(job(2, time_limit=30))]
    got = plan(c, queue, ends, NOW)
    assert brief(got) == {1: ("at", 60, "a", "b"), 2: ("start", "b")}
    assert got[0].reason == "Resources"


def test_a_long_job_does_not_backfill_and_the_top_reservation_holds() -> None:
    c, ends = two_nodes_one_busy_an_hour()
    queue = [Queued(job(1, need=need(nodes=2, cpus=4), time_limit=60)),
             Queued(job(2, time_limit=61)), Queued(job(3, time_limit=60))]
    got = plan(c, queue, ends, NOW)
    # job 2 would run past +60 on b, which is job 1's from then: it waits until job 1 ends;
    # job 3 ends exactly as job 1's reservation begins, and Slurm counts a reservation that
    # begins in the second a job's limit ends as in its way (backfill.c _attempt_backfill:
    # `node_space[j].begin_time <= end_time`): it waits too
    assert brief(got) == {1: ("at", 60, "a", "b"), 2: ("at", 120, "a"), 3: ("at", 120, "b")}
    assert got[1].reason == "Priority"
    # without job 1 ahead, job 2 would have started now: the reservation is what held it
    assert brief(plan(c, queue[1:], ends, NOW))[2] == ("start", "b")


def test_the_top_job_waits_for_the_nodes_that_free_first() -> None:
    uses, ends = running({100: (7200, {"a": 4}), 101: (1800, {"b": 4}), 102: (3600, {"c": 4})})
    c = cluster([node("a"), node("b"), node("c")], uses=uses)
    queue = [Queued(job(1, need=need(nodes=2, cpus=2), time_limit=60)),
             Queued(job(2, need=need(nodes=1, cpus=4), time_limit=30)),
             Queued(job(3, need=need(nodes=1, cpus=4), time_limit=30))]
    # job 1 gets b and c at +60 (when c frees); job 2 fits on b from +30 to +60 only
    # because it ends as job 1 begins: a start after now is tested against the reservations
    # over its own run, strictly (backfill.c _test_resv_overlap: `node_space[j].begin_time <
    # end_reserve`), unlike a start now (the first test above); job 3 then waits for a
    assert brief(plan(c, queue, ends, NOW)) == {
        1: ("at", 60, "b", "c"), 2: ("at", 30, "b"), 3: ("at", 120, "a")}


def test_bf_max_job_test_leaves_the_rest_without_an_estimate() -> None:
    c, ends = two_nodes_one_busy_an_hour()
    queue = [Queued(job(i, need=need(nodes=2, cpus=4), time_limit=60)) for i in (1, 2, 3)]
    got = plan(c, queue, ends, NOW, Params(max_job_test=2))
    assert brief(got) == {1: ("at", 60, "a", "b"), 2: ("at", 120, "a", "b"),
                          3: ("n/a", "bf_max_job_test")}
    assert got[2].reason == ""  # not looked at: it keeps the reason it had
    assert brief(plan(c, queue, ends, NOW, Params(max_job_test=0)))[3] == ("at", 180, "a", "b")


def test_bf_max_job_user_and_part() -> None:
    c, ends = two_nodes_one_busy_an_hour()
    queue = [Queued(job(i, need=need(nodes=2, cpus=4), time_limit=60, uid=uid))
             for i, uid in ((1, 7), (2, 7), (3, 8))]
    assert brief(plan(c, queue, ends, NOW, Params(max_job_user=1))) == {
        1: ("at", 60, "a", "b"), 2: ("n/a", "bf_max_job_user"), 3: ("at", 120, "a", "b")}
    assert brief(plan(c, queue, ends, NOW, Params(max_job_part=2)))[3] == (
        "n/a", "bf_max_job_part")


def test_bf_min_prio_reserve_tests_low_jobs_for_now_only() -> None:
    c, ends = two_nodes_one_busy_an_hour()
    queue = [Queued(job(1, need=need(nodes=1, cpus=4), time_limit=120, priority=10)),
             Queued(job(2, need=need(nodes=1, cpus=4), time_limit=120, priority=5)),
             Queued(job(3, need=need(nodes=1, cpus=1), time_limit=30, priority=5)),
             Queued(job(4, need=need(nodes=1, cpus=4), time_limit=60, priority=10))]
    got = plan(c, queue, ends, NOW, Params(min_prio_reserve=8))
    # job 1 starts on b; job 2 (below the floor) gets no reservation, so job 4, above it,
    # takes a at +60 where job 2 would have gone; job 3 fits nowhere now
    assert brief(got) == {1: ("start", "b"), 2: ("n/a", "bf_min_prio_reserve"),
                          3: ("n/a", "bf_min_prio_reserve"), 4: ("at", 60, "a")}
    # no floor: job 2 holds a from +60 and job 3 b from +120, so job 4 waits until +150
    assert brief(plan(c, queue, ends, NOW))[4] == ("at", 150, "b")


def test_a_maintenance_window_is_in_the_map() -> None:
    c = cluster([node("a"), node("b")])
    windows = [Window(NOW + 1800, NOW + 7200, frozenset({"a", "b"}))]
    queue = [Queued(job(1, time_limit=30)), Queued(job(2, time_limit=60)),
             Queued(job(3, need=need(nodes=2), time_limit=45))]
    got = plan(c, queue, (), NOW, windows=windows)
    # job 1 ends as the window begins: not in its way, as in Slurm, where a window is
    # job_test_resv's test, not a node_space entry (reservation.c: `(start_relative >=
    # job_end_time_use) || (end_relative <= job_start_time)` skips it)
    assert brief(got) == {1: ("start", "a"), 2: ("at", 120, "a"), 3: ("at", 180, "a", "b")}
    assert got[1].reason == RESERVED  # fits now but for the window
    # a window over part of the nodes: the job goes to the others
    got = plan(c, queue[1:2], (), NOW, windows=[Window(NOW, NOW + 7200, frozenset({"a"}))])
    assert brief(got) == {2: ("start", "b")}


def test_a_job_behind_a_window_starts_on_the_grid_after_it() -> None:
    # a window ending at +125 s: the first bf_resolution boundary after it (+180; Slurm shows
    # +181, tests/conformance/test_backfill_window.py), even where a node frees inside the
    # window's last slot (+100 on b); the job behind starts at job 1's reservation's end
    uses, ends = running({100: (100, {"b": 4})})
    c = cluster([node("a"), node("b")], uses=uses)
    windows = [Window(NOW - 60, NOW + 125, frozenset({"a", "b"}))]
    queue = [Queued(job(1, need=need(nodes=2), time_limit=5)), Queued(job(2, time_limit=5))]
    got = plan(c, queue, ends, NOW, Params(resolution=60), windows=windows)
    assert brief(got) == {1: ("at", 3, "a", "b"), 2: ("at", 8, "a")}


def test_beyond_the_window_and_never() -> None:
    uses, ends = running({100: (3 * 3600, {"a": 4}), 101: (None, {"b": 4})})
    c = cluster([node("a"), node("b")], uses=uses)
    queue = [Queued(job(1, need=need(cpus=4), time_limit=60)),
             Queued(job(2, need=need(nodes=2, cpus=4), time_limit=60)),
             Queued(job(3, need=need(cpus=8), time_limit=60))]
    got = plan(c, queue, ends, NOW, Params(window=120))
    assert brief(got) == {1: ("n/a", BEYOND), 2: ("n/a", NEVER_FITS), 3: ("n/a", NEVER_FITS)}
    assert brief(plan(c, queue[:1], ends, NOW, Params(window=240))) == {1: ("at", 180, "a")}


def test_an_estimate_is_the_second_the_nodes_free_as_in_slurm() -> None:
    # Slurm shows will_run's start, the running job's end_time (+90 s), not its slot's end;
    # job 1's reservation is [60, 660) (start and end rounded down to bf_resolution), so job
    # 2 starts at that reservation's end, a node_space boundary (start_res), not at +90 + 600
    uses, ends = running({100: (90, {"a": 4})})
    c = cluster([node("a")], uses=uses)
    queue = [Queued(job(1, need=need(cpus=4), time_limit=10)),
             Queued(job(2, need=need(cpus=4), time_limit=10))]
    assert brief(plan(c, queue, ends, NOW, Params(resolution=60))) == {
        1: ("at", 1.5, "a"), 2: ("at", 11, "a")}
    assert brief(plan(c, queue, ends, NOW + 30, Params(resolution=300))) == {
        1: ("at", 1.5, "a"), 2: ("at", 10, "a")}  # job 1 holds [0, 600): 90 + 600 rounded down


def test_an_estimate_behind_a_reservation_is_its_end_on_the_grid() -> None:
    # a frees at +90 but job 1 holds a and b over [0, 5 min): job 2 (on a) starts at the
    # reservation's end, 300, not at +90 (Slurm: start_res beats will_run's earlier time)
    uses, ends = running({100: (90, {"a": 4}), 101: (30, {"b": 4})})
    c = cluster([node("a"), node("b")], uses=uses)
    queue = [Queued(job(1, need=need(nodes=2, cpus=4), time_limit=4)),
             Queued(job(2, need=need(cpus=4), time_limit=10))]
    got = brief(plan(c, queue, ends, NOW, Params(resolution=60)))
    assert got == {1: ("at", 1.5, "a", "b"), 2: ("at", 5, "a")}


def test_a_spread_job_is_planned_over_the_nodes_that_free() -> None:
    uses, ends = running({100: (600, {"a": 3}), 101: (1200, {"b": 4})})
    c = cluster([node("a"), node("b")], uses=uses)
    spread = need(nodes=1, cpus=1, spread=True, tasks=6, max_nodes=2)
    got = plan(c, [Queued(job(1, need=spread, ntasks=6, time_limit=30))], ends, NOW)
    assert brief(got) == {1: ("at", 20, "a", "b")}


def test_waiting_reasons_and_skips_kept_in_order() -> None:
    c, ends = two_nodes_one_busy_an_hour()
    queue = [Queued(job(1), waits="JobHeldUser"), Queued(job(2, time_limit=30)),
             Queued(job(3, "nope"))]
    got = plan(c, queue, ends, NOW)
    assert got[0] == Unplanned(1, "JobHeldUser", "not runnable")
    assert isinstance(got[1], Start)
    assert got[2] == Unplanned(3, "PartitionDown", "partition down")


def test_named_excluded_and_featured_nodes() -> None:
    uses, ends = running({100: (3600, {"a": 4}), 101: (1800, {"b": 4})})
    c = cluster([node("a", features=["x"]), node("b"), node("c", rank=None)], uses=uses)
    queue = [Queued(job(1, need=need(cpus=4), time_limit=10, req_nodes=("a",))),
             Queued(job(2, need=need(cpus=4), time_limit=10, exc_nodes=("b",))),
             Queued(job(3, need=need(cpus=4), time_limit=10, constraint="x")),
             Queued(job(4, time_limit=10, req_nodes=("c",))),
             Queued(job(5, time_limit=10, req_nodes=("b",), constraint="x")),
             Queued(job(6, need=need(cpus=4), time_limit=10))]
    got = plan(c, queue, ends, NOW)
    assert brief(got) == {1: ("at", 60, "a"), 2: ("at", 70, "a"), 3: ("at", 80, "a"),
                          4: ("n/a", NEVER_FITS), 5: ("n/a", NEVER_FITS), 6: ("at", 30, "b")}
    assert got[3].reason == "ReqNodeNotAvail"


def test_a_spread_job_starts_when_its_node_frees_enough_for_all_its_tasks() -> None:
    # a holds one task now and both at +5: a release that no one-task count sees
    uses, ends = running({100: (300, {"a": 4})})
    c = cluster([node("a", cpus=5)], uses=uses)
    spread = need(nodes=1, cpus=1, spread=True, tasks=2)
    got = plan(c, [Queued(job(1, need=spread, ntasks=2, time_limit=1))], ends, NOW)
    assert brief(got) == {1: ("at", 5, "a")}


def test_a_spread_job_asking_gpus_of_each_node_is_planned_only_where_they_are() -> None:
    """-n 2 --gres=gpu:1: each node it takes gives it a GPU. The planner read only
    --gpus-per-task for a spread job and planned this one on a node with none, where it
    could never start (found by the property test under load)."""
    gpu_job = {"b": Share(4, 0, (0,))}
    uses = {"b": NodeUse(4, 0, {0}, {100})}
    c = cluster([node("a"), node("b", gpus=1)], uses=uses)
    spread = need(nodes=1, cpus=1, gpus=1, spread=True, tasks=2)
    got = plan(c, [Queued(job(1, need=spread, ntasks=2, time_limit=30))],
               [Ending(NOW + 1200, 100, gpu_job)], NOW)
    assert brief(got) == {1: ("at", 20, "b")}
    c = cluster([node("a"), node("b")])  # no GPU anywhere: no start, and no estimate
    got = plan(c, [Queued(job(1, need=spread, ntasks=2, time_limit=30))], [], NOW)
    assert isinstance(got[0], Unplanned)


def test_times_are_whole_seconds_as_in_slurm() -> None:
    # slurmctld's now is time(NULL) and a running job's end its whole-second start + limit:
    # a fraction of a second on Ranch's clock moves no boundary (bf_resolution=1 here)
    uses, ends = running({100: (59.6, {"a": 4})})
    c = cluster([node("a")], uses=uses)
    queue = [Queued(job(1, need=need(cpus=4), time_limit=1))]
    got = plan(c, queue, ends, NOW + 0.7, Params(resolution=1))
    assert got[0].start == NOW + 59


def test_bf_busy_nodes_counts_a_job_this_cycle_started() -> None:
    # c is full until +10; job 1 reserves a, b, c for +10..+20; job 2 starts now on b (-w);
    # job 3 reserves a node after job 1: the first free (a), or with bf_busy_nodes the first
    # in use, b (its job started by this cycle) before c (running since before)
    uses, ends = running({100: (600, {"c": 4})})
    c = cluster([node("a"), node("b"), node("c")], uses=uses)
    queue = [Queued(job(1, need=need(nodes=3, cpus=4), time_limit=10)),
             Queued(job(2, need=need(cpus=1), time_limit=5, req_nodes=("b",))),
             Queued(job(3, need=need(cpus=4), time_limit=30))]
    plain = brief(plan(c, queue, ends, NOW))
    busy = brief(plan(c, queue, ends, NOW, Params(busy_nodes=True)))
    assert plain[2] == busy[2] == ("start", "b")
    assert (plain[3], busy[3]) == (("at", 20, "a"), ("at", 20, "b"))


def test_bf_busy_nodes_prefers_a_busy_node_over_an_idle_one_earlier_in_order() -> None:
    # c runs a job until +10; a and b are idle but reserved for job 1 until +20 (starts at
    # once is impossible for job 2, which needs 8 CPUs of one node for 30 minutes)
    uses, ends = running({100: (600, {"c": 2})})
    c = cluster([node("a", cpus=8), node("b", cpus=8), node("c", cpus=8)], uses=uses)
    queue = [Queued(job(1, need=need(nodes=3, cpus=8), time_limit=10)),
             Queued(job(2, need=need(nodes=1, cpus=8), time_limit=30))]
    assert brief(plan(c, queue, ends, NOW))[2] == ("at", 20, "a")
    assert brief(plan(c, queue, ends, NOW, Params(busy_nodes=True)))[2] == ("at", 20, "c")
