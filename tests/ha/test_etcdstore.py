"""The etcd store and the election against one real etcd member on loopback: what is written
comes back, megabyte records go in parts, a snapshot trims the journal, and a controller that
lost the seat can write nothing (etcd refuses it, and the store says so)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import orjson
import pytest
import trio

from ranch.conf.build import parse_config_text
from ranch.conf.errors import ConfigError
from ranch.ctld.pair.election import Election
from ranch.ctld.state.etcdclient import EtcdClient, EtcdUnavailable, delete_range, put
from ranch.ctld.state.etcdstore import CHUNK, EtcdStore, Fenced
from tests.deadline import scaled

pytestmark = pytest.mark.skipif(shutil.which("etcd") is None,
                                reason="needs etcd (apt-get install etcd-server)")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def etcd(tmp_path_factory):
    d = tmp_path_factory.mktemp("etcd")
    client, peer = _port(), _port()
    with open(d / "etcd.log", "wb") as log:
        proc = subprocess.Popen([
            "etcd", "--name", "t", "--data-dir", str(d / "data"),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"t=http://127.0.0.1:{peer}", "--pre-vote=true",
            "--logger", "zap", "--log-level", "error"], stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"127.0.0.1:{client}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                trio.run(EtcdClient([endpoint]).range, "/x")
                break
            except (OSError, EtcdUnavailable):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


_n = 0


def prefix() -> str:
    global _n
    _n += 1
    return f"/t{_n}-{time.monotonic_ns()}"


async def seat(endpoint: str, p: str, name: str = "a", ttl: int = 5) -> Election:
    e = Election(EtcdClient([endpoint]), p, name, ttl)
    await e.campaign()
    return e


def store(endpoint: str, e: Election, state_dir) -> EtcdStore:
    return EtcdStore(EtcdClient([endpoint]), e.prefix, e.key, e.epoch, str(state_dir),
                     on_fenced=e.fenced, alive=e.alive)


async def test_written_records_come_back_in_order_with_megabytes_in_parts(etcd, tmp_path
                                                                          ) -> None:
    p = prefix()
    e = await seat(etcd, p)
    s = store(etcd, e, tmp_path / "a")
    (tmp_path / "a").mkdir()
    big = "x" * (3 * CHUNK + 123)  # a 3 MB script: over etcd's 1.5 MiB request limit
    async with trio.open_nursery() as nursery:
        nursery.start_soon(s.commits.run)
        await s.commit([{"job": {"id": 1, "script": big}}])
        # three callers at once share one transaction (group commit)
        writes = s.writes
        async with trio.open_nursery() as inner:
            for i in (2, 3, 4):
                inner.start_soon(s.commit, [{"job": {"id": i}}])
        assert s.writes - writes == 1
        nursery.cancel_scope.cancel()
    again = store(etcd, e, tmp_path / "b")
    (tmp_path / "b").mkdir()
    await again.fetch()
    doc, records = again.load()
    assert doc is None
    assert sorted(r["job"]["id"] for r in records) == [1, 2, 3, 4]
    assert [r["seq"] for r in records] == [1, 2, 3, 4]
    assert records[0]["job"]["script"] == big
    assert again.seq == 4


async def test_a_snapshot_trims_what_it_holds_and_keeps_what_came_after(etcd, tmp_path) -> None:
    p = prefix()
    e = await seat(etcd, p)
    s = store(etcd, e, tmp_path)
    await s.commit([{"job": {"id": 1}}, {"job": {"id": 2}}])
    doc = {"jobs": {"next_id": 3, "jobs": [{"id": 1}, {"id": 2}]}, "journal_seq": s.seq,
           "pad": "y" * (CHUNK + 5)}  # a snapshot over one request goes in parts too
    s.rotate()
    await s.commit([{"job": {"id": 3}}])
    await s.snapshot(doc)
    kvs = await s.client.range(f"{p}/j/", f"{p}/j0".encode())
    assert len(kvs) == 1  # only the batch after the snapshot
    again = store(etcd, e, tmp_path)
    await again.fetch()
    got, records = again.load()
    assert got == doc
    assert [r["job"]["id"] for r in records] == [3]


class _SnapshotMidRead(EtcdClient):
    """A reader's client that lets the leader snapshot (and compact) right after the reader
    has read the snapshot's head and before it reads the journal: the interleaving CI met."""

    def __init__(self, endpoints: list[str], leader: EtcdStore, doc: dict) -> None:
        super().__init__(endpoints)
        self.leader, self.doc, self.reads = leader, doc, 0

    async def range(self, key, end=None, **kw):
        got = await super().range(key, end, **kw)
        self.reads += 1
        if key.endswith("/snap") and self.doc:
            doc, self.doc = self.doc, {}
            await self.leader.snapshot(doc)
        return got


