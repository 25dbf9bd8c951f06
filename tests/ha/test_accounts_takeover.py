"""Issue 43's durability across an etcd takeover: a controller pair on loopback (c1 at
127.0.0.1, c2 at 127.0.0.2, one etcd member, one node) with the accounting store on. A job
charged to an account runs across two takeovers by SIGKILL: the first leaves usage accrued on
the standby that took over; racctmgr changes are acknowledged after it; the second must bring
back the tree as acknowledged, and usage that goes on from the last decay time journalled (a
lost decay time would charge the job's run since its start again, or nothing; lost usage would
start from zero). PriorityDecayHalfLife=0: usage only grows, by the run since that time."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from ranch.ctld.state.etcdclient import EtcdClient
from ranch.ctld.state.etcdstore import EtcdStore
from ranch.ctld.state.overlay import overlay
from ranch.protocol import messages as m
from tests.integration.cluster import Cluster, free_port, wait_for

pytestmark = pytest.mark.skipif(shutil.which("etcd") is None,
                                reason="needs etcd (apt-get install etcd-server)")

ADDRS = {"c1": "127.0.0.1", "c2": "127.0.0.2"}
CONF = """\
ClusterName=acc
SlurmctldHost=c1(127.0.0.1)
SlurmctldHost=c2(127.0.0.2)
SlurmctldPort={port}
StateStore=etcd
EtcdEndpoints={etcd}
EtcdLeaseTTL=2
HeartbeatInterval=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageEnforce=associations
PriorityDecayHalfLife=0
PriorityUsageResetPeriod=MONTHLY
NodeName=n1 CPUs=1 RealMemory=64
PartitionName=main Nodes=n1 Default=YES
"""
CHANGES = (("add", "account", "a1"), ("add", "user", "root", "account=a1"))
LATER = (("modify", "account", "a1", "set", "fairshare=7", "grpjobs=9"),
         ("add", "qos", "q9", "priority=9"))
SHOWS = (("show", "assoc", "format=account,user,share,grpjobs"),
         ("show", "qos", "format=name,priority"))


@contextlib.contextmanager
def _etcd(d: Path) -> Iterator[str]:
    client, peer = free_port(), free_port()
    with open(d / "etcd.log", "wb") as log:
        proc = subprocess.Popen([
            "etcd", "--name", "t", "--data-dir", str(d / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"t=http://127.0.0.1:{peer}",
            "--logger", "zap", "--log-level", "error"], stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"127.0.0.1:{client}"
    finally:
        proc.terminate()
        proc.wait(10)


class Pair:
    """The two controllers (their own processes and logs) beside Cluster's node and key."""

    def __init__(self, c: Cluster, port: int) -> None:
        self.c, self.port = c, port
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        with open(self.c.dir / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "ranch.ctld", "-f", str(self.c.conf_path),
                 "--name", name, "--state-dir", str(self.c.dir / name),
                 "--key-file", self.c.key_file], cwd=Path(__file__).parents[2],
                env=self.c._env(), stdout=log, stderr=subprocess.STDOUT)

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.kill()
        proc.wait()

    def leads(self, name: str) -> bool:
        assert self.procs[name].poll() is None, self.c.log(name)[-2000:]
        self.c.addr = (ADDRS[name], self.port)
        # a standby answers Ping too, and refuses the rest naming the leader
        got = self.c.request(m.AcctmgrRequest(("show", "qos"), ("noheader",)), timeout=1)
        return isinstance(got, m.AcctmgrReply)

    def stop(self) -> None:
        for name in list(self.procs):
            self.kill(name)


def _ask(c: Cluster, words: tuple[str, ...]) -> m.AcctmgrReply:
    reply = c.request(m.AcctmgrRequest(words, ("immediate",) if words[0] != "show" else
                                       ("noheader", "parsable2")))
    assert isinstance(reply, m.AcctmgrReply) and reply.rc == 0, (words, reply)
    return reply


def _journalled(etcd: str, tmp: Path) -> dict[str, Any]:
    """The accounting record as the store in etcd holds it (what a standby reads on winning)."""
    async def read() -> dict[str, Any]:
        s = EtcdStore(EtcdClient([etcd]), "/ranch/acc", "/none", 0, str(tmp))
        await s.fetch()
        return overlay(*s.load())["accounts"]
    return trio.run(read)


def test_tree_usage_and_decay_time_survive_a_takeover(tmp_path: Path) -> None:
    port = free_port()
    with _etcd(tmp_path) as etcd, Cluster(tmp_path, ["n1"], conf_text=CONF.format(
            port=port, etcd=etcd)) as c:
        pair = Pair(c, port)
        try:
            pair.start("c1")
            wait_for(lambda: pair.leads("c1"), 30, "c1 to lead")
            pair.start("c2")
            wait_for(lambda: "standing by" in c.log("c2"), 30, "c2 to stand by")
            c.start_node("n1", args=("--server", f"127.0.0.1:{port},127.0.0.2:{port}"))
            wait_for(lambda: c.state("n1") == "IDLE", 20, "n1 idle")
            for words in CHANGES:
                _ask(c, words)
            job = c.request(m.SubmitJob(script="#!/bin/sh\nsleep 300\n", user="root", uid=0,
                                        gid=0, workdir=str(tmp_path), stdout="/dev/null",
                                        account="a1"))
            assert isinstance(job, m.SubmitReply), job
            wait_for(lambda: c.request(m.GetJobs((job.job_id,))).jobs[0]["state"] == "RUNNING",
                     20, "the job to run")
            pair.kill("c1")  # takeover 1: c2 accrues the run so far at its start
            wait_for(lambda: pair.leads("c2"), 20, "c2 to lead")
            wait_for(lambda: _journalled(etcd, tmp_path).get("usage", {}).get("assocs"), 20,
                     "usage accrued by c2")
            pair.start("c1")
            wait_for(lambda: "standing by" in c.log("c1"), 30, "c1 to stand by")
            for words in LATER:  # acknowledged: in etcd before the reply
                _ask(c, words)
            shown = [_ask(c, w).out for w in SHOWS]
            before = _journalled(etcd, tmp_path)
            used, decayed = before["usage"]["assocs"], before["usage"]["last_decay"]
            assert used and all(v > 0 for v in used.values()), before
            assert "a1||7|9" in shown[0] and "q9|9" in shown[1], shown
            pair.kill("c2")  # takeover 2
            wait_for(lambda: pair.leads("c1"), 20, "c1 to lead again")
            assert [_ask(c, w).out for w in SHOWS] == shown
            after = wait_for(lambda: (got := _journalled(etcd, tmp_path))["usage"][
                "last_decay"] > decayed and got, 20, "c1's first accrual")
            ran = after["usage"]["last_decay"] - decayed  # 1 CPU: billing 1 a second
            assert set(after["usage"]["assocs"]) == set(used)
            for key, value in used.items():  # root, a1, (a1, root): each charged the run since
                assert after["usage"]["assocs"][key] == pytest.approx(value + ran, abs=1e-6)
        finally:
            pair.stop()
