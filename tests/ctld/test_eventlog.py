"""The event log: count and age bounds, the file (append, rewrite, torn lines), followers that
fall behind, and the hook in Cluster._apply (drains, RESUME notes, LastChange)."""

from __future__ import annotations

import os

import trio

from ranch.ctld.daemon import Daemon
from ranch.ctld.nodes import eventlog
from ranch.ctld.nodes.eventlog import EventLog, Follower
from ranch.ctld.state import journalfile
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, wall


class Wall:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_count_and_age_bounds_hold() -> None:
    w = Wall()
    log = EventLog(max_events=5, max_age=100, wall=w)
    for i in range(12):
        log.add("state", f"n{i}")
        w.t += 1
    assert [e["node"] for e in log.query()] == [f"n{i}" for i in range(7, 12)]
    assert [e["seq"] for e in log.query()] == list(range(8, 13))
    w.t += 97  # now 1109: n7 (logged at 1007) and n8 (1008) are over 100 s old
    assert [e["node"] for e in log.query()] == ["n9", "n10", "n11"]
    assert log.query(nodes=["n9"])[0]["node"] == "n9"
    assert [e["node"] for e in log.query(limit=2)] == ["n10", "n11"]
    assert [e["node"] for e in log.query(since=1010.0)] == ["n10", "n11"]
    log.configure(2, 100)
    assert len(log.events) == 2


def test_file_is_appended_rewritten_within_bounds_and_survives_a_torn_line(tmp_path) -> None:
    d = str(tmp_path)
    w = Wall()
    log = EventLog(max_events=10, max_age=10**6, wall=w)
    for round_ in range(7):
        for i in range(7):
            log.add("state", f"n{i}", round=round_)
        eventlog.flush(log, d)
        lines = (tmp_path / eventlog.FILE_NAME).read_bytes().count(b"\n")
        assert lines <= eventlog.REWRITE_FACTOR * 10, lines
        assert lines == log.file_lines
    with open(tmp_path / eventlog.FILE_NAME, "ab") as f:
        # a crash in the middle of an append (what this release appends: a sealed record's
        # start; anything else at the end is damage, refused: ctld/state/journalfile.py)
        f.write(journalfile.encode({"seq": 999, "time": 10, "kind": "state"})[:25])
    again = EventLog(max_events=10, max_age=10**6, wall=w)
    again.add("early", "n0")  # logged at start-up, before the file is read
    again.load(d)
    kept = again.query()
    assert len(kept) == 10 and kept[-1]["kind"] == "early"
    assert [e["seq"] for e in kept] == sorted(e["seq"] for e in kept)
    assert kept[-1]["seq"] == log.seq + 1
    # Age applies to what is read back too.
    w.t += 10**7
    old = EventLog(max_events=10, max_age=60, wall=w)
    old.load(d)
    assert old.query() == []


def test_unsaved_events_stay_bounded_without_a_flusher(tmp_path) -> None:
    log = EventLog(max_events=4, wall=Wall())
    for i in range(10):
        log.add("state", "n1", i=i)
    assert [e["i"] for e in log.unsaved] == [6, 7, 8, 9]
    eventlog.flush(log, str(tmp_path))  # the file is rewritten from what is kept
    assert (tmp_path / eventlog.FILE_NAME).read_bytes().count(b"\n") == 4 and not log.rewrite


def test_follower_queue_is_bounded_and_counts_what_it_missed() -> None:
    log = EventLog(wall=Wall())
    slow = log.subscribe()
    only_n1 = log.subscribe(["n1"])
    slow.limit = 3
    for i in range(10):
        log.add("state", "n1" if i == 9 else "n2", i=i)
    assert [e["i"] for e in slow.queue] == [7, 8, 9] and slow.missed == 7
    assert [e["i"] for e in only_n1.queue] == [9] and only_n1.missed == 0

    async def take() -> tuple[list, int]:
        return await slow.next_batch()

    batch, missed = trio.run(take)
    assert ([e["i"] for e in batch], missed) == ([7, 8, 9], 7)
    assert slow.missed == 0 and not slow.queue
    log.unsubscribe(slow)
    log.add("state", "n2")
    assert not slow.queue


async def test_apply_hook_records_cause_user_reason_and_last_change(autojump_clock) -> None:
    c = Cluster(make_config(), wall=wall)
    c.start()
    register(c, "n1")
    c.update_nodes(m.UpdateNodes("n1", "DRAIN", "bad fan", "alice"))
    c.update_nodes(m.UpdateNodes("n1", "RESUME", "fan replaced", "bob"))
    drain, resume = c.eventlog.query(nodes=["n1"])[-2:]
    assert (drain["old"], drain["new"], drain["cause"], drain["user"], drain["reason"]) == (
        "IDLE", "IDLE+DRAIN", "admin:alice", "alice", "bad fan")
    assert (resume["new"], resume["user"], resume["reason"]) == ("IDLE", "bob", "fan replaced")
    assert c.nodes["n1"].last_change == resume["time"]
    kinds = [e["kind"] for e in c.eventlog.query(nodes=["n1"])]
    assert kinds[0] == "registered"


async def test_daemon_persists_events_and_reads_them_back(autojump_clock, tmp_path) -> None:
    d = Daemon(make_config(), b"k" * 32, state_dir=str(tmp_path), host="127.0.0.1", port=0,
               save_in_thread=False)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(d.saver.run_events)
        register(d.cluster, "n1")
        d.cluster.update_nodes(m.UpdateNodes("n1", "DRAIN", "bad fan", "alice"))
        await trio.sleep(1.0)
        nursery.cancel_scope.cancel()
    assert os.path.exists(tmp_path / eventlog.FILE_NAME)
    d2 = Daemon(make_config(), b"k" * 32, state_dir=str(tmp_path), host="127.0.0.1", port=0)
    d2.restore()
    assert [e["kind"] for e in d2.cluster.eventlog.query()][:2] == ["registered", "state"]


def test_follower_defaults() -> None:
    f = Follower()
    assert f.limit == eventlog.FOLLOW_QUEUE and f.nodes is None


async def test_drain_history_survives_job_churn(tmp_path) -> None:
    from ranch.statemachine import events

    c = Cluster(make_config(), wall=wall)
    for n in ("n1", "n2"):
        register(c, n)
    assert c.update_nodes(m.UpdateNodes("n2", "DRAIN", "bad dimm", "root")).ok
    follower = c.eventlog.subscribe(["n1"])
    node = c.nodes["n1"]
    for i in range(20_000):  # every job start and end on n1: IDLE <-> MIXED
        changed, err = c.apply_event(node, events.AllocationChanged(now=wall(),
                                                                    cpus_alloc=(i + 1) % 2))
        assert changed and err is None
    drains = [e for e in c.eventlog.query(nodes=["n2"]) if e.get("cause") == "admin:root"]
    assert drains and drains[-1]["reason"] == "bad dimm"
    assert not any(e.get("cause") == "allocation" for e in c.eventlog.query())
    eventlog.flush(c.eventlog, str(tmp_path))
    saved = (tmp_path / eventlog.FILE_NAME).read_bytes()
    assert b"bad dimm" in saved and b'"allocation"' not in saved
    # a follower still sees them (the newest, as many as its queue holds)
    assert len(follower.queue) == eventlog.FOLLOW_QUEUE and follower.missed > 0
    assert follower.queue[-1]["cause"] == "allocation" and node.last_change is not None
