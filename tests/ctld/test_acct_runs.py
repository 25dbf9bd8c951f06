"""Each finished run's history record (ctld/jobs/acct.py) in an assembled controller: built once,
when its batch is taken, from the job as it then is; a job requeued before that keeps the
record of the run that ended, and its next run gets a record of its own."""

from __future__ import annotations

from pathlib import Path

from ranch.ctld.jobs.history import FileHistory
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, wall
from .test_jobs import Beats, end, job, rec, up


def runs(batch: list[dict]) -> list[tuple[int, int, str, str]]:
    return [(r["job_id"], r["restarts"], r["state"], r["nodes"]) for r in batch]


def started(tmp_path: Path) -> tuple[Cluster, FileHistory, Beats, int]:
    h = FileHistory(str(tmp_path / "hist"))
    cluster = Cluster(make_config(), wall=wall, history=h)
    beats = Beats(cluster, up(cluster, "n1"))
    j = cluster.jobs.submission.submit(job(cpus_per_task=4)).job_id
    assert rec(cluster, j)["state"] == "RUNNING"
    return cluster, h, beats, j


def requeue(cluster: Cluster, j: int) -> None:
    assert cluster.jobs.commands.control(m.JobControl("requeue", (j,), "alice", 1000)).ok


async def test_a_run_s_record_is_the_job_as_it_is_when_its_batch_is_taken(tmp_path) -> None:
    cluster, h, beats, j = started(tmp_path)
    beats("n1", jobs_ended=(end(j, "FAILED", code=3),))
    batch = h.take()
    assert runs(batch) == [(j, 0, "FAILED", "n1")]
    listed = rec(cluster, j)
    assert all(batch[0][k] == listed[k] for k in ("exit_code", "start_time", "end_time"))


async def test_a_job_requeued_before_its_record_is_taken_keeps_the_run_that_ended(
        tmp_path) -> None:
    cluster, h, beats, j = started(tmp_path)
    beats("n1", jobs_ended=(end(j, "COMPLETED"),))
    ended_at = rec(cluster, j)["end_time"]
    requeue(cluster, j)
    assert rec(cluster, j)["restarts"] == 1 and rec(cluster, j)["state"] == "RUNNING"
    batch = h.take()
    assert runs(batch) == [(j, 0, "COMPLETED", "n1")] and batch[0]["end_time"] == ended_at
    h.written(batch, ok=True)
    beats("n1", jobs_ended=(end(j, "COMPLETED", restarts=1),))
    assert runs(h.take()) == [(j, 1, "COMPLETED", "n1")]


async def test_a_requeue_after_the_record_was_taken_adds_nothing_to_it(tmp_path) -> None:
    cluster, h, beats, j = started(tmp_path)
    beats("n1", jobs_ended=(end(j, "COMPLETED"),))
    batch = h.take()
    requeue(cluster, j)
    assert h.take() == [] and runs(batch) == [(j, 0, "COMPLETED", "n1")]
    h.written(batch, ok=True)
    assert h.unwritten(j) is False
