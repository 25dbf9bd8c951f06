"""Issue 19's proof with real daemons and a real munged: alice and bob act as themselves
(AuthType=auth/munge), Slurm's permission rules, PrivateData=jobs, a forged uid, a replayed
credential, and DisableRootJobs. Needs root (to run the commands as alice and bob) and MUNGE."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ranch.protocol import messages as m
from ranch.protocol.rawframe import PREFIX, open_frame, pack_frame
from ranch.protocol.userauth import UNVERIFIED_KEY, preamble
from tests.integration.cluster import REPO, Cluster, free_port
from tests.munged import Munged, ensure_users, user_python

pytestmark = pytest.mark.skipif(os.getuid() != 0,
                                reason="running commands as alice and bob needs root")

CONF = """\
ClusterName=users
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=5
MessageTimeout=5
ReturnToService=1
AuthType=auth/munge
AuthInfo=socket={socket}
PrivateData=jobs
NodeName=n[1-2] CPUs=1 RealMemory=64
PartitionName=main Nodes=n[1-2] Default=YES
PartitionName=noroot Nodes=n[1-2] DisableRootJobs=YES
"""


class Users:
    def __init__(self, cluster: Cluster, munged: Munged, ids: dict[str, tuple[int, int]],
                 work: Path) -> None:
        self.c, self.munged, self.ids, self.work = cluster, munged, ids, work
        self.python, self.user_env = user_python(*ids["alice"])

    def run(self, who: str, module: str, *argv: str) -> subprocess.CompletedProcess:
        """A command as `who` would run it. alice and bob cannot read the cluster key, so the
        command falls back to munged; root is given the config (AuthType=auth/munge)."""
        env = {**self.user_env, "HOME": str(self.work),
               "RANCH_SERVER": f"127.0.0.1:{self.c.port}",
               "RANCH_KEY_FILE": self.c.key_file, "RANCH_MUNGE_SOCKET": self.munged.socket}
        kw: dict = {}
        python = sys.executable
        if who == "root":
            env["RANCH_CONF"] = str(self.c.conf_path)
        else:
            uid, gid = self.ids[who]
            kw = {"user": uid, "group": gid, "extra_groups": []}
            python = self.python
        return subprocess.run([python, "-m", module, *argv], cwd=self.work, env=env,
                              capture_output=True, text=True, timeout=30, **kw)

    def raw(self, who: str, type_name: str, body: dict) -> tuple[str, dict]:
        """One request written by hand as `who` (what a forger would send)."""
        code = ("import json, sys\nfrom ranch.protocol.client import request_raw\n"
                f"print(json.dumps(request_raw(('127.0.0.1', {self.c.port}), b'', "
                f"{type_name!r}, json.loads(sys.argv[1]), munge={self.munged.socket!r})))")
        uid, gid = self.ids[who]
        done = subprocess.run([self.python, "-c", code, json.dumps(body)], cwd=REPO,
                              env=self.user_env, capture_output=True, text=True, timeout=30,
                              user=uid, group=gid, extra_groups=[])
        assert done.returncode == 0, done.stderr
        kind, doc = json.loads(done.stdout)
        return kind, doc

    def job(self, job_id: int) -> dict | None:
        reply = self.c.request(m.GetJobs((job_id,)))
        return next((j for j in reply.jobs if j["job_id"] == job_id), None)


@pytest.fixture(scope="module")
def users() -> Iterator[Users]:
    ids = ensure_users()
    with Munged() as munged:
        base = Path(tempfile.mkdtemp(prefix="ranch-users-"))
        base.chmod(0o755)  # the spool dirs within: a job runs its script as its user
        work = base / "work"
        work.mkdir()
        work.chmod(0o1777)  # everyone's job output lands here
        try:
            port = free_port()
            with Cluster(base / "cluster", ["n1", "n2"],
                         conf_text=CONF.format(port=port, socket=munged.socket)) as c:
                c.port, c.addr = port, ("127.0.0.1", port)
                c.start()
                yield Users(c, munged, ids, work)
        finally:
            subprocess.run(["rm", "-rf", str(base)], check=False)


def _submitted(done: subprocess.CompletedProcess) -> int:
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_alice_submits_and_sees_her_job_bob_may_not_touch_it_root_may(users: Users) -> None:
    c = users.c
    jid = _submitted(users.run("alice", "ranch.cli.rbatch", "-w", "n1", "--wrap",
                               "id -un; sleep 300"))
    c.wait_for(lambda: (users.job(jid) or {}).get("state") == "RUNNING", what="alice's job")
    job = users.job(jid)
    assert (job["user"], job["uid"]) == ("alice", users.ids["alice"][0])
    out = users.work / f"slurm-{jid}.out"
    c.wait_for(lambda: out.exists() and out.read_text().strip(), what="the job's output")
    assert out.read_text().split()[0] == "alice", "the job ran as the proven submitter"

    mine = users.run("alice", "ranch.cli.rqueue")
    assert mine.returncode == 0 and str(jid) in mine.stdout and "alice" in mine.stdout
    theirs = users.run("bob", "ranch.cli.rqueue")
    assert theirs.returncode == 0 and str(jid) not in theirs.stdout, "PrivateData=jobs"
    assert str(jid) in users.run("root", "ranch.cli.rqueue").stdout

    cancel = users.run("bob", "ranch.cli.rcancel", str(jid))
    assert cancel.returncode != 0 and "Access/permission denied" in cancel.stderr, cancel
    drain = users.run("bob", "ranch.cli.rcontrol", "update", "NodeName=n2", "State=DRAIN",
                      "Reason=bob was here")
    assert drain.returncode != 0 and "Access/permission denied" in drain.stderr, drain
    assert "update NodeName=n2" in drain.stderr and "bob" in drain.stderr
    assert users.job(jid)["state"] == "RUNNING"
    assert c.state("n2") == "IDLE"

    ok = users.run("root", "ranch.cli.rcontrol", "update", "NodeName=n2", "State=DRAIN",
                   "Reason=maintenance")
    assert ok.returncode == 0, ok.stderr
    assert "DRAIN" in c.state("n2")
    assert users.run("root", "ranch.cli.rcontrol", "update", "NodeName=n2",
                     "State=RESUME").returncode == 0
    gone = users.run("root", "ranch.cli.rcancel", str(jid))
    assert gone.returncode == 0, gone.stderr
    c.wait_for(lambda: users.job(jid)["state"] == "CANCELLED", what="root's cancel")


def test_a_forged_uid_changes_nothing(users: Users) -> None:
    alice_uid = users.ids["alice"][0]
    jid = _submitted(users.run("alice", "ranch.cli.rbatch", "--wrap", "sleep 300"))
    # bob writes alice's name and uid into his request: munged's word is taken, not his
    kind, doc = users.raw("bob", "CancelJobs", {"job_ids": [jid], "user": "alice",
                                                "uid": alice_uid})
    assert kind == "JobResult" and not doc["ok"], doc
    assert "Access/permission denied" in doc["errors"][0]
    kind, doc = users.raw("bob", "CancelJobs", {"job_ids": [jid], "user": "root", "uid": 0})
    assert kind == "JobResult" and not doc["ok"], doc
    assert users.job(jid)["state"] in ("PENDING", "RUNNING")
    # ... and a job he submits "as root" is his
    kind, doc = users.raw("bob", "SubmitJob", {
        "script": "#!/bin/sh\ntrue\n", "user": "root", "uid": 0, "gid": 0,
        "workdir": str(users.work)})
    assert kind == "SubmitReply", doc
    forged = users.job(doc["job_id"])
    assert (forged["user"], forged["uid"]) == ("bob", users.ids["bob"][0])
    # and he may not pose as a node
    kind, doc = users.raw("bob", "UpdateNodes", {"node_names": "n1", "state": "DOWN",
                                                 "reason": "x", "user": "root", "uid": 0})
    assert kind == "Error" and "Access/permission denied" in doc["message"], doc
    assert users.run("alice", "ranch.cli.rcancel", str(jid)).returncode == 0


def test_a_replayed_credential_is_refused(users: Users) -> None:
    key, cred_frame = preamble(users.munged.socket, request_id=7, version=5)
    wire = cred_frame + pack_frame("Ping", b"{}", key, request_id=7, version=5)

    def send() -> tuple[str, dict]:
        with socket.create_connection(users.c.addr, timeout=10) as s:
            s.sendall(wire)
            (length,) = PREFIX.unpack(_read(s, PREFIX.size))
            raw = _read(s, length)
        for k in (key, UNVERIFIED_KEY):
            try:
                reply = open_frame(raw, k)
            except Exception:
                continue
            return reply.type, json.loads(bytes(reply.body))
        raise AssertionError("reply signed with neither key")

    assert send()[0] == "Pong"
    kind, doc = send()  # the same bytes again, as a sniffer would
    assert kind == "Error" and doc["code"] == "auth", doc
    assert "Replayed" in doc["message"] or "REPLAYED" in doc["message"], doc


def _read(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def test_rbatch_as_root_with_and_without_disable_root_jobs(users: Users) -> None:
    c = users.c
    jid = _submitted(users.run("root", "ranch.cli.rbatch", "-D", str(users.work),
                               "--wrap", "id -un"))
    c.wait_for(lambda: users.job(jid)["state"] == "COMPLETED", what="root's job")
    assert (users.work / f"slurm-{jid}.out").read_text().split()[0] == "root"
    refused = users.run("root", "ranch.cli.rbatch", "-p", "noroot", "--wrap", "true")
    assert refused.returncode != 0
    assert "Invalid user id" in refused.stderr and "DisableRootJobs=YES" in refused.stderr
    # alice may use that partition
    mine = _submitted(users.run("alice", "ranch.cli.rbatch", "-p", "noroot", "--wrap", "true"))
    c.wait_for(lambda: users.job(mine)["state"] == "COMPLETED", what="alice's job in noroot")
