"""A standby's listings (issue 47, SlurmctldParameters=standby_read_ms): the follower's copy of
the journal in etcd, the view built from it, and the age each reply states, under trio's
MockClock against an etcd whose answers take time. The rule checked: every change committed
before (reply time - stated age) is in the reply, and a copy that cannot be proven within the
bound answers nothing."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
import trio

from ranch.conf.ratelimit import standby_read_ms
from ranch.ctld.compose.standbyview import standby_view
from ranch.ctld.pair.follower import Follower, poll_interval
from ranch.ctld.pair.standbyreads import StandbyReads
from ranch.ctld.rpc.routes import jobs_listing
from ranch.ctld.rpc.wire import Prebuilt
from ranch.ctld.state import deferred
from ranch.ctld.state.etcdclient import EtcdUnavailable, b64, unb64
from ranch.protocol import messages as m
from tests.ctld.harness import Harness
from tests.ctld.helpers import FakeConn, make_config, register, wall

P = "/ranch/t"


class FakeEtcd:
    """Keys in memory; a read is answered `trip` seconds after it is sent, from the keys as
    they are half way (etcd evaluates it somewhere in between); `down` refuses every call."""

    def __init__(self) -> None:
        self.kv: dict[bytes, bytes] = {}
        self.trip = 0.0
        self.down = False
        self.seq = 0
        self.commits: list[tuple[float, int]] = []  # (trio time committed, last seq in it)

    def put(self, key: str, value: bytes) -> None:
        self.kv[key.encode()] = value

    def batch(self, jobs: list[int]) -> None:
        """One group commit of the leader: a job record per id."""
        first = self.seq + 1
        lines = b""
        for jid in jobs:
            self.seq += 1
            lines += orjson.dumps({"seq": self.seq, "job": {"id": jid}}) + b"\n"
        self.put(f"{P}/j/{first:020d}", lines)
        self.commits.append((trio.current_time(), self.seq))

    def snapshot(self, gen: int, jobs: list[int]) -> None:
        """A snapshot holding the journal so far; the journal it holds is deleted."""
        doc = {"journal_seq": self.seq, "jobs": {"next_id": max(jobs, default=0) + 1,
                                                 "jobs": [{"id": j} for j in jobs]}}
        self.kv = {k: v for k, v in self.kv.items() if not k.startswith(f"{P}/j/".encode())
                   and not k.startswith(f"{P}/s/".encode())}
        self.put(f"{P}/s/{gen:020d}/0000", orjson.dumps(doc))
        self.put(f"{P}/snap", orjson.dumps({"gen": gen, "parts": 1, "journal_seq": self.seq}))

    async def txn(self, compare: list, success: list[dict[str, Any]]) -> tuple[bool, dict]:
        if self.down:
            raise EtcdUnavailable("no endpoint answered")
        await trio.sleep(self.trip / 2)
        if self.down:
            raise EtcdUnavailable("no endpoint answered")
        responses = []
        for op in success:
            r = op["request_range"]
            key, end = unb64(r["key"]), unb64(r.get("range_end"))
            keys = sorted(k for k in self.kv if (k == key if not end else key <= k < end))
            responses.append({"response_range": {"kvs": [
                {"key": b64(k), "value": b64(self.kv[k])} for k in keys]}})
        await trio.sleep(self.trip / 2)
        return True, {"responses": responses}


def _fake_view(doc: dict[str, Any]):
    ids = sorted(int(j["id"]) for j in (doc.get("jobs") or {}).get("jobs", ()))

    def answer(msg: Any) -> Any:
        return Prebuilt("JobList", orjson.dumps({"generated_at": 0.0,
                                                 "jobs": [{"job_id": i} for i in ids]}))
    return answer


def _reply(reads: StandbyReads) -> tuple[float, set[int]] | None:
    got = reads.answer(m.GetJobs())
    if got is None:
        return None
    body = orjson.loads(got.body)
    return body["state_age"], {j["job_id"] for j in body["jobs"]}


def test_the_setting_and_its_poll() -> None:
    assert standby_read_ms((("SlurmctldParameters", "rl_enable,standby_read_ms=500"),)) == 500
    assert standby_read_ms((("SlurmctldParameters", "standby_read_ms=soon"),)) == 0
    assert standby_read_ms(()) == 0
    assert poll_interval(0.5) == 0.125 and poll_interval(0.01) == 0.05
    assert poll_interval(60) == 1.0


async def test_follows_batches_and_states_the_age_of_its_proof(autojump_clock) -> None:
    etcd = FakeEtcd()
    etcd.trip = 0.01
    f = Follower(etcd, P, interval=0.1)
    reads = StandbyReads(f, _fake_view, bound=0.5)
    assert _reply(reads) is None  # nothing read yet: proven never
    etcd.batch([1, 2])
    await f.poll()  # the first read loads everything
    age, ids = _reply(reads)
    assert ids == {1, 2} and age == pytest.approx(0.01)  # proven as of the read's send time
    await trio.sleep(0.2)
    assert _reply(reads)[0] == pytest.approx(0.21)
    etcd.batch([3])
    await f.poll()
    age, ids = _reply(reads)
    assert ids == {1, 2, 3} and age == pytest.approx(0.01)
    assert reads.builds == 2 and f.reloads == 1 and f.polls == 1


async def test_refuses_once_it_cannot_prove_the_bound(autojump_clock) -> None:
    etcd = FakeEtcd()
    f = Follower(etcd, P, interval=0.1)
    reads = StandbyReads(f, _fake_view, bound=0.5)
    etcd.batch([1])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(f.run)
        await trio.sleep(1)
        assert _reply(reads) is not None
        etcd.down = True  # a standby cut off from etcd
        etcd.batch([2])  # ... while the leader still commits
        await trio.sleep(0.3)
        age, ids = _reply(reads)  # still within the bound, and it says how old
        assert ids == {1} and 0.3 <= age <= 0.5
        await trio.sleep(0.3)
        assert _reply(reads) is None and reads.refused == 1
        etcd.down = False
        await trio.sleep(0.2)
        age, ids = _reply(reads)
        assert ids == {1, 2} and age <= 0.1
        nursery.cancel_scope.cancel()


async def test_a_snapshot_that_trimmed_what_it_lacks_is_read_whole(autojump_clock) -> None:
    etcd = FakeEtcd()
    f = Follower(etcd, P, interval=0.1)
    reads = StandbyReads(f, _fake_view, bound=1.0)
    etcd.batch([1])
    await f.poll()
    etcd.batch([2])
    etcd.batch([3])
    etcd.snapshot(1, [1, 2, 3])  # batches 2 and 3 are gone from the journal
    etcd.batch([4])
    await f.poll()
    assert _reply(reads)[1] == {1, 2, 3, 4} and f.reloads == 2
    etcd.snapshot(2, [1, 2, 3, 4])  # holds only what we have: no reload
    etcd.batch([5])
    await f.poll()
    assert _reply(reads)[1] == {1, 2, 3, 4, 5} and f.reloads == 2


async def test_a_void_over_applied_records_reads_everything_again(autojump_clock) -> None:
    etcd = FakeEtcd()
    f = Follower(etcd, P, interval=0.1)
    reads = StandbyReads(f, _fake_view, bound=1.0)
    etcd.batch([1])
    etcd.batch([2])  # reached etcd, but its writer was told it failed
    await f.poll()
    assert _reply(reads)[1] == {1, 2}
    etcd.put(f"{P}/j/{3:020d}", orjson.dumps({"seq": 2, "void_from": 2}) + b"\n"
             + orjson.dumps({"seq": 3, "job": {"id": 3}}) + b"\n")
    etcd.seq = 3
    await f.poll()
    assert _reply(reads)[1] == {1, 3} and f.reloads == 2


async def test_no_reply_is_older_than_it_says(autojump_clock) -> None:
    """Commits at random times, reads at random times, etcd's answers slow and sometimes
    absent: every job committed before (reply time - stated age) is listed."""
    rng = random.Random(47)
    etcd = FakeEtcd()
    f = Follower(etcd, P, interval=poll_interval(0.4))
    reads = StandbyReads(f, _fake_view, bound=0.4)
    checked = refused = 0

    async def leader() -> None:
        jid = 0
        while True:
            jid += 1
            etcd.batch([jid])
            if rng.random() < 0.05:
                etcd.snapshot(jid, list(range(1, jid + 1)))
            await trio.sleep(rng.expovariate(40))

    async def weather() -> None:
        while True:
            etcd.trip = rng.choice((0.001, 0.02, 0.2))
            etcd.down = rng.random() < 0.2
            await trio.sleep(rng.uniform(0.1, 1.0))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(leader)
        nursery.start_soon(weather)
        nursery.start_soon(f.run)
        for _ in range(2000):
            await trio.sleep(rng.uniform(0, 0.05))
            got = _reply(reads)
            if got is None:
                refused += 1
                continue
            age, ids = got
            assert age <= 0.4
            as_of = trio.current_time() - age
            committed = [seq for t, seq in etcd.commits if t <= as_of]
            newest = committed[-1] if committed else 0
            assert set(range(1, newest + 1)) <= ids, (age, newest, max(ids, default=0))
            checked += 1
        nursery.cancel_scope.cancel()
    assert checked > 1000 and refused > 10


async def test_the_view_answers_as_the_leader_does(autojump_clock) -> None:
    """The composition root's view: a controller restored from the saved state (as etcd holds
    it), whose rqueue, show job and rinfo answers are the leader's own, record for record; only
    what the leader never commits differs (a node's last heartbeat)."""
    cfg = make_config()
    leader = Harness(cfg, wall=wall)
    for n in cfg.nodes:
        register(leader, n.name, FakeConn())
    ids = [leader.jobs.submission.submit(m.SubmitJob("sleep 100", "alice", 1001, 1001, "/tmp"))
           .job_id for _ in range(3)]
    leader.controller.after_change()  # the pass starts what fits
    answer = standby_view(cfg)(orjson.loads(deferred.dumps(leader.controller.save_doc())))
    for msg in (m.GetJobs(), m.GetJobs(job_ids=(ids[1],)), m.GetJobs(fields=("job_id", "state"))):
        mine = orjson.loads(answer(msg).body)["jobs"]
        assert mine == orjson.loads(jobs_listing(leader.jobs, None, msg).body)["jobs"]
    assert {j["state"] for j in orjson.loads(answer(m.GetJobs()).body)["jobs"]} >= {"RUNNING"}
    nodes = orjson.loads(answer(m.GetSnapshot()).body)["nodes"]
    theirs = orjson.loads(leader.controller.views.body())["nodes"]
    assert [{k: v for k, v in n.items() if k != "last_heartbeat"} for n in nodes] == \
        [{k: v for k, v in n.items() if k != "last_heartbeat"} for n in theirs]
    assert answer(m.Ping()) is None


def test_the_commands_ask_the_standbys_first_when_the_config_says(tmp_path, monkeypatch) -> None:
    """A listing only shown (rqueue, rinfo, show job|node: `shown`) tries the backups first;
    a listing a command acts on (rbatch --wait, ralloc's wait, rcancel's filters) and every
    other request the SlurmctldHost order; without the key, the order is the config's."""
    from ranch.cli import controller, job_requests

    asked: list[tuple[str, int]] = []

    def one_request(at, key, munge, type_name, body, wait, connect):
        def call():
            asked.append(at)
            if at[0] != "10.0.0.1":
                return "Error", {"code": "standby", "message": "not the controller"}
            return ("Snapshot", {"cluster_name": "t", "nodes": [], "partitions": []}) \
                if type_name == "GetSnapshot" else ("JobList", {"jobs": []})
        return call

    monkeypatch.setattr(controller, "_one_request", one_request)
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    key.chmod(0o600)
    for params, order in (("SlurmctldParameters=standby_read_ms=500\n",
                           ["10.0.0.2", "10.0.0.3", "10.0.0.1"]), ("", ["10.0.0.1"])):
        conf = tmp_path / "c.conf"
        conf.write_text("SlurmctldHost=a(10.0.0.1)\nSlurmctldHost=b(10.0.0.2)\n"
                        f"SlurmctldHost=c(10.0.0.3)\nAuthKeyFile={key}\n{params}")
        target = controller.find_target(None, None, str(conf), env={})
        asked.clear()
        job_requests.fetch_jobs(target, shown=True)
        assert [h for h, _ in asked] == order
        asked.clear()
        controller.fetch_snapshot(target, ("name",))
        assert [h for h, _ in asked] == order
        asked.clear()
        job_requests.fetch_jobs(target, (5,))
        controller.request(target, "SubmitJob", want="JobList")
        assert [h for h, _ in asked] == ["10.0.0.1", "10.0.0.1"]


async def test_a_standby_listing_keeps_the_leaders_rights(autojump_clock) -> None:
    """PrivateData=jobs cuts a user's listing to their own jobs, PrivateData=nodes refuses a
    user rinfo, on the standby as on the leader (ctld/rpc/permissions.py); an admin sees all."""
    from ranch.ctld.pair.standby import Caller, listing
    from ranch.ctld.rights import Identity

    cfg = make_config(extra="PrivateData=jobs,nodes")
    etcd = FakeEtcd()
    etcd.put(f"{P}/j/{1:020d}", b"".join(
        orjson.dumps({"seq": n, "job": {"id": n, "req": {"uid": uid}}}) + b"\n"
        for n, uid in ((1, 1001), (2, 1002))))
    f = Follower(etcd, P, interval=0.1)
    await f.poll()

    def view(doc: dict[str, Any]):
        jobs = (doc.get("jobs") or {}).get("jobs", ())
        return lambda msg: Prebuilt("JobList", orjson.dumps(
            {"jobs": [{"job_id": j["id"], "uid": j["req"]["uid"]} for j in jobs]}))

    reads = StandbyReads(f, view, bound=1.0)
    alice = Caller("10.0.0.9:1", Identity(1001, 1001, "alice", False))
    got = listing(reads, cfg, alice, m.GetJobs(), "c1")
    assert [j["job_id"] for j in orjson.loads(got.body)["jobs"]] == [1]
    root = Caller("10.0.0.9:2", Identity(0, 0, "root", True))
    got = listing(reads, cfg, root, m.GetJobs(), "c1")
    assert [j["job_id"] for j in orjson.loads(got.body)["jobs"]] == [1, 2]
    refused = listing(reads, cfg, alice, m.GetSnapshot(), "c1")
    assert isinstance(refused, m.Error) and refused.code == "permission_denied"
    await trio.sleep(2)  # past the bound, with no poll since: "not the controller"
    stale = listing(reads, cfg, root, m.GetJobs(), "c1")
    assert isinstance(stale, m.Error) and stale.code == "standby"
    assert stale.message == "not the controller; the controller is c1"