async def test_a_reader_beside_the_leader_sees_one_moment_of_the_store(etcd, tmp_path) -> None:
    p = prefix()
    e = await seat(etcd, p)
    s = store(etcd, e, tmp_path / "a")
    (tmp_path / "a").mkdir()
    await s.commit([{"job": {"id": 1}}, {"job": {"id": 2}}])
    s.rotate()
    await s.commit([{"job": {"id": 3}}])
    doc = {"jobs": {"next_id": 4, "jobs": [{"id": 1}, {"id": 2}, {"id": 3}]},
           "journal_seq": s.seq}
    s.rotate()
    (tmp_path / "b").mkdir()
    reader = EtcdStore(_SnapshotMidRead([etcd], s, doc), p, "/none", 0, str(tmp_path / "b"))
    await reader.fetch()  # unpinned, it saw no snapshot and a journal with its start deleted
    got, records = reader.load()
    ids = sorted([j["id"] for j in (got or {}).get("jobs", {}).get("jobs", [])]
                 + [r["job"]["id"] for r in records])
    assert ids == [1, 2, 3]
    assert reader.client.reads > 7  # the snapshot's compaction made it read again


async def test_a_deposed_leader_can_write_nothing(etcd, tmp_path) -> None:
    p = prefix()
    old = await seat(etcd, p, "a")
    s = store(etcd, old, tmp_path)
    await s.commit([{"job": {"id": 1}}])
    await old.resign()  # its lease goes: the seat is free
    new = await seat(etcd, p, "b")
    assert new.epoch > old.epoch
    fenced = []
    s.on_fenced = lambda: fenced.append(True)
    with pytest.raises(Fenced):
        await s.commit([{"job": {"id": 2}}])
    assert fenced
    with pytest.raises(Fenced):
        await s.put_file("node_credentials.json", b"{}")
    fresh = store(etcd, new, tmp_path)
    await fresh.fetch()
    assert [r["job"]["id"] for r in fresh.load()[1]] == [1]


async def test_a_standby_waits_and_wins_when_the_seat_frees(etcd) -> None:
    p = prefix()
    a = await seat(etcd, p, "a")
    b = Election(EtcdClient([etcd]), p, "b", 5)
    won = []

    async def campaign() -> None:
        won.append(await b.campaign())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(campaign)
        await trio.sleep(1.0)
        assert not won and b.leader == "a"  # it stands by, and knows who leads
        await a.resign()
        with trio.fail_after(scaled(5)):
            while not won:
                await trio.sleep(0.05)
    assert won[0] > a.epoch and b.leader == "b"
    kvs = await b.client.range(b.key)
    assert orjson.loads(kvs[0][1])["name"] == "b"


async def test_a_leader_that_cannot_renew_stops_before_its_lease_can_lapse(etcd) -> None:
    p = prefix()
    e = await seat(etcd, p, "a", ttl=2)
    e.client.endpoints = ["127.0.0.1:1"]  # etcd out of reach from here on
    e.client._drop()
    start = trio.current_time()
    with trio.fail_after(5):
        await e.keep()
    assert e.lost.is_set()
    assert trio.current_time() - start < 2  # before the TTL: the seat was never held twice


BASE = "ClusterName=c\nSlurmctldHost=a\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"


