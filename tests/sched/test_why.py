"""Why a job waits, over plain data (ranch/sched/why.py): each kind of binding constraint with
its evidence, the planner's estimate, and only the suggestions the planner confirms."""

from __future__ import annotations

from ranch.assoc.limits import Limits, Rule
from ranch.sched.backfill import Params, plan
from ranch.sched.fifo import Queued
from ranch.sched.model import Ending, NodeUse, Planned, Share, Start, Unplanned, Window
from ranch.sched.why import NodeNote, Scene, explain, shape_words
from ranch.sched.whylimits import REASONS, Holding, LimitView

from .helpers import cluster, job, need, node

NOW = 1_699_999_980.0  # a multiple of 60: slots begin on the minute


def when(t: float) -> str:
    return f"+{round((t - NOW) / 60)}m"


def gpus_scene(queue, ends_at=60, windows=(), params=None, notes=None, parts=None):
    """gpu01 drained, gpu02 running job 7 (1 GPU) for `ends_at` min, gpu03-04 idle."""
    nodes = [node("gpu01", cpus=8, gpus=1, rank=None, unavailable=True),
             node("gpu02", cpus=8, gpus=1), node("gpu03", cpus=8, gpus=1),
             node("gpu04", cpus=8, gpus=1)]
    share = Share(1, 0, (0,))
    uses = {"gpu02": NodeUse(1, 0, {0}, {7})}
    c = cluster(nodes, parts or {"gpu": [n.name for n in nodes]}, uses=uses)
    ends = (Ending(NOW + ends_at * 60, 7, {"gpu02": share}),)
    notes = notes if notes is not None else {"gpu01": NodeNote("drained", "fan failure")}
    return Scene(c, tuple(queue), ends, NOW, params or Params(), tuple(windows), notes)


def test_resources_names_each_node_it_may_use() -> None:
    q = Queued(job(30, "gpu", need=need(nodes=4, gpus=1), time_limit=30))
    got = explain(gpus_scene([q]), 30, "Resources", when=when)
    assert got.reason == "Resources"
    assert "needs 4 node(s) with 1 CPU(s), 1 GPU(s) each" in got.binding
    assert "2 free (gpu[03-04])" in got.binding
    assert "1 out of service" in got.binding and "1 allocated" in got.binding
    assert "only 3 in service could ever hold it" in got.binding
    assert "gpu01: drained (fan failure)" in got.evidence
    assert "gpu02: jobs 7 until +60m" in got.evidence
    assert got.start is None and got.estimate == "no estimate: no start in sight"
    # fewer nodes: 3 start when job 7 ends, 2 now; the planner confirms the biggest that helps
    assert [s.option for s in got.suggestions] == ["--nodes=3"]
    assert got.suggestions[0].start == NOW + 3600


def test_priority_names_the_jobs_ahead_and_their_reservations() -> None:
    ahead = [Queued(job(21, "gpu", need=need(nodes=3, gpus=1), time_limit=60, priority=9)),
             Queued(job(22, "gpu", need=need(nodes=1, gpus=1), time_limit=120, priority=8))]
    mine = Queued(job(23, "gpu", need=need(nodes=1, gpus=1), time_limit=120, priority=1))
    scene = gpus_scene([*ahead, mine])
    est = plan(scene.cluster, scene.queue, scene.ends, NOW, Params())
    assert isinstance(est[0], Planned) and isinstance(est[1], Planned)
    got = explain(scene, 23, "Priority", when=when)
    assert got.reason == "Priority"
    assert got.binding.startswith("Priority: jobs 21, 22 ahead of it hold reservations on "
                                  "gpu[02-04] from +60m"), got.binding
    # 21 holds gpu[02-04] from job 7's end for an hour, 22 then gpu02: 23 gets gpu03 after 21
    assert got.start == NOW + 2 * 3600 and got.nodes == ("gpu03",)
    # a time limit that ends before 21's reservation begins starts it now: confirmed
    assert got.suggestions and got.suggestions[0].option == "--time=59"
    assert "now" in got.suggestions[0].text


def test_a_window_it_would_cross_and_the_shorter_limit_that_fits_before_it() -> None:
    w = Window(NOW + 90 * 60, NOW + 150 * 60, frozenset({"gpu03", "gpu04"}))
    q = Queued(job(40, "gpu", need=need(nodes=1, gpus=1), time_limit=240))
    scene = gpus_scene([q], ends_at=600, windows=[w])
    got = explain(scene, 40, "", when=when)
    assert got.reason.startswith("ReqNodeNotAvail, May be reserved")
    assert "a reservation holds gpu[03-04] from +90m to +150m" in got.binding
    assert "a run of 240 min from now would cross it" in got.binding
    assert got.start == NOW + 150 * 60  # after the window
    assert [s.option for s in got.suggestions] == ["--time=89"]
    assert got.suggestions[0].start == NOW


