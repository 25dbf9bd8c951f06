"""Slurm's permission rules at the controller's door (issue 19): what a user proven by MUNGE
may do, what PrivateData hides, DisableRootJobs, and Credential frames a controller refuses.
tests/integration/test_many_users.py proves the same with a real munged and real users."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import trio
import trio.testing

from ranch.ctld.compose.layers import rpc_server
from ranch.ctld.rpc.permissions import Identity, acting, gate, identify, may_act_on
from ranch.ctld.rpc.server import Server
from ranch.ctld.rpc.wire import Prebuilt
from ranch.protocol import messages as m
from ranch.protocol.rawframe import PREFIX, open_frame, pack_frame
from ranch.protocol.userauth import UNVERIFIED_KEY
from tests.ctld.harness import Harness as Cluster
from tests.ctld.helpers import hardware, make_config, wall

KEY = b"k" * 32
CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
{extra}
NodeName=n[1-2] CPUs=4 RealMemory=1000
PartitionName=main Nodes=n[1-2] Default=YES
PartitionName=open Nodes=n[1-2] DisableRootJobs=NO
"""


def _server(extra: str = "", state_dir: Path | None = None) -> Server:
    async def reconfigure(who: str) -> m.ReconfigureResult:
        return m.ReconfigureResult(ok=True)

    cfg = make_config(text=CONF.format(extra=extra))
    return rpc_server(Cluster(cfg, wall=wall).controller, KEY, reconfigure=reconfigure,
                      state_dir=str(state_dir) if state_dir else None)


class _Conn:
    """A connection as ranch.ctld.rpc.userauth leaves it once munged vouched for `who`."""

    def __init__(self, who: Identity | None) -> None:
        self.who, self.peer, self.node, self.key = who, "127.0.0.1:9", None, None


ALICE = Identity(1001, 1001, "alice", False)
BOB = Identity(1002, 1002, "bob", False)
OPERATOR = Identity(1003, 1003, "carol", True)


async def test_users_act_on_their_own_behalf_and_admins_on_anything() -> None:
    s = _server()
    # a job a user submits is theirs, whatever the request says
    msg, refused, _ = gate(s.config(), _Conn(BOB), m.SubmitJob("true", "root", 0, 0, "/tmp"))
    assert refused is None and (msg.user, msg.uid, msg.gid) == ("bob", 1002, 1002)
    # a job command carries the caller as proven, whatever it wrote; the rights the job
    # commands weigh are the caller's own Identity (`acting`), never a uid 0 stand-in
    msg, _, _ = gate(s.config(), _Conn(BOB), m.CancelJobs((1,), user="alice", uid=1001))
    assert (msg.user, msg.uid) == ("bob", 1002)
    assert acting(s.config(), BOB, msg.uid, msg.user) == BOB
    msg, _, _ = gate(s.config(), _Conn(OPERATOR), m.JobControl("hold", (1,), user="x", uid=7))
    assert (msg.user, msg.uid) == ("carol", 1003)
    assert acting(s.config(), OPERATOR, msg.uid, msg.user).admin
    # the cluster key's holder acts as the uid its request names: root is uid 0, and the
    # name "root" alone grants nothing
    assert acting(s.config(), None, 0, "x").admin
    assert not acting(s.config(), None, 1001, "root").admin
    assert may_act_on(acting(s.config(), None, 1001, "alice"), 1001, "alice")
    assert not may_act_on(BOB, 1001, "alice") and may_act_on(OPERATOR, 1001, "alice")
    # nodes and the controller are for admins
    for request in (m.UpdateNodes("n1", "DRAIN", "x", "root", 0), m.Reconfigure("root"),
                    m.NodeMembership("approve", "n1", user="root"),
                    m.GuardRequest("reset", "down"), m.ReconfigureDryRun("/tmp/c.conf")):
        _, refused, _ = gate(s.config(), _Conn(BOB), request)
        assert isinstance(refused, m.Error) and refused.code == "permission_denied"
        assert refused.message.startswith("Access/permission denied: ")
        assert "bob (uid 1002)" in refused.message
        msg, refused, _ = gate(s.config(), _Conn(OPERATOR), request)
        assert refused is None and msg.user == "carol"
    _, refused, _ = gate(s.config(), _Conn(BOB), m.GuardRequest("show"))
    assert refused is None
    # a user may not pose as a node
    for request in (m.Register("n1", hardware(), 1.0, "x"), m.ShutdownNotice("n1", "x")):
        _, refused, _ = gate(s.config(), _Conn(OPERATOR), request)
        assert refused is not None and "node daemons" in refused.message


def test_admins_are_root_slurm_user_and_admin_users() -> None:
    cfg = make_config(text=CONF.format(extra="SlurmUser=4242\nAdminUsers=alice,%root,1500"))
    assert identify(cfg, 0, 0).admin  # root
    assert identify(cfg, 4242, 4242).admin  # SlurmUser as a uid
    assert identify(cfg, 1500, 1500).admin  # AdminUsers as a uid
    assert identify(cfg, 5555, 0).admin  # %root: primary group root
    assert not identify(cfg, 5556, 5556).admin


async def test_private_data_jobs_keeps_a_users_own_and_nodes_refuses_them() -> None:
    s = _server("PrivateData=jobs,nodes")
    _, refused, after = gate(s.config(), _Conn(ALICE), m.GetJobs())
    assert refused is None and after is not None
    body = orjson.dumps({"generated_at": 1.0, "jobs": [
        {"job_id": 1, "uid": 1001}, {"job_id": 2, "uid": 1002}, {"job_id": 3, "uid": 0}]})
    seen = orjson.loads(after(Prebuilt("JobList", body)).body)
    assert [j["job_id"] for j in seen["jobs"]] == [1]
    assert gate(s.config(), _Conn(OPERATOR), m.GetJobs())[2] is None
    for request in (m.GetSnapshot(), m.GetEvents()):
        _, refused, _ = gate(s.config(), _Conn(ALICE), request)
        assert refused is not None and "PrivateData=nodes" in refused.message
        assert gate(s.config(), _Conn(OPERATOR), request)[1] is None
    assert gate(s.config(), _Conn(ALICE), m.GetConfig())[1] is None