def test_the_store_is_chosen_in_the_config() -> None:
    cfg = parse_config_text(BASE)
    assert cfg.control.state_store == "file"  # one host: nothing changes
    cfg = parse_config_text(BASE + "StateStore=etcd\nEtcdEndpoints=h1:2379,h2:2379\n")
    c = cfg.control
    assert (c.state_store, c.etcd_endpoints, c.etcd_prefix, c.etcd_lease_ttl) == (
        "etcd", ("h1:2379", "h2:2379"), "/ranch/c", 5)


@pytest.mark.parametrize(("lines", "where", "needle"), [
    ("StateStore=etcd\n", ":5:12:", "StateStore=etcd needs EtcdEndpoints"),
    ("StateStore=etcd\nEtcdEndpoints=h1\n", ":6:15:", "EtcdEndpoints: expected HOST:PORT"),
    ("StateStore=etcd\nEtcdEndpoints=h:1,h2\n", ":6:19:", "got 'h2'"),
    ("StateStore=raft\n", ":5:12:", "StateStore"),
    ("StateStore=etcd\nEtcdEndpoints=h:1\nEtcdLeaseTTL=1\n", ":7:", "EtcdLeaseTTL"),
    ("StateStore=etcd\nEtcdEndpoints=h:1\nEtcdPrefix=ranch\n", ":7:12:", "EtcdPrefix"),
])
def test_bad_store_settings_are_errors_naming_the_line(lines: str, where: str, needle: str
                                                       ) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config_text(BASE + lines)
    text = "\n".join(d.format() for d in info.value.errors)
    assert needle in text and f"<string>{where}" in text, text


async def test_events_and_history_come_back_bounded_and_fenced(etcd, tmp_path) -> None:
    """ctld/state/etcdrecords.py: event batches and history batches come back to the next leader's
    state directory (one event per seq, one record per run, merged with its own day file); a
    rewrite of the event log and a pruned history day leave etcd too; a deposed leader's
    history write fails (its jobs stay in the snapshot)."""
    from ranch.ctld.jobs.history import DIR_NAME, FileHistory, day_of
    from ranch.ctld.jobs.replicatedhistory import ReplicatedHistory
    from ranch.ctld.nodes import eventlog
    from ranch.ctld.state import etcdrecords

    p = prefix()
    e = await seat(etcd, p)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    s = store(etcd, e, a)
    ev = [{"seq": i, "time": time.time() + i, "kind": "state", "node": f"n{i}"}
          for i in range(1, 6)]
    await etcdrecords.put_events(s, ev[:3], None)
    await etcdrecords.put_events(s, ev[3:], None)
    await etcdrecords.put_events(s, [], ev[2:])  # the log rewritten: 1 and 2 are gone
    assert len(await s.client.range(f"{p}/e/", f"{p}/e0".encode())) == 2
    hist = ReplicatedHistory(str(a / DIR_NAME), s)
    now = time.time()
    old_day = now - 40 * 86400
    recs = [{"job_id": 1, "end_time": old_day}, {"job_id": 2, "end_time": now},
            {"job_id": 2, "end_time": now, "_verify": True}]  # offered again after a restart
    await trio.to_thread.run_sync(hist.write, recs)
    # the next leader had a record of its own for today (a reign before)
    mine = FileHistory(str(b / DIR_NAME))
    mine.write([{"job_id": 9, "end_time": now}])
    again = store(etcd, e, b)
    await again.fetch()
    log = eventlog.EventLog()
    log.load(str(b))
    assert [r["seq"] for r in log.events] == [3, 4, 5]
    assert sorted(r["job_id"] for r in mine.read()) == [1, 2, 9]
    gone = await trio.to_thread.run_sync(hist.prune, now, 30 * 86400)
    assert gone == [day_of(old_day)]
    assert not await s.client.range(f"{p}/h/{day_of(old_day)}/",
                                     f"{p}/h/{day_of(old_day)}0".encode())
    await e.resign()
    await seat(etcd, p, "other")
    with pytest.raises(Fenced):
        await trio.to_thread.run_sync(hist.write, [{"job_id": 3, "end_time": now}])


