"""sbatch --test-only from plain data: now if it fits, else when enough running jobs have ended."""

from __future__ import annotations

from ranch.sched.model import Ending, Holder, Share
from ranch.sched.willrun import will_run

from .helpers import cluster, job, need, node, used


def test_now_when_it_fits() -> None:
    c = cluster([node("a"), node("b")], uses={"a": used(cpus=4, jobs={1})})
    assert will_run(job(9), c, [], 100.0) == (100.0, {"b": Share(1, 0)})


def test_after_the_earliest_endings_that_free_enough() -> None:
    c = cluster([node("a"), node("b")],
                uses={"a": used(cpus=4, jobs={1}), "b": used(cpus=4, jobs={2, 3})})
    ends = [Ending(500.0, 2, {"b": Share(2, 0)}), Ending(300.0, 1, {"a": Share(4, 0)}),
            Ending(400.0, 3, {"b": Share(2, 0)})]
    assert will_run(job(9, need=need(nodes=2, cpus=3)), c, ends, 100.0) == (
        500.0, {"a": Share(3, 0), "b": Share(3, 0)})
    assert will_run(job(9, need=need(cpus=3)), c, ends, 100.0) == (300.0, {"a": Share(3, 0)})
    assert c.uses["a"].cpus == 4  # the caller's tally is left alone


def test_never_on_nodes_it_cannot_use() -> None:
    c = cluster([node("a", rank=None), node("b")])
    assert will_run(job(9, need=need(nodes=2)), c, [], 0.0) == "ReqNodeNotAvail"
    busy = cluster([node("a")], uses={"a": used(cpus=4, jobs={1})})
    assert will_run(job(9), busy, [], 0.0) == "Resources"  # no ending known: never


def test_another_users_exclusive_job_is_waited_out() -> None:
    c = cluster([node("a")], uses={"a": used(cpus=1, jobs={1})},
                holders={1: Holder(7, user_exclusive=True)})
    assert will_run(job(9, uid=8), c, [Ending(60.0, 1, {"a": Share(1, 0)})], 0.0) == (
        60.0, {"a": Share(1, 0)})