def test_another_partition_is_suggested_only_when_the_planner_starts_it_sooner() -> None:
    parts = {"gpu": ["gpu01", "gpu02"], "spare": ["gpu03", "gpu04"]}
    q = Queued(job(50, "gpu", need=need(nodes=1, gpus=8), time_limit=60))
    scene = gpus_scene([q], parts=parts)
    other = job(50, "spare", need=need(nodes=1, gpus=1), time_limit=60)
    useless = job(50, "spare", need=need(nodes=1, gpus=8), time_limit=60)
    got = explain(scene, 50, "Resources", elsewhere=[useless, other], when=when)
    assert [s.option for s in got.suggestions] == ["--partition=spare"]
    assert got.suggestions[0].nodes == ("gpu03",)


def test_reasons_decided_before_the_nodes() -> None:
    scene = gpus_scene([Queued(job(60, "gpu"), "JobHeldUser"),
                        Queued(job(61, "gpu"), "Dependency"),
                        Queued(job(62, "gpu"), "BeginTime")])
    held = explain(scene, 60, "JobHeldUser")
    assert held.binding.startswith("JobHeldUser: held by its user") and "release 60" in \
        held.binding
    assert held.suggestions == () and held.start is None
    dep = explain(scene, 61, "Dependency", detail="afterok:59(unfulfilled)")
    assert dep.binding == "Dependency: its dependency afterok:59(unfulfilled) is not yet met"
    begin = explain(scene, 62, "BeginTime", detail="2026-11-29T15:00:00")
    assert begin.binding == "BeginTime: it may not start before 2026-11-29T15:00:00"


def test_a_job_that_fits_now_says_so() -> None:
    scene = gpus_scene([Queued(job(70, "gpu", need=need(nodes=1, gpus=1), time_limit=5))])
    got = explain(scene, 70, "Priority", when=when)
    assert got.start == NOW and got.nodes == ("gpu03",)
    assert "next scheduling pass" in got.estimate and got.suggestions == ()


def _rule(qos: dict, assoc: dict | None = None, qos_tres: dict | None = None) -> Rule:
    return Rule(Limits(qos, qos_tres or {}), "normal",
                ((1, Limits(assoc or {})), (0, Limits())))


def test_limit_evidence_names_the_jobs_holding_under_it() -> None:
    holding = tuple(Holding(j, "alice", "phys", "normal", (1, 0), (1, 0, 1, 0))
                    for j in (12, 13, 14, 15))
    view = LimitView(_rule({"MaxJobsPerUser": 4}), "alice", "phys", (1, 0, 1, 0), 30, holding)
    scene = gpus_scene([Queued(job(16, "gpu"), "QOSMaxJobsPerUserLimit")])
    got = explain(scene, 16, "QOSMaxJobsPerUserLimit", limit=view)
    assert got.binding == ("QOSMaxJobsPerUserLimit: 4 of 4 jobs of QOS normal for user alice "
                           "running: 12,13,14,15")
    assert got.suggestions == ()


def test_limit_evidence_of_a_tres_and_a_wall_limit() -> None:
    holding = (Holding(3, "bob", "phys", "normal", (1, 0), (6, 0, 1, 0)),
               Holding(4, "alice", "chem", "other", (9, 0), (8, 0, 1, 0)))
    view = LimitView(_rule({}, qos_tres={"GrpTRES": {"cpu": 8}}), "alice", "phys",
                     (4, 0, 1, 0), 30, holding)
    scene = gpus_scene([Queued(job(5, "gpu"), "QOSGrpCpuLimit")])
    got = explain(scene, 5, "QOSGrpCpuLimit", limit=view)
    assert got.binding == ("QOSGrpCpuLimit: QOS normal holds 6 of GrpTRES cpu=8 in jobs 3; "
                           "this job asks 4")
    wall = LimitView(_rule({}, {"MaxWall": 60}), "alice", "phys", (1, 0, 1, 0), 120, ())
    got = explain(gpus_scene([Queued(job(6, "gpu"), "AssocMaxWallDurationPerJobLimit")]), 6,
                  "AssocMaxWallDurationPerJobLimit", limit=wall)
    assert got.binding.startswith("AssocMaxWallDurationPerJobLimit: it asks 120 min, "
                                  "association alice/phys's MaxWall is 60 min")


