"""The submission journal: an acknowledged job is on disk before its reply, survives the loss of
the controller before any state save, and the journal empties once a save holds it."""

from __future__ import annotations

import os

import trio

from ctld import statefile
from ctld.daemon import Daemon
from ctld.jobjournal import Journal
from protocol import messages as m

from .helpers import FakeConn, hardware, make_config, register


def submit_msg(**kw) -> m.SubmitJob:
    return m.SubmitJob(script="#!/bin/sh\ntrue\n", user="alice", uid=1000, gid=1000,
                       workdir="/home/alice", **kw)


async def test_group_commit_writes_each_batch_once(tmp_path) -> None:
    j = Journal(str(tmp_path), in_thread=True)
    async with trio.open_nursery() as nursery:
        for i in range(1, 21):
            nursery.start_soon(j.commit, [{"id": i}])
    assert sorted(e["id"] for e in j.read()) == list(range(1, 21))
    assert 1 <= j.writes < 20  # submissions that met a write in progress shared the next one
    with open(j.path, "ab") as f:
        f.write(b'{"id": 21, "tor')  # a write cut short by a crash
    assert sorted(e["id"] for e in j.read()) == list(range(1, 21))
    await j.trim(saved_next_id=10)
    assert os.path.getsize(j.path) > 0  # it holds newer jobs than the save
    await j.trim(saved_next_id=22)
    assert os.path.getsize(j.path) == 0


async def test_acknowledged_jobs_survive_a_crash_before_any_save(tmp_path) -> None:
    d = Daemon(make_config(), b"k" * 32, state_dir=str(tmp_path), host="127.0.0.1", port=0)
    d.journal.in_thread = False
    register(d.cluster, "n1")
    replies = [await d.submit_job(submit_msg(cpus_per_task=4)) for _ in range(2)]
    arr = await d.submit_job(submit_msg(array="1-3"))
    assert [r.job_id for r in replies] == [1, 2] and arr.job_ids == (3, 4, 5)
    bad = await d.submit_job(submit_msg(partition="nope"))
    assert isinstance(bad, m.Error)
    # no state save happened: a new controller finds every acknowledged job in the journal
    d2 = Daemon(make_config(), b"k" * 32, state_dir=str(tmp_path), host="127.0.0.1", port=0)
    d2.restore()
    jobs = d2.cluster.jobs.jobs
    assert sorted(jobs) == [1, 2, 3, 4, 5]
    assert jobs[1].state == "RUNNING" and jobs[2].state == "PENDING"
    # n1 comes back with job 1 still running (it was UNKNOWN until then: no state file yet)
    reply = d2.cluster.register(m.Register("n1", hardware(), 1.0, "0.1.0", job_ids=(1,)),
                                FakeConn())
    assert reply.accepted and reply.kill_job_ids == ()
    assert d2.cluster.nodes["n1"].state.cpus_alloc == 4  # job 1's allocation came back
    assert jobs[1].state == "RUNNING" and jobs[1].restarts == 0
    assert d2.cluster.jobs.next_id == 6
    # a save holding them empties the journal; a third start reads them from the state file
    d2.save_now()
    await d2.journal.trim(d2.cluster.jobs.next_id)
    assert os.path.getsize(d2.journal.path) == 0
    d3 = Daemon(make_config(), b"k" * 32, state_dir=str(tmp_path), host="127.0.0.1", port=0)
    d3.restore()
    assert sorted(d3.cluster.jobs.jobs) == [1, 2, 3, 4, 5]


async def test_a_failed_journal_write_refuses_the_job_and_nothing_runs(tmp_path) -> None:
    """The journal write comes before queueing: a job the journal could not hold is refused
    and never launched, and its id is not handed out again."""
    d = Daemon(make_config(), b"k" * 32, state_dir=str(tmp_path), host="127.0.0.1", port=0)
    d.journal.in_thread = False
    _, conn = register(d.cluster, "n1")
    os.mkdir(d.journal.path)  # opening it for append now fails (EISDIR)
    reply = await d.submit_job(submit_msg())
    assert isinstance(reply, m.Error) and reply.code == "internal"
    assert "could not be written" in reply.message and d.journal.path in reply.message
    assert d.cluster.jobs.jobs == {} and d.cluster.jobs.pending == []
    assert not [p for p in conn.pushed if isinstance(p, m.LaunchJob)]
    assert d.cluster.nodes["n1"].state.cpus_alloc == 0
    os.rmdir(d.journal.path)
    again = await d.submit_job(submit_msg())
    assert isinstance(again, m.SubmitReply) and again.job_id == 2
    assert d.cluster.jobs.jobs[2].state == "RUNNING"
    # journalled as submitted before it was queued, then again once it started
    assert [(e["id"], e["state"]) for e in d.journal.read()] == [(2, "PENDING"), (2, "RUNNING")]


async def test_a_failed_write_refuses_every_waiter_whose_line_it_held(tmp_path,
                                                                     monkeypatch) -> None:
    j = Journal(str(tmp_path), in_thread=True)
    await j.commit([{"id": 1}])
    real = statefile.write_all_fsync
    calls = 0

    def write_failing_once(fd: int, data: bytes) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            real(fd, data[: len(data) // 2])  # torn: the file must not keep it
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(statefile, "write_all_fsync", write_failing_once)
    outcome: dict[int, str] = {}

    async def submit(i: int) -> None:
        try:
            await j.commit([{"id": i}])
            outcome[i] = "ok"
        except OSError:
            outcome[i] = "refused"

    async with trio.open_nursery() as nursery:
        for i in range(2, 11):
            nursery.start_soon(submit, i)
    refused = {i for i, o in outcome.items() if o == "refused"}
    on_disk = {e["id"] for e in j.read()}
    assert refused == set(range(2, 11))  # one failed write held them all: all are told
    # an acknowledged job is on disk; a refused one is not (and is not replayed later)
    assert on_disk == {1}
    await submit(11)
    assert outcome[11] == "ok" and 11 in {e["id"] for e in j.read()}


async def test_trim_keeps_only_jobs_newer_than_the_save(tmp_path) -> None:
    j = Journal(str(tmp_path), in_thread=True)
    next_id = 1
    for _ in range(50):  # steady submissions: the journal never holds only saved jobs
        await j.commit([{"id": next_id}, {"id": next_id + 1}])
        next_id += 2
        await j.trim(saved_next_id=next_id - 1)  # the save holds all but the last job
        assert [e["id"] for e in j.read()] == [next_id - 1]
    size = os.path.getsize(j.path)
    assert size < 40  # one line, not 100
    await j.trim(saved_next_id=next_id)
    assert os.path.getsize(j.path) == 0
