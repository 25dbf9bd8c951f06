"""sbatch -d and -C as slurmctld 22.05 judges them: the dependency list read and judged against
a job table (pure), and Features expressions read and matched node by node."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from ranch.ctld.jobs import dependencies
from ranch.ctld.jobs.dependencies import FAILED, FULFILLED, NEVER, PENDING, SATISFIED, UNFULFILLED
from ranch.protocol import messages as m
from ranch.sched import features as constraints


@dataclass
class J:
    id: int
    state: str = "PENDING"
    start_time: float | None = None
    array_job_id: int = 0
    array_task_id: int | None = None
    name: str = "job"
    uid: int = 1000
    req: m.SubmitJob = field(init=False)

    def __post_init__(self) -> None:
        self.req = m.SubmitJob(script="#!/bin/sh\n", user="u", uid=self.uid, gid=1,
                               workdir="/", name=self.name)


def judge(text: str, me: J, *others: J, wall: float = 1000.0, states=None):
    table = {j.id: j for j in (*others, me)}
    return dependencies.evaluate(dependencies.parse(text), states, me, table, wall)


@pytest.mark.parametrize(("kind", "dep_state", "verdict"), [
    ("afterok", "RUNNING", PENDING), ("afterok", "COMPLETED", SATISFIED),
    ("afterok", "FAILED", NEVER), ("afterok", "CANCELLED", NEVER),
    ("afternotok", "COMPLETED", NEVER), ("afternotok", "TIMEOUT", SATISFIED),
    ("afternotok", "PENDING", PENDING), ("afterany", "FAILED", SATISFIED),
    ("afterany", "COMPLETING", PENDING), ("after", "PENDING", PENDING),
    ("after", "RUNNING", SATISFIED), ("after", "CANCELLED", SATISFIED),
])
def test_each_kind_against_the_other_jobs_state(kind: str, dep_state: str,
                                                verdict: str) -> None:
    assert judge(f"{kind}:1", J(2), J(1, dep_state, start_time=1.0))[0] == verdict


def test_comma_needs_all_question_mark_needs_one() -> None:
    a, b = J(1, "COMPLETED"), J(2, "RUNNING")
    assert judge("afterok:1,afterok:2", J(3), a, b)[0] == PENDING
    assert judge("afterok:1?afterok:2", J(3), a, b)[0] == SATISFIED
    assert judge("afterok:1:2", J(3), a, J(2, "FAILED"))[0] == NEVER
    # every alternative failed: never; one still open: pending
    assert judge("afterok:1?afterok:2", J(3), J(1, "FAILED"), J(2, "FAILED"))[0] == NEVER
    assert judge("afterok:1?afterok:2", J(3), J(1, "FAILED"), b)[0] == PENDING


def test_decided_elements_stay_decided_and_a_gone_job_lifts_its_element() -> None:
    verdict, states, _ = judge("afterok:1?afterok:2", J(3), J(1, "FAILED"), J(2, "RUNNING"))
    assert (verdict, states) == (PENDING, (FAILED, UNFULFILLED))
    # job 1 purged from the table: its element stays failed, not lifted
    assert judge("afterok:1?afterok:2", J(3), J(2, "FAILED"), states=states)[0] == NEVER
    assert judge("afterok:77", J(3))[:2] == (SATISFIED, (FULFILLED,))  # never heard of


def test_after_with_minutes_wakes_at_the_right_time() -> None:
    verdict, _, wake = judge("after:1+2", J(2), J(1, "RUNNING", start_time=900.0), wall=960)
    assert (verdict, wake) == (PENDING, 1020.0)
    assert judge("after:1+2", J(2), J(1, "RUNNING", start_time=900.0), wall=1020)[0] == SATISFIED


def test_arrays_whole_or_one_task_and_aftercorr() -> None:
    tasks = [J(10 + i, "COMPLETED" if i else "RUNNING", array_job_id=10, array_task_id=i)
             for i in range(3)]
    assert judge("afterok:10", J(20), *tasks)[0] == PENDING  # the whole array
    assert judge("afterok:10_*", J(20), *tasks)[0] == PENDING
    assert judge("afterok:10_2", J(20), *tasks)[0] == SATISFIED
    me = J(30, array_job_id=30, array_task_id=1)
    assert judge("aftercorr:10", me, *tasks)[0] == SATISFIED  # task 1 of 10 is done
    assert dependencies.describe(dependencies.parse("afterok:10"), None,
                                 {t.id: t for t in tasks}) == "afterok:10_*(unfulfilled)"


def test_singleton_waits_for_the_users_other_job_of_that_name() -> None:
    assert judge("singleton", J(5, name="a"), J(4, "RUNNING", name="a"))[0] == PENDING
    assert judge("singleton", J(5, name="a"), J(4, "RUNNING", name="b"))[0] == SATISFIED
    assert judge("singleton", J(5, name="a"), J(4, "RUNNING", name="a", uid=7))[0] == SATISFIED
    assert judge("singleton", J(5, name="a"), J(6, "PENDING", name="a"))[0] == SATISFIED
    assert judge("singleton", J(5, name="a"), J(3, "PENDING", name="a"))[0] == PENDING


def test_the_shown_string_lists_what_is_not_fulfilled() -> None:
    spec = dependencies.parse("afterok:1,after:2+5,singleton")
    assert dependencies.describe(spec, (FULFILLED, UNFULFILLED, FAILED), {}) == \
        "after:2+5(unfulfilled),singleton(failed)"
    assert dependencies.describe(dependencies.parse("afterok:1?afterok:2"),
                                 (FAILED, UNFULFILLED), {}) == \
        "afterok:1(failed)?afterok:2(unfulfilled)"
    assert dependencies.describe(spec, (FULFILLED,) * 3, {}) == "(null)"


@pytest.mark.parametrize("text", ["afterok", "afterok:", "afterok:x", "afterok:0",
                                  "afterfoo:1", "afterok:1,", "afterok:1+0", "afterok:1;2",
                                  "expand:3", "afterok:1_", "singletonx"])
def test_malformed_dependencies_are_a_job_dependency_problem(text: str) -> None:
    with pytest.raises(dependencies.DependencyError, match="Job dependency problem"):
        dependencies.parse(text)


def test_well_formed_dependencies() -> None:
    spec = dependencies.parse("12,afterok:3:4_2+1,AFTERANY:5_*?singleton")
    assert spec.any and [(d.kind, d.job_id, d.task, d.whole_array, d.minutes)
                         for d in spec.deps] == [
        ("afterany", 12, None, False, 0), ("afterok", 3, None, False, 0),
        ("afterok", 4, 2, False, 1), ("afterany", 5, None, True, 0),
        ("singleton", 0, None, False, 0)]
    assert dependencies.parse("afterok:3(failed)").deps[0].state == FAILED
    assert dependencies.evaluate(dependencies.parse(""), None, J(1), {}, 0.0) == (
        SATISFIED, (), math.inf)


@pytest.mark.parametrize(("expr", "features", "want"), [
    ("intel", {"intel"}, True), ("intel", {"amd"}, False),
    ("intel&ib", {"intel", "ib"}, True), ("intel,ib", {"intel"}, False),
    ("intel|amd", {"amd"}, True), ("(intel|amd)&ib", {"amd", "ib"}, True),
    ("(intel|amd)&ib", {"amd"}, False),
    # no precedence, left to right, as slurmctld reads it: (a|b)&c
    ("a|b&c", {"a"}, False), ("a|b&c", {"a", "c"}, True), ("a&b|c", {"c"}, True),
])
def test_feature_expressions(expr: str, features: set[str], want: bool) -> None:
    assert constraints.matches(constraints.parse(expr), features) is want


@pytest.mark.parametrize(("expr", "why"), [
    ("[a|b]", "bracketed"), ("a*2", "counts"), ("(a|b", "unbalanced"), ("a&", "missing"),
    ("((a))", "nested"), ("a)b", "unexpected"),
])
def test_feature_expressions_ranch_cannot_place_are_refused(expr: str, why: str) -> None:
    with pytest.raises(constraints.ConstraintError, match=why):
        constraints.parse(expr)
    assert constraints.check(expr, {"a", "b"}).startswith("Invalid feature specification")


def test_unknown_features_are_an_invalid_feature_specification() -> None:
    assert constraints.check("a&zzz", {"a"}) == (
        "Invalid feature specification: no node has feature(s) zzz")
    assert isinstance(constraints.check("a|b", {"a", "b"}), constraints.Op)
