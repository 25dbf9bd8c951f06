"""The FIFO pass from plain data: each pending reason, a partition that stops at its first job
waiting for resources while the others go on, windows, features, --exclusive=user, -p a,b."""

from __future__ import annotations

from ranch.sched.fifo import RESERVED, Pass, Queued, schedule
from ranch.sched.model import OFF, Holder, Share, Start, Wait

from .helpers import cluster, job, need, node, used


def reasons(decisions) -> dict[int, str]:
    return {d.job_id: ("start " + ",".join(d.shares)) if isinstance(d, Start) else d.reason
            for d in decisions}


def test_jobs_start_in_priority_order_until_one_waits_then_priority() -> None:
    c = cluster([node("a", cpus=2), node("b", cpus=2)])
    queue = [Queued(job(i, need=need(cpus=c_))) for i, c_ in ((1, 2), (2, 1), (3, 2), (4, 1))]
    assert reasons(schedule(c, queue)) == {1: "start a", 2: "start b", 3: "Resources"}
    # every partition waits on a job ahead: job 4 keeps the reason it had (none given)


def test_a_blocked_partition_stops_while_the_others_go_on() -> None:
    c = cluster([node("a"), node("b")], parts={"p": ["a"], "q": ["b"]})
    queue = [Queued(job(1, "p", need=need(mem=2000))), Queued(job(2, "p")),
             Queued(job(3, "q")), Queued(job(4, "p")), Queued(job(5, "q", need=need(cpus=4)))]
    assert reasons(schedule(c, queue)) == {
        1: "ReqNodeNotAvail", 2: "start a", 3: "start b", 4: "start a", 5: "Resources"}
    queue[0] = Queued(job(1, "p", need=need(cpus=4)))  # fits a node, not now: p waits
    c2 = cluster([node("a"), node("b")], parts={"p": ["a"], "q": ["b"]},
                 uses={"a": used(cpus=1)})
    assert reasons(schedule(c2, queue)) == {
        1: "Resources", 2: "Priority", 3: "start b", 4: "Priority", 5: "Resources"}


def test_stopped_once_every_partition_with_pending_jobs_waits() -> None:
    c = cluster([node("a")], uses={"a": used(cpus=4)})
    run = Pass(c)
    assert not run.stopped
    assert run.consider(job(1)) == Wait(1, "Resources")
    assert run.stopped


def test_a_job_naming_its_nodes_does_not_block_its_partition() -> None:
    c = cluster([node("a"), node("b")], uses={"a": used(cpus=4)})
    queue = [Queued(job(1, req_nodes=("a",))), Queued(job(2))]
    assert reasons(schedule(c, queue)) == {1: "Resources", 2: "start b"}


def test_partition_down_and_limits() -> None:
    c = cluster([node("a", cpus=2), node("b", cpus=2)], parts={"p": ["a", "b"], "d": ["a"]},
                down={"d"}, max_time={"p": 60})
    queue = [Queued(job(1, "d")), Queued(job(2, time_limit=61)), Queued(job(3, time_limit=None)),
             Queued(job(4, time_limit=60, num_nodes=3, need=need(nodes=3))),
             Queued(job(5, time_limit=60, need=need(cpus=5))),
             Queued(job(6, time_limit=60, ntasks=5, need=need(spread=True, tasks=5))),
             Queued(job(7, time_limit=60))]
    assert reasons(schedule(c, queue)) == {
        1: "PartitionDown", 2: "PartitionTimeLimit", 3: "PartitionTimeLimit",
        4: "PartitionNodeLimit", 5: "PartitionConfig", 6: "PartitionConfig", 7: "start a"}


def test_reasons_decided_before_placement_are_kept_in_order() -> None:
    c = cluster([node("a", cpus=1)])
    queue = [Queued(job(1), waits="JobHeldUser"), Queued(job(2), waits="Dependency"),
             Queued(job(3)), Queued(job(4), waits="BeginTime"), Queued(job(5))]
    assert reasons(schedule(c, queue)) == {
        1: "JobHeldUser", 2: "Dependency", 3: "start a", 4: "BeginTime", 5: "Resources"}


