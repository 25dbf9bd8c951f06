"""preempt/qos's victim choice from plain data: who may preempt whom, the exempt time, Slurm's
order (lower QOS priority, then fewer nodes), the fewest victims that let the job start now."""

from __future__ import annotations

from ranch.sched.model import NodeUse, Share
from ranch.sched.preempt import (
    CANCEL,
    OFF,
    REQUEUE,
    Policy,
    QosRule,
    Runner,
    Victim,
    candidates,
    choose,
    exempt_until,
    mode_of,
    preemptable,
)

from .helpers import cluster, job, need, node

QOS = {
    "high": QosRule("high", priority=100, preempt=frozenset({"low", "scav"})),
    "low": QosRule("low", priority=10),
    "scav": QosRule("scav", priority=0, mode=CANCEL, grace_time=30),
    "normal": QosRule("normal"),
}
POLICY = Policy(mode=REQUEUE, qos=QOS)


def run(jid: int, qos: str, nodes: dict[str, int], start: float = 0.0) -> Runner:
    return Runner(jid, qos, start, {n: Share(c, 0) for n, c in nodes.items()})


def uses_of(runners: list[Runner]) -> dict[str, NodeUse]:
    out: dict[str, NodeUse] = {}
    for r in runners:
        for name, share in r.shares.items():
            out.setdefault(name, NodeUse()).add(r.id, share)
    return out


def setup(runners: list[Runner], names=("a", "b", "c")):
    return cluster([node(n, cpus=4) for n in names], uses=uses_of(runners))


def test_only_a_qos_named_in_the_preemptors_preempt_list_is_preemptable() -> None:
    assert preemptable("low", "high", POLICY)
    assert not preemptable("high", "low", POLICY)
    assert not preemptable("normal", "high", POLICY)
    assert not preemptable("high", "high", POLICY)  # the same QOS: never (no WITHIN)
    assert not preemptable("low", "nosuch", POLICY)


def test_a_qos_mode_overrides_the_clusters_and_cluster_means_the_clusters() -> None:
    assert mode_of("scav", POLICY) == CANCEL
    assert mode_of("low", POLICY) == REQUEUE
    assert mode_of("gone", POLICY) == REQUEUE
    q = {**QOS, "low": QosRule("low", mode="cluster")}
    assert mode_of("low", Policy(mode=CANCEL, qos=q)) == CANCEL


def test_exempt_time_the_qos_first_then_the_clusters() -> None:
    r = run(1, "low", {"a": 1}, start=1000.0)
    assert exempt_until(r, POLICY) == 1000.0
    assert exempt_until(r, Policy(mode=REQUEUE, exempt_time=60, qos=QOS)) == 1060.0
    q = {**QOS, "low": QosRule("low", exempt_time=5)}
    assert exempt_until(r, Policy(mode=REQUEUE, exempt_time=60, qos=q)) == 1005.0


def test_candidates_lowest_qos_priority_then_fewest_nodes_then_id() -> None:
    runners = [run(1, "low", {"a": 1, "b": 1}), run(2, "low", {"c": 1}), run(3, "scav", {"a": 1}),
               run(4, "normal", {"b": 1}), run(5, "low", {"z": 1})]
    got = candidates("high", ("a", "b", "c"), runners, POLICY, now=10.0)
    assert [r.id for r in got] == [3, 2, 1]  # 4: not preemptable; 5: off the partition


def test_a_job_within_its_exempt_time_is_no_candidate() -> None:
    runners = [run(1, "low", {"a": 4}, start=100.0), run(2, "low", {"b": 4}, start=0.0)]
    policy = Policy(mode=REQUEUE, exempt_time=50, qos=QOS)
    assert [r.id for r in candidates("high", ("a", "b"), runners, policy, now=120.0)] == [2]
    got = choose(setup(runners, ("a", "b")), job(9, need=need(cpus=4)), "high", runners, policy,
                 now=120.0)
    assert got is not None and got.victims == (Victim(2, REQUEUE),) and got.nodes == ("b",)