def test_every_limit_reason_of_the_pure_check_is_explained() -> None:
    from ranch.assoc import reasons

    groups = [v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, tuple)]
    names = {n for group in groups for n in group if "Unknown" not in n}
    assert len(groups) >= 14 and names <= set(REASONS)


def test_estimate_all_plans_the_jobs_past_bf_max_job_test_for_display_only() -> None:
    queue = [Queued(job(i, "gpu", need=need(nodes=1, gpus=1), time_limit=60)) for i in (1, 2, 3)]
    scene = gpus_scene(queue)
    capped = Params(max_job_test=1)
    plain = plan(scene.cluster, scene.queue, scene.ends, NOW, capped)
    every = plan(scene.cluster, scene.queue, scene.ends, NOW,
                 Params(max_job_test=1, estimate_all=True))
    assert isinstance(plain[0], Start) and isinstance(every[0], Start)
    assert [type(e) for e in plain[1:]] == [Unplanned, Unplanned]
    # job 2 fits now beside job 1: shown as starting now (a later cycle tests and starts it);
    # job 3 then waits for job 7's end on gpu02
    assert isinstance(every[1], Planned) and every[1].start == NOW
    assert isinstance(every[2], Planned) and every[2].start == NOW + 3600
    assert every[1].nodes != every[0].shares.keys()


def test_priority_behind_a_job_ahead_that_holds_no_reservation() -> None:
    """The job ahead can never start (5 nodes of 4): it reserves nothing, yet the partition
    waits on it; the job behind is named Priority with that job as the evidence."""
    ahead = Queued(job(80, "gpu", need=need(nodes=5), time_limit=60, priority=9))
    mine = Queued(job(81, "gpu", need=need(nodes=3, gpus=1), time_limit=60, priority=1))
    got = explain(gpus_scene([ahead, mine]), 81, "Priority", when=when)
    assert got.binding == ("Priority: job 80 ahead of it in partition gpu waits for resources, "
                           "and nothing behind it may take them first")
    assert got.start == NOW + 3600  # when job 7 frees gpu02


def test_limit_evidence_of_tres_minutes_names_the_limit_and_whose() -> None:
    """A TRES-minutes limit holds on usage, not on the jobs running now: the evidence names
    the limit, its value and which association or QOS sets it (a parent's, here)."""
    rule = Rule(Limits({}), "normal", ((1, Limits({})), (0, Limits({}, {"GrpTRESMins": {
        "cpu": 600}}))))
    view = LimitView(rule, "alice", "phys", (4, 0, 1, 0), 30, ())
    got = explain(gpus_scene([Queued(job(7, "gpu"), "AssocGrpCPUMinutesLimit")]), 7,
                  "AssocGrpCPUMinutesLimit", limit=view)
    assert got.binding == ("AssocGrpCPUMinutesLimit: a parent account's association (1 above "
                           "phys)'s GrpTRESMins cpu=600 min: its decayed usage and the running "
                           "jobs' minutes left have reached it")
    least = LimitView(Rule(Limits({}, {"MinTRES": {"cpu": 8}}), "big", ((1, Limits({})),)),
                      "alice", "phys", (2, 0, 1, 0), 30, ())
    got = explain(gpus_scene([Queued(job(8, "gpu"), "QOSMinCpuNotSatisfied")]), 8,
                  "QOSMinCpuNotSatisfied", limit=least)
    assert got.binding == ("QOSMinCpuNotSatisfied: QOS big's MinTRES cpu=8: this job asks "
                           "less than it")


def test_the_shape_names_the_gpus_each_node_gives_a_spread_job() -> None:
    per_node = need(nodes=1, cpus=2, gpus=1, spread=True, tasks=4, cpus_per_task=2)
    per_task = need(nodes=1, cpus=2, gpus=2, spread=True, tasks=4, cpus_per_task=2,
                    gpus_per_task=2)
    assert shape_words(job(1, need=per_node, ntasks=4)) == \
        "4 task(s) of 2 CPU(s) on at least 1 node(s), 1 GPU(s) on each"
    assert shape_words(job(1, need=per_task, ntasks=4)) == \
        "4 task(s) of 2 CPU(s), 2 GPU(s) on at least 1 node(s)"
    assert shape_words(job(1, need=need(nodes=2, cpus=8, gpus=4))) == \
        "2 node(s) with 8 CPU(s), 4 GPU(s) each"