def test_windows_keep_a_job_off_their_nodes() -> None:
    # a window on a soon, one on b later: only a job of 60 minutes or none crosses b's
    windows = {10: frozenset({"a"}), 60: frozenset({"a", "b"}), None: frozenset({"a", "b"})}
    c = cluster([node("a"), node("b")], windows=windows)
    assert reasons(schedule(c, [Queued(job(1, time_limit=10))])) == {1: "start b"}
    assert reasons(schedule(c, [Queued(job(1, time_limit=60))])) == {1: RESERVED}
    assert reasons(schedule(c, [Queued(job(1))])) == {1: RESERVED}
    assert reasons(schedule(c, [Queued(job(1, time_limit=5))])) == {1: "start a"}  # none
    assert reasons(schedule(c, [Queued(job(1, time_limit=10, req_nodes=("a",)))])
                   ) == {1: RESERVED}


def test_unavailable_required_nodes_are_named() -> None:
    c = cluster([node("a1", rank=None, unavailable=True), node("a2"),
                 node("a3", rank=None, unavailable=True)])
    got = schedule(c, [Queued(job(1, req_nodes=("a1", "a3"), need=need(nodes=2)))])
    assert reasons(got) == {1: "ReqNodeNotAvail, UnavailableNodes:a[1,3]"}


def test_features_pick_the_nodes() -> None:
    c = cluster([node("a", features={"intel"}), node("b", features={"amd", "ib"})])
    queue = [Queued(job(1, constraint="amd&ib")), Queued(job(2, constraint="intel|amd")),
             Queued(job(3, constraint="gpu"))]
    assert reasons(schedule(c, queue)) == {1: "start b", 2: "start a",
                                           3: "ReqNodeNotAvail"}
    assert reasons(schedule(c, [Queued(job(4, constraint="intel", req_nodes=("b",)))])
                   ) == {4: "Resources"}


def test_exclusive_user_keeps_other_users_off() -> None:
    c = cluster([node("a"), node("b")], uses={"a": used(cpus=1, jobs={9})},
                holders={9: Holder(uid=7, user_exclusive=True)})
    queue = [Queued(job(1, uid=8)), Queued(job(2, uid=7)), Queued(job(3, uid=8))]
    assert reasons(schedule(c, queue)) == {1: "start b", 2: "start a", 3: "start b"}
    # another user's exclusive job holds the only node: Resources, not ReqNodeNotAvail
    one = cluster([node("a")], uses={"a": used(cpus=1, jobs={9})},
                  holders={9: Holder(uid=7, user_exclusive=True)})
    assert reasons(schedule(one, [Queued(job(1, uid=8))])) == {1: "Resources"}
    # and a job that asks for it stays off nodes other users' jobs hold
    shared = cluster([node("a"), node("b")], uses={"a": used(cpus=1, jobs={9})},
                     holders={9: Holder(uid=7)})
    assert reasons(schedule(shared, [Queued(job(1, uid=8, user_exclusive=True))])
                   ) == {1: "start b"}


def test_a_job_started_in_the_pass_counts_for_the_next() -> None:
    c = cluster([node("a", gpus=2), node("b", gpus=2)])
    queue = [Queued(job(i, need=need(gpus=1))) for i in range(1, 6)]
    got = schedule(c, queue)
    assert [d.shares for d in got if isinstance(d, Start)] == [
        {"a": Share(1, 0, (0,))}, {"a": Share(1, 0, (1,))},
        {"b": Share(1, 0, (0,))}, {"b": Share(1, 0, (1,))}]
    assert got[-1] == Wait(5, "Resources")
    assert c.uses == {}  # the caller's data is left as it was


def test_several_partitions_run_in_the_first_that_can_start_it() -> None:
    c = cluster([node("a"), node("b")], parts={"p": ["a"], "q": ["b"]},
                uses={"a": used(cpus=4)})
    got = schedule(c, [Queued(job(1, "p"), alternatives=(job(1, "q"),))])
    assert got == (Start(1, "q", {"b": Share(1, 0)}),)
    assert got[0].shares == {"b": Share(1, 0)}
    full = cluster([node("a"), node("b")], parts={"p": ["a"], "q": ["b"]},
                   uses={"a": used(cpus=4), "b": used(cpus=4)})
    assert schedule(full, [Queued(job(1, "p"), alternatives=(job(1, "q"),))]) == (
        Wait(1, "Resources"),)  # the first partition's reason


def test_powered_down_nodes_are_used_last() -> None:
    c = cluster([node("a", rank=OFF), node("b")])
    assert reasons(schedule(c, [Queued(job(1))])) == {1: "start b"}