def test_the_fewest_lowest_victims_that_let_the_job_start() -> None:
    # a and b full of low jobs, c holds a scavenger: the scavenger goes first and suffices
    runners = [run(1, "low", {"a": 4}), run(2, "low", {"b": 4}), run(3, "scav", {"c": 4})]
    got = choose(setup(runners), job(9, need=need(cpus=4)), "high", runners, POLICY, now=1.0)
    assert got is not None
    assert got.victims == (Victim(3, CANCEL, 30),) and got.nodes == ("c",)


def test_two_nodes_take_two_victims_and_no_more() -> None:
    runners = [run(1, "low", {"a": 4}), run(2, "low", {"b": 4}), run(3, "low", {"c": 4})]
    got = choose(setup(runners), job(9, need=need(nodes=2, cpus=4)), "high", runners, POLICY,
                 now=1.0)
    assert got is not None
    assert [v.job_id for v in got.victims] == [1, 2] and got.nodes == ("a", "b")


def test_a_removed_job_off_the_chosen_nodes_is_spared() -> None:
    # job 1 (lowest, 1 cpu on a) is removed first but does not free enough; job 2 frees b whole
    runners = [run(1, "scav", {"a": 1}), run(2, "low", {"b": 4}), run(4, "normal", {"a": 3})]
    got = choose(setup(runners, ("a", "b")), job(9, need=need(cpus=4)), "high", runners, POLICY,
                 now=1.0)
    assert got is not None and [v.job_id for v in got.victims] == [2] and got.nodes == ("b",)


def test_none_when_the_job_fits_or_nothing_helps_or_preemption_is_off() -> None:
    runners = [run(1, "low", {"a": 2})]
    c = setup(runners, ("a",))
    assert choose(c, job(9, need=need(cpus=2)), "high", runners, POLICY, now=1.0) is None  # fits
    assert choose(c, job(9, need=need(cpus=8)), "high", runners, POLICY, now=1.0) is None
    assert choose(c, job(9, need=need(cpus=4)), "low", runners, POLICY, now=1.0) is None
    off = Policy(mode=OFF, qos=QOS)
    assert choose(c, job(9, need=need(cpus=4)), "high", runners, off, now=1.0) is None
    got = choose(c, job(9, need=need(cpus=4)), "high", runners, POLICY, now=1.0)
    assert got is not None and got.victims == (Victim(1, REQUEUE),)


def test_a_qos_whose_mode_is_off_cannot_be_removed() -> None:
    q = {**QOS, "low": QosRule("low", priority=10, mode=OFF)}
    runners = [run(1, "low", {"a": 4}), run(2, "scav", {"b": 4})]
    policy = Policy(mode=REQUEUE, qos=q)
    got = choose(setup(runners, ("a", "b")), job(9, need=need(nodes=2, cpus=4)), "high", runners,
                 policy, now=1.0)
    assert got is None  # job 1 stays: two whole nodes cannot be had
    got = choose(setup(runners, ("a", "b")), job(9, need=need(cpus=4)), "high", runners, policy,
                 now=1.0)
    assert got is not None and [v.job_id for v in got.victims] == [2]


def test_the_same_inputs_give_the_same_choice() -> None:
    runners = [run(i, "low" if i % 2 else "scav", {n: 2}) for i, n in enumerate("abcabc", 1)]
    c = setup(runners)
    first = choose(c, job(9, need=need(nodes=2, cpus=4)), "high", runners, POLICY, now=1.0)
    again = choose(c, job(9, need=need(nodes=2, cpus=4)), "high", list(reversed(runners)),
                   POLICY, now=1.0)
    assert first is not None and first == again
    assert len(first.victims) == 4 and first.order[:2] != ()


def test_exempt_ends_names_when_the_first_exempt_victim_becomes_a_candidate() -> None:
    from ranch.sched.preempt import exempt_ends
    policy = Policy(mode=REQUEUE, exempt_time=60, qos=QOS)
    runners = [run(1, "low", {"a": 4}, start=100.0), run(2, "low", {"b": 4}, start=30.0),
               run(3, "normal", {"a": 1}, start=100.0), run(4, "low", {"z": 1}, start=110.0)]
    assert exempt_ends("high", ("a", "b"), runners, policy, now=120.0) == 160.0
    assert exempt_ends("high", ("a", "b"), runners, policy, now=200.0) is None
    assert exempt_ends("low", ("a", "b"), runners, policy, now=120.0) is None