async def test_keys_deleted_from_etcd_are_refused_and_a_failed_write_leaves_no_gap(
        etcd, tmp_path) -> None:
    """As FileStore's files (ctld/state/continuity.py, issue 46): a journal batch, the snapshot,
    one of its parts or the credentials deleted from etcd are refused in one line, never read as
    a fresh start; a write that failed is voided in the next batch, so its numbers leave no
    gap."""
    p = prefix()
    e = await seat(etcd, p)
    s = store(etcd, e, tmp_path)
    await s.commit([{"job": {"id": 1}}])
    real, calls = s._txn, 0

    async def failing_once(ops):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise EtcdUnavailable("etcd did not answer")
        return await real(ops)

    s._txn = failing_once
    with pytest.raises(EtcdUnavailable):
        await s.commit([{"job": {"id": 2}}])  # refused to its caller: seq 2 is voided
    await s.commit([{"job": {"id": 3}}])
    await s.put_file("node_credentials.json", b"{}")
    doc = {"jobs": {"next_id": 4, "jobs": []}, "journal_seq": 1, "node_credentials": ["n1"],
           "pad": "y" * (CHUNK + 5)}  # in two parts
    s.rotate()
    await s.commit([{"job": {"id": 4}}])  # after the snapshot: seq 4, its own batch
    await s.snapshot(doc)
    await s.commit([{"job": {"id": 5}}])

    async def fetched() -> list[int]:
        again = store(etcd, e, tmp_path)
        await again.fetch()
        return [r["job"]["id"] for r in again.load()[1] if "job" in r]

    assert await fetched() == [3, 4, 5]  # the void record stands for seq 2
    batches = await s.client.range(f"{p}/j/", f"{p}/j0".encode())
    keys = [k.decode() for k, _, _ in batches]
    cases = [([keys[1]], "journal record 4 is missing: "),  # seq 4's batch (of 2, 3, 4, 5)
             ([f"{p}/snap"], "/snap (the snapshot) is missing: the journal starts at record"),
             ([f"{p}/s/{1:020d}/0000"], "(the snapshot) has 1 of its 2 parts"),
             ([f"{p}/f/node_credentials.json"], "node_credentials.json is missing, though the "
                                                "snapshot says nodes hold credentials (n1)")]
    for gone, said in cases:
        kept = [(k, v) for k, v, _ in await s.client.range(f"{p}/", f"{p}0".encode())]
        for key in gone:
            await s.transact([delete_range(key, key.encode() + b"\0")])
        with pytest.raises(ValueError, match=r"^missing state: .*") as err:
            await fetched()
        assert said in str(err.value), str(err.value)
        for key, value in kept:  # put back for the next case
            if key.decode() in gone:
                await s.transact([put(key, value)])
    assert await fetched() == [3, 4, 5]



async def test_the_accounting_tree_goes_through_etcd_as_through_files(etcd, tmp_path) -> None:
    """Issue 43: the tree's journal record and its snapshot part need nothing of their own."""
    from ranch.ctld.accounts.store import Accounts
    from ranch.ctld.state.changelog import ChangeLog
    from ranch.ctld.state.overlay import overlay
    from ranch.protocol import messages as m

    changes = ChangeLog()
    acc = Accounts(cluster="c1", enabled=True, changes=changes)
    p = prefix()
    e = await seat(etcd, p)
    s = store(etcd, e, tmp_path)
    acc.request(m.AcctmgrRequest(("add", "account", "a1"), ("immediate",)), "root", 0)
    await s.commit(acc.journal_records(changes.take()))
    await s.snapshot({"accounts": acc.save_doc(), "journal_seq": s.seq})
    acc.request(m.AcctmgrRequest(("add", "account", "a2"), ("immediate",)), "root", 0)
    await s.commit(acc.journal_records(changes.take()))
    again = store(etcd, e, tmp_path)
    await again.fetch()
    back = Accounts(cluster="c1", enabled=True, changes=ChangeLog())
    back.restore(overlay(*again.load())["accounts"])
    assert back.db == acc.db and {a.name for a in back.db.accounts} >= {"a1", "a2"}
