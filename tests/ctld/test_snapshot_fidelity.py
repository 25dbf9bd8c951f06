"""Snapshot values scontrol-style output needs: Arch/OS from registration, LastBusyTime, the
partitions' configured options."""

from __future__ import annotations

import orjson

from ranch.conf.build import parse_config_text
from ranch.ctld.nodes.hardware import HardwareShelf
from ranch.ctld.nodes.node import NodeRecord, snapshot_record
from ranch.protocol import messages as m
from ranch.statemachine.model import initial_state

CONF = ("NodeName=n1 CPUs=4 RealMemory=1000\n"
        "PartitionName=p Nodes=n1 AllowGroups=wheel OverSubscribe=FORCE:2\n")


def _node() -> NodeRecord:
    cfg = parse_config_text(CONF, path="/t.conf").nodes[0]
    return NodeRecord(cfg=cfg, partitions=("p",), state=initial_state("n1", 4))


def _hw(arch: str, os: str) -> m.Hardware:
    return m.Hardware(cpus=4, boards=1, sockets=1, cores_per_socket=4, threads_per_core=1,
                      real_memory_mib=1000, tmp_disk_mib=0, os=os, arch=arch, hostname="n1")


def test_arch_and_os_follow_the_latest_registration() -> None:
    node, shelf = _node(), HardwareShelf()
    rec = snapshot_record(node)
    assert (rec["arch"], rec["os"]) == ("", "")
    node.hardware = shelf.pack(_hw("x86_64", "Linux 6.1.0-18-amd64"))
    rec = snapshot_record(node)
    assert (rec["arch"], rec["os"]) == ("x86_64", "Linux 6.1.0-18-amd64")
    node.hardware = shelf.pack(_hw("aarch64", "Linux 6.8.0"))  # re-registered
    assert snapshot_record(node)["arch"] == "aarch64"
    orjson.dumps(snapshot_record(node))


def test_last_busy_is_the_registration_until_a_job_ends() -> None:
    node = _node()
    assert snapshot_record(node)["last_busy"] is None  # never seen: LastBusyTime=Unknown
    node.last_registration = 1_700_000_000.0
    assert snapshot_record(node)["last_busy"] == 1_700_000_000.0
    node.last_busy = 1_700_000_500.0
    assert snapshot_record(node)["last_busy"] == 1_700_000_500.0


def test_partition_records_carry_their_options() -> None:
    from tests.ctld.harness import Harness as Cluster

    cluster = Cluster(parse_config_text(CONF, path="/t.conf"), clock=lambda: 0.0,
                      wall=lambda: 1.7e9)
    (p,) = cluster.snapshot().partitions
    assert p["options"] == {"AllowGroups": "wheel", "OverSubscribe": "FORCE:2"}