async def _ask(server: Server, wire: bytes, keys: tuple[bytes, ...] = (KEY,)) -> tuple[str, dict]:
    client, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.handle, server_end)
        await client.send_all(wire)
        buf = b""
        while len(buf) < PREFIX.size or len(buf) < PREFIX.size + PREFIX.unpack_from(buf)[0]:
            data = await client.receive_some(1 << 16)
            assert data, "closed before a reply"
            buf += data
        raw = buf[PREFIX.size:PREFIX.size + PREFIX.unpack_from(buf)[0]]
        await client.aclose()
    for key in keys:
        try:
            reply = open_frame(raw, key)
        except Exception:
            continue
        return reply.type, json.loads(bytes(reply.body))
    raise AssertionError("reply signed with none of the keys")


def _submit(uid: int, partition: str = "") -> bytes:
    body = {"script": "#!/bin/sh\ntrue\n", "user": "root" if uid == 0 else "alice",
            "uid": uid, "gid": uid, "workdir": "/tmp", "partition": partition}
    return pack_frame("SubmitJob", json.dumps(body).encode(), KEY, request_id=1, version=5)


async def test_disable_root_jobs_global_and_per_partition() -> None:
    s = _server("DisableRootJobs=YES")
    kind, doc = await _ask(s, _submit(0))
    assert kind == "Error" and doc["field"] == "uid"
    assert doc["message"].startswith("Invalid user id") and "partition main" in doc["message"]
    assert (await _ask(s, _submit(0, "open")))[0] == "SubmitReply", "the partition's NO wins"
    assert (await _ask(s, _submit(1001)))[0] == "SubmitReply"
    assert (await _ask(_server(), _submit(0)))[0] == "SubmitReply", "Slurm's default: NO"


async def test_a_credential_is_refused_where_munge_is_not_configured_or_not_running(
        tmp_path: Path) -> None:
    session = b"s" * 32
    wire = pack_frame("Credential", b'{"cred":"MUNGE:AwQFAAAbogus:"}', session, request_id=3,
                      version=5) + pack_frame("Ping", b"{}", session, request_id=3, version=5)
    kind, doc = await _ask(_server(), wire, (UNVERIFIED_KEY,))
    assert kind == "Error" and doc["code"] == "auth"
    assert "AuthType=auth/munge" in doc["message"]
    s = _server(f"AuthType=auth/munge\nAuthInfo=socket={tmp_path}/none.sock")
    kind, doc = await _ask(s, wire, (UNVERIFIED_KEY,))
    assert kind == "Error" and doc["code"] == "auth"
    assert "munge" in doc["message"].lower() and "none.sock" in doc["message"], doc


async def test_private_data_jobs_limits_racct_to_a_users_own_jobs() -> None:
    """sacct through slurmdbd shows a user only their own jobs under PrivateData=jobs (or
    =usage), whatever -u or -a asks; an admin's query is as asked."""
    for private in ("PrivateData=jobs", "PrivateData=usage", ""):
        s = Cluster(make_config(text=CONF.format(extra=private)), wall=wall)
        jobs = s.jobs
        for who in (ALICE, BOB):
            sub = m.SubmitJob("#!/bin/sh\ntrue\n", who.name, who.uid, who.gid, "/tmp", hold=True)
            assert isinstance(jobs.submission.submit(sub), m.SubmitReply)

        everyone = m.GetAcct(uids=(1001, 1002))  # racct -a -u alice,bob
        assert await _acct_uids(s, OPERATOR, everyone) == [1001, 1002]
        assert await _acct_uids(s, BOB, everyone) == ([1002] if private else [1001, 1002])
        assert await _acct_uids(s, BOB, m.GetAcct(uids=(1001,))) == (
            [1002] if private else [1001])


async def _acct_uids(s: Cluster, who: Identity, q: m.GetAcct) -> list[int]:
    """The owners of the jobs racct's query `q` from `who` gets back."""
    msg, refused, _ = gate(s.config, _Conn(who), q)
    assert refused is None
    body = orjson.loads(await s.jobs.accounting.query(msg))
    return sorted(r["uid"] for r in body["jobs"])


async def test_private_data_jobs_limits_rqueue_why_to_a_users_own_jobs() -> None:
    """rqueue --why under PrivateData=jobs: another user's job is answered as no such job
    (as squeue -j hides it); an admin's, or anybody's without it, is explained."""
    for private in ("PrivateData=jobs", ""):
        s = Cluster(make_config(text=CONF.format(extra=private)), wall=wall)
        sub = m.SubmitJob("#!/bin/sh\ntrue\n", "alice", 1001, 1001, "/tmp", hold=True)
        got = s.jobs.submission.submit(sub)
        assert isinstance(got, m.SubmitReply)
        for who, seen in ((ALICE, True), (OPERATOR, True), (BOB, not private)):
            msg, refused, _ = gate(s.config, _Conn(who), m.GetWhy(got.job_id))
            assert refused is None
            reply = await s.jobs.why.answer(msg)
            assert isinstance(reply, m.WhyReply) == seen, (private, who.name, reply)
            if seen:
                assert reply.binding.startswith("JobHeldUser: held by its user")
