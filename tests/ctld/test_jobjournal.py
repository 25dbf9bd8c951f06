"""The store's journal: every change a reply confirms is on disk before the reply, survives the
loss of the controller before any state save, and the journal empties once a save holds it."""

from __future__ import annotations

import os

import trio
import trio.testing

from ranch.ctld.daemon import Daemon
from ranch.ctld.state import journalfile
from ranch.ctld.state.groupcommit import GroupCommit
from ranch.ctld.state.store import ID_BLOCK, FileStore
from ranch.protocol import durable
from ranch.protocol import messages as m

from .helpers import FakeConn, beat, hardware, make_config, register


def submit_msg(**kw) -> m.SubmitJob:
    return m.SubmitJob(script="#!/bin/sh\ntrue\n", user="alice", uid=1000, gid=1000,
                       workdir="/home/alice", **kw)


def daemon(tmp_path) -> Daemon:
    return Daemon(make_config(), b"k" * 32, state_dir=str(tmp_path), host="127.0.0.1", port=0,
                  save_in_thread=False)


def job_states(store: FileStore) -> list[tuple[int, str]]:
    return [(r["job"]["id"], r["job"]["state"]) for r in store.read() if "job" in r]


async def test_group_commit_writes_each_batch_once(tmp_path) -> None:
    j = FileStore(str(tmp_path), in_thread=True)
    async with trio.open_nursery() as nursery:
        for i in range(1, 21):
            nursery.start_soon(j.commit, [{"job": {"id": i}}])
    assert sorted(e["job"]["id"] for e in j.read()) == list(range(1, 21))
    assert j.writes == 1  # one round's commits: its first waiter wrote them all
    with open(j.path, "ab") as f:
        # a write cut short by a crash (what this release appends: a sealed record's start)
        f.write(journalfile.encode({"seq": 21, "job": {"id": 21}})[:30])
    assert sorted(e["job"]["id"] for e in j.read()) == list(range(1, 21))
    # a snapshot built now holds records 1-20; a record made while it is written is kept
    doc = {"journal_seq": j.seq, "nodes": {}, "jobs": {}}
    keep_from = j.rotate()
    await j.commit([{"job": {"id": 21}}])
    await j.snapshot(doc, keep_from)
    assert [e["seq"] for e in j.read()] == [21]
    doc = {"journal_seq": j.seq, "nodes": {}, "jobs": {}}
    await j.snapshot(doc, j.rotate())
    assert j.read() == []


class Passes(trio.abc.Instrument):
    """Counts the scheduler's passes (each ends in one wait for I/O)."""

    def __init__(self) -> None:
        self.n = 0

    def before_io_wait(self, timeout: float) -> None:
        self.n += 1


async def _round_of_commits(on_loop: bool) -> tuple[list[list[int]], list[int]]:
    """Five commits started in one scheduling round: (what each write held, the passes each
    waiter took from its append to its return)."""
    appended: list[int] = []
    writes: list[list[int]] = []

    async def write() -> None:
        writes.append(sorted(appended))

    commits = GroupCommit(write, "journal write failed", on_loop=on_loop)
    passes = Passes()
    took: list[int] = []

    async def commit(i: int) -> None:
        appended.append(i)
        ticket, start = commits.ticket(), passes.n
        await commits.wait(ticket)
        took.append(passes.n - start)

    trio.lowlevel.add_instrument(passes)
    try:
        async with trio.open_nursery() as outer:
            outer.start_soon(commits.run)
            await trio.testing.wait_all_tasks_blocked()  # the committer (if any) waits to be woken
            async with trio.open_nursery() as nursery:
                for i in range(5):
                    nursery.start_soon(commit, i)
            outer.cancel_scope.cancel()
    finally:
        trio.lowlevel.remove_instrument(passes)
    return writes, took


async def test_a_round_of_commits_is_written_by_its_first_waiter_a_pass_sooner() -> None:
    """With a write that never yields (FileStore's), a round's first waiter writes every
    record the round appended, after one checkpoint, and each waiter returns in the next pass.
    Handing the write to a committer task (etcd's) takes three: the committer wakes, takes its
    lock (a checkpoint), writes, and wakes the waiters."""
    writes, took = await _round_of_commits(on_loop=True)
    assert writes == [[0, 1, 2, 3, 4]] and took == [1] * 5
    writes, took = await _round_of_commits(on_loop=False)
    assert writes == [[0, 1, 2, 3, 4]], took
    assert took == [3] * 5, took


