"""Helpers for in-process controller tests: a config from text, a fake node connection, hardware."""

from __future__ import annotations

from typing import Any

import trio

from ranch.conf.build import parse_config_text
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

BASE_CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
HeartbeatInterval=10
SlurmdTimeout=60
ReturnToService={rts}
{extra}
NodeName=n[1-4] CPUs=4 RealMemory=1000 TmpDisk=100 Gres=gpu:2
PartitionName=main Nodes=n[1-4] Default=YES
"""


def make_config(rts: int = 1, extra: str = "", text: str | None = None, path: str = "/t.conf"):
    return parse_config_text(text or BASE_CONF.format(rts=rts, extra=extra), path=path)


def wall() -> float:
    return 1.7e9 + trio.current_time()


class FakeConn:
    """Stands in for a node's connection: records pushes and close requests."""

    def __init__(self, peer: str = "127.0.0.1:5000") -> None:
        self.peer = peer
        self.node: str | None = None
        self.pushed: list[Any] = []
        self.closed = False

    def registered_as(self, name: str) -> None:
        self.node = name

    def push(self, msg: Any) -> bool:
        self.pushed.append(msg)
        return True

    def close_soon(self) -> None:
        self.closed = True


def hardware(cpus: int = 4, mem: int = 1000, tmp: int = 100, gpus: int = 2) -> m.Hardware:
    return m.Hardware(
        cpus=cpus, boards=1, sockets=1, cores_per_socket=cpus, threads_per_core=1,
        real_memory_mib=mem, tmp_disk_mib=tmp,
        gpus=tuple(m.GpuInfo(i, "Fake", f"GPU-{i}", f"0000:0{i}:00.0", 16000) for i in range(gpus)),
    )


def register(cluster: Cluster, name: str, conn: FakeConn | None = None, *, boot: float = 1.0,
             **hw: int) -> tuple[m.RegisterReply, FakeConn]:
    conn = conn or FakeConn()
    reply = cluster.register(m.Register(name, hardware(**hw), boot, "0.1.0"), conn)
    return reply, conn


def beat(cluster: Cluster, name: str, conn: FakeConn, seq: int, **kw: Any) -> Any:
    metrics = m.Metrics(cpu_pct=5.0, load_1m=0.1, memory_used_mib=100, memory_total_mib=1000)
    return cluster.heartbeat(m.Heartbeat(name, seq, metrics, **kw), conn)


def state(cluster: Cluster, name: str) -> str:
    return cluster.nodes[name].complete


def job(**kw: Any) -> m.SubmitJob:
    """A batch job as rbatch would submit it (alice's `true`); `kw` are its options."""
    return m.SubmitJob("#!/bin/sh\ntrue\n", "alice", 1000, 1000, "/home/a", **kw)
