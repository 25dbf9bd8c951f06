"""Placement from plain data: first fit in Weight order, UP before booting before off, GPUs,
--exclusive, tasks spread over nodes, and the reason when nothing fits."""

from __future__ import annotations

from ranch.sched.model import BOOTING, OFF, Share
from ranch.sched.place import capacity_fits, cpus_per_node, place, task_capacity

from .helpers import need, node, used


def test_first_fit_packs_onto_the_first_node_with_room() -> None:
    nodes = [node("a", cpus=2), node("b"), node("c")]
    uses = {"a": used(cpus=2)}
    shares, why = place(need(cpus=1, mem=100), [], nodes, uses)
    assert (shares, why) == ({"b": Share(1, 100)}, "")
    shares, _ = place(need(nodes=2, cpus=3), [], nodes, uses)
    assert shares == {"b": Share(3, 0), "c": Share(3, 0)}


def test_powered_up_nodes_first_then_booting_then_off_each_in_given_order() -> None:
    nodes = [node("off1", rank=OFF), node("boot", rank=BOOTING), node("up2"), node("off2",
             rank=OFF), node("up1")]
    shares, _ = place(need(nodes=5), [], nodes, {})
    assert list(shares or {}) == ["up2", "up1", "boot", "off1", "off2"]


def test_nodes_that_take_no_work_are_never_used() -> None:
    shares, why = place(need(nodes=2), [], [node("a"), node("b", rank=None)], {})
    assert (shares, why) == (None, "ReqNodeNotAvail")  # only one node could ever hold it


def test_busy_nodes_make_it_wait_for_resources() -> None:
    nodes = [node("a", cpus=2), node("b", cpus=2)]
    uses = {"a": used(cpus=2), "b": used(cpus=1)}
    assert place(need(cpus=2), [], nodes, uses) == (None, "Resources")


def test_memory_counts_like_cpus() -> None:
    nodes = [node("a", mem=1000), node("b", mem=1000)]
    assert place(need(mem=600), [], nodes, {"a": used(mem=500)})[0] == {"b": Share(1, 600)}
    assert place(need(mem=2000), [], nodes, {}) == (None, "ReqNodeNotAvail")


def test_gpus_are_the_lowest_free_indices() -> None:
    nodes = [node("a", gpus=4)]
    shares, _ = place(need(gpus=2), [], nodes, {"a": used(gpus={0, 2})})
    assert shares == {"a": Share(1, 0, (1, 3))}
    assert place(need(gpus=3), [], nodes, {"a": used(gpus={0, 2})}) == (None, "Resources")


def test_exclusive_takes_a_whole_empty_node() -> None:
    nodes = [node("a", cpus=8, mem=500, gpus=2), node("b", cpus=8, mem=500)]
    shares, _ = place(need(exclusive=True, gpus=1), [], nodes, {"b": used(cpus=1)})
    assert shares == {"a": Share(8, 500, (0,))}
    assert place(need(exclusive=True), [], nodes, {"a": used(), "b": used()})[1] == "Resources"


def test_required_nodes_come_first_and_are_all_taken() -> None:
    nodes = [node("a"), node("b"), node("c")]
    shares, _ = place(need(nodes=2), [nodes[2]], nodes, {})
    assert list(shares or {}) == ["c", "a"]
    assert place(need(), [node("x", rank=None)], nodes, {}) == (None, "ReqNodeNotAvail")
    assert place(need(cpus=4), [nodes[1]], nodes, {"b": used(cpus=1)}) == (None, "Resources")


def test_spread_tasks_on_one_node_that_holds_them_all() -> None:
    # -n 2 beside a 1-CPU job on a runs on b alone, as cons_tres does
    nodes = [node("a", cpus=2), node("b", cpus=2)]
    spread = need(cpus=1, spread=True, tasks=2)
    shares, _ = place(spread, [], nodes, {"a": used(cpus=1)})
    assert shares == {"b": Share(2, 0)}


def test_spread_tasks_fill_nodes_in_order_keeping_one_per_node_still_needed() -> None:
    nodes = [node("a", cpus=4), node("b", cpus=4), node("c", cpus=4)]
    shares, _ = place(need(nodes=1, spread=True, tasks=10), [], nodes, {})
    assert shares == {"a": Share(4, 0), "b": Share(4, 0), "c": Share(2, 0)}
    shares, _ = place(need(nodes=3, spread=True, tasks=5), [], nodes, {})
    assert shares == {"a": Share(3, 0), "b": Share(1, 0), "c": Share(1, 0)}


def test_spread_stops_at_max_nodes() -> None:
    nodes = [node("a", cpus=2), node("b", cpus=2), node("c", cpus=2)]
    assert place(need(spread=True, tasks=6, max_nodes=2), [], nodes, {}) == (None, "Resources")
    assert place(need(spread=True, tasks=6, max_nodes=3), [], nodes, {})[0] is not None


def test_spread_with_gpus_per_task_counts_free_gpus() -> None:
    nodes = [node("a", cpus=8, gpus=2), node("b", cpus=8, gpus=4)]
    spread = need(gpus=1, spread=True, tasks=4, gpus_per_task=1)
    shares, _ = place(spread, [], nodes, {"b": used(gpus={0})})
    assert shares == {"a": Share(2, 0, (0, 1)), "b": Share(2, 0, (1, 2))}


def test_shapes() -> None:
    assert cpus_per_node(5, 2, 2) == 6
    big = node("a", cpus=8, gpus=2)
    assert capacity_fits(big, need(cpus=8, gpus=2)) and not capacity_fits(big, need(gpus=3))
    assert task_capacity(big, need(cpus_per_task=3)) == 2
    assert task_capacity(big, need(gpus=1, gpus_per_task=1)) == 2