async def test_acknowledged_jobs_survive_a_crash_before_any_save(tmp_path) -> None:
    d = daemon(tmp_path)
    register(d.controller.traffic, "n1")
    replies = [await d.durability.submit(submit_msg(cpus_per_task=4)) for _ in range(2)]
    arr = await d.durability.submit(submit_msg(array="1-3"))
    assert [r.job_id for r in replies] == [1, 2] and arr.job_ids == (3, 4, 5)
    bad = await d.durability.submit(submit_msg(partition="nope"))
    assert isinstance(bad, m.Error)
    # no state save happened: a new controller finds every acknowledged job in the journal
    d2 = daemon(tmp_path)
    d2.restore()
    jobs = d2.controller.jobs.store.jobs
    assert sorted(jobs) == [1, 2, 3, 4, 5]
    assert jobs[1].state == "RUNNING" and jobs[2].state == "PENDING"
    # n1 comes back with job 1 still running
    reply = d2.controller.traffic.register(m.Register("n1", hardware(), 1.0, "0.1.0", job_ids=(1,),
                                           runs=((1, 0),)), FakeConn())
    assert reply.accepted and reply.kill_job_ids == () and reply.kill_runs == ()
    assert d2.controller.registry.nodes["n1"].state.cpus_alloc == 4  # job 1's allocation came back
    assert jobs[1].state == "RUNNING" and jobs[1].restarts == 0
    assert d2.controller.jobs.store.next_id == 2 + ID_BLOCK  # a crash: ids resume past the id mark
    # a save holding them empties the journal; a third start reads them from the state file
    doc = d2.saver.snapshot_doc()
    await d2.store.snapshot(doc, doc["journal_keep_from"])
    assert d2.store.read() == []
    d3 = daemon(tmp_path)
    d3.restore()
    assert sorted(d3.controller.jobs.store.jobs) == [1, 2, 3, 4, 5]


async def test_a_failed_journal_write_refuses_the_job_and_nothing_runs(tmp_path) -> None:
    """A job the journal could not hold is refused, retracted and never launched (its
    LaunchJob waited for that write), and its id is not handed out again."""
    d = daemon(tmp_path)
    _, conn = register(d.controller.traffic, "n1")
    await d.durability.durable()
    os.remove(d.store.path)
    os.mkdir(d.store.path)  # opening it for append now fails (EISDIR)
    reply = await d.durability.submit(submit_msg())
    assert isinstance(reply, m.Error) and reply.code == "internal"
    assert "could not be written" in reply.message and d.store.path in reply.message
    assert d.controller.jobs.store.jobs == {} and d.controller.jobs.store.pending == []
    assert not [p for p in conn.pushed if isinstance(p, m.LaunchJob)]
    assert d.controller.registry.nodes["n1"].state.cpus_alloc == 0
    os.rmdir(d.store.path)
    again = await d.durability.submit(submit_msg())
    assert isinstance(again, m.SubmitReply) and again.job_id == 2
    assert d.controller.jobs.store.jobs[2].state == "RUNNING"
    # journalled once, as it stands at the reply (placed and RUNNING: one write)
    assert job_states(d.store) == [(2, "RUNNING")]
    assert not [p for p in conn.pushed if isinstance(p, m.LaunchJob)]  # not before the outbox
    assert await d.durability.flush_outbox()
    assert [p.job.job_id for p in conn.pushed if isinstance(p, m.LaunchJob)] == [2]


