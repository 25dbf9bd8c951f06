"""rqueue without -r writes an array's pending tasks as one line, `12_[1-2]`, as squeue does:
the task ids folded as Slurm folds them (two tasks too: the old shortest-form fold wrote
`t1,t2`, so two pending tasks showed as `12_1`)."""

from __future__ import annotations

import pytest

from ranch.cli.squeue_jobs import collapse


def pending(array: int, task: int, reason: str = "Resources") -> dict:
    return {"job_id": array + task, "array_job_id": array, "array_task_id": task,
            "state": "PENDING", "reason": reason}


@pytest.mark.parametrize(("tasks", "shown"), [
    ([1, 2], "[1-2]"), ([3, 1, 2, 5], "[1-3,5]"), ([9, 10], "[9-10]"), ([2, 4], "[2,4]")])
def test_pending_tasks_fold_into_one_line(tasks: list[int], shown: str) -> None:
    out = collapse([pending(12, t) for t in tasks])
    assert [(j["array_job_id"], j["array_task_id"]) for j in out] == [(12, shown)]


def test_one_pending_task_or_another_reason_stays_its_own_line() -> None:
    jobs = [pending(12, 1), pending(12, 2, "Priority"), {**pending(12, 3), "state": "RUNNING"}]
    assert [j["array_task_id"] for j in collapse(jobs)] == [1, 2, 3]