async def test_a_failed_write_refuses_every_waiter_whose_line_it_held(tmp_path,
                                                                     monkeypatch) -> None:
    j = FileStore(str(tmp_path), in_thread=True)
    await j.commit([{"job": {"id": 1}}])
    real = durable.write_all_fsync
    calls = 0

    def write_failing_once(fd: int, data: bytes) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            real(fd, data[: len(data) // 2])  # torn: the file must not keep it
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(durable, "write_all_fsync", write_failing_once)
    outcome: dict[int, str] = {}

    async def submit(i: int) -> None:
        try:
            await j.commit([{"job": {"id": i}}])
            outcome[i] = "ok"
        except OSError:
            outcome[i] = "refused"

    async with trio.open_nursery() as nursery:
        for i in range(2, 11):
            nursery.start_soon(submit, i)
    refused = {i for i, o in outcome.items() if o == "refused"}
    on_disk = {e["job"]["id"] for e in j.read()}
    assert refused == set(range(2, 11))  # one failed write held them all: all are told
    # an acknowledged record is on disk; a refused one is not (and is not replayed later)
    assert on_disk == {1}
    await submit(11)
    records = j.read()
    assert outcome[11] == "ok" and 11 in {e["job"]["id"] for e in records if "job" in e}
    # the numbers the failed write took are voided in front of the next write's records, so
    # the journal runs without a gap (a gap is refused at start: ctld/state/continuity.py)
    assert [(e["seq"], e.get("void_from")) for e in records] == [(1, None), (10, 2), (11, None)]
    assert FileStore(str(tmp_path)).load()[1] == records


async def test_a_drain_is_on_disk_before_its_reply_and_a_full_disk_says_so(tmp_path) -> None:
    """An admin change is journalled before rcontrol hears "done"; when it cannot be, the
    command is told so (Server answers an Error), and a restart finds what was confirmed."""
    d = daemon(tmp_path)
    register(d.controller.traffic, "n1")
    register(d.controller.traffic, "n2")
    await d.durability.durable()
    r = d.controller.update_nodes(m.UpdateNodes("n1", "DRAIN", "bad fan", "root"))
    assert r.ok
    await d.durability.durable()  # what the server awaits before it sends r
    d2 = daemon(tmp_path)
    d2.restore()
    assert d2.controller.registry.nodes["n1"].complete.startswith("IDLE+DRAIN")
    assert d2.controller.registry.nodes["n1"].state.reason.text == "bad fan"
    os.remove(d.store.path)
    os.mkdir(d.store.path)  # the next append fails
    d.controller.update_nodes(m.UpdateNodes("n2", "DRAIN", "disk", "root"))
    try:
        await d.durability.durable()
        raise AssertionError("durable() must fail on a full disk")
    except OSError:
        pass
    assert "n2" in d.changes.take().nodes  # kept for the next try


async def test_replay_never_rolls_a_newer_snapshot_back(tmp_path) -> None:
    d = daemon(tmp_path)
    register(d.controller.traffic, "n1")
    sub = await d.durability.submit(submit_msg())
    assert d.controller.jobs.store.jobs[sub.job_id].state == "RUNNING"
    doc = d.saver.snapshot_doc()
    await d.store.snapshot(doc, doc["journal_keep_from"])
    # a journal line older than the snapshot (a delete that did not reach the disk) is not
    # replayed over it
    with open(d.store.path, "ab") as f:
        f.write(b'{"seq": 1, "job": {"id": 1, "state": "PENDING"}}\n')
    d2 = daemon(tmp_path)
    d2.restore()
    assert d2.controller.jobs.store.jobs[1].state == "RUNNING"


async def test_a_jobs_script_lives_in_its_own_files_not_in_memory_or_saves(tmp_path) -> None:
    """After the first snapshot a job's script and environment are in StateSaveLocation/jobs/
    (written once), out of memory and of every later state file; its next launch reads them."""
    from ranch.ctld.state import bulkfiles

    d = daemon(tmp_path)
    _, conn = register(d.controller.traffic, "n1")
    big = "#!/bin/sh\n" + "# padding\n" * 5000 + "true\n"
    sub = await d.durability.submit(m.SubmitJob(script=big, user="alice", uid=1000, gid=1000,
                                         workdir="/home/alice", env=(("SECRET", "x" * 100),)))
    jobs = d.controller.jobs
    assert await d.saver.save_snapshot()
    job = jobs.store.jobs[sub.job_id]
    assert job.req.script == "" and job.req.env == () and job.bulk_on_disk
    assert job.bulk_at is not None and job.bulk_at[0] in bulkfiles.packs(str(tmp_path))
    assert bulkfiles.read_packed(str(tmp_path), sub.job_id, job.bulk_at) == (
        big, (("SECRET", "x" * 100),))
    assert await d.saver.save_snapshot()
    assert b"padding" not in (tmp_path / "node_state.json").read_bytes()
    # requeued: the new run's LaunchJob carries the script read back from its file
    r = jobs.commands.control(m.JobControl(job_ids=(sub.job_id,), action="requeue", user="root",
                                          uid=0))
    assert r.ok, r.errors
    end = m.JobEnd(sub.job_id, "CANCELLED", signal=15, restarts=0)
    beat(d.controller.traffic, "n1", conn, 99, jobs_ended=(end,))
    await d.durability.flush_outbox()
    launches = [p.job for p in conn.pushed if isinstance(p, m.LaunchJob)]
    assert [(s.restarts, s.script == big) for s in launches] == [(0, True), (1, True)]
    # a restart reads the flag and the files, not a script in the state file
    d2 = daemon(tmp_path)
    d2.restore()
    again = d2.controller.jobs.store.jobs[sub.job_id]
    assert again.bulk_on_disk and again.req.script == ""


async def test_a_pack_of_bulk_goes_with_the_last_job_in_it_and_old_job_dirs_still_read(
        tmp_path) -> None:
    """A snapshot packs the bulk of every new job into one file (ctld/state/bulkfiles.py); the file
    is removed once its last job is purged, after a snapshot without them is on disk. A script
    that is not UTF-8 comes back byte for byte; a job saved in an earlier version's own
    directory is still launched from it; a pack no saved job points into goes at restart."""
    from ranch.ctld.jobs import acct
    from ranch.ctld.state import bulkfiles

    d = daemon(tmp_path)
    jobs = d.controller.jobs
    ids = [(await d.durability.submit(submit_msg(hold=True, env=(("N", str(i)),)))).job_id
           for i in range(3)]
    assert await d.saver.save_snapshot()
    (pack,) = bulkfiles.packs(str(tmp_path))
    assert {jobs.store.jobs[j].bulk_at[0] for j in ids} == {pack}
    for i, jid in enumerate(ids):
        got = bulkfiles.read_packed(str(tmp_path), jid, jobs.store.jobs[jid].bulk_at)
        assert got == ("#!/bin/sh\ntrue\n", (("N", str(i)),))
    odd = b"#!/bin/sh\necho \xff\xfe\n".decode("utf-8", "surrogateescape")
    (where,) = bulkfiles.write_pack(str(tmp_path), 50, [(5, odd, ())])
    assert bulkfiles.read_packed(str(tmp_path), 5, (50, *where[1:])) == (odd, ())
    bulkfiles.remove_pack(str(tmp_path), 50)
    with_bulk = jobs.store.jobs[ids[0]]
    with_bulk.bulk_at = (pack, with_bulk.bulk_at[1] + 1, with_bulk.bulk_at[2])
    try:
        bulkfiles.read_packed(str(tmp_path), ids[0], with_bulk.bulk_at)
        raise AssertionError("a misplaced entry was read")
    except ValueError:
        pass
    jobs.settings.min_job_age = 0.0
    r = jobs.commands.cancel(m.CancelJobs(job_ids=tuple(ids[:2]), user="alice", uid=1000))
    assert r.ok, r.errors
    acct.flush_now(jobs.history)
    assert await d.saver.save_snapshot()
    assert ids[0] not in jobs.store.jobs and bulkfiles.packs(str(tmp_path)) == [pack]
    # a job of an earlier version: its bulk in jobs/hash.N/job.ID/
    legacy = jobs.store.jobs[ids[2]]
    path = bulkfiles.job_dir(str(tmp_path), legacy.id)
    os.makedirs(path)
    with open(os.path.join(path, "script"), "w") as f:
        f.write("#!/bin/sh\necho legacy\n")
    with open(os.path.join(path, "environment"), "w") as f:
        f.write('[["L","1"]]')
    legacy.bulk_at = None
    jobs.store.packs.clear()
    jobs.store.packs_gone.append(pack)
    jobs.store.touch(legacy)
    assert await d.saver.save_snapshot()
    assert bulkfiles.packs(str(tmp_path)) == []
    assert d.controller.jobs.launcher._bulk(legacy) == ("#!/bin/sh\necho legacy\n", (("L", "1"),))
    r = jobs.commands.cancel(m.CancelJobs(job_ids=(legacy.id,), user="alice", uid=1000))
    assert r.ok, r.errors
    acct.flush_now(jobs.history)
    assert await d.saver.save_snapshot()
    assert not os.path.exists(path)
    # a pack no saved record points into (written by a snapshot whose state save failed)
    bulkfiles.write_pack(str(tmp_path), 7, [(99, "#!/bin/sh\n", ())])
    d2 = daemon(tmp_path)
    d2.restore()
    assert d2.saver.next_pack == 8
    assert await d2.saver.save_snapshot()
    assert bulkfiles.packs(str(tmp_path)) == []
