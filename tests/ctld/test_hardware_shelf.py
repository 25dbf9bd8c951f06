"""Hardware kept deflated (ctld/nodes/hardware.py): every report reads back byte for byte as the
state file holds it, and a node like the first one costs a small fraction of its JSON."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.conf.build import parse_config_text
from ranch.ctld.nodes.hardware import HardwareShelf
from ranch.ctld.nodes.savedstate import node_entry
from ranch.protocol import messages as m
from ranch.protocol.codec import converter
from tests.ctld.harness import Harness as Cluster


def _gpu(node: int, g: int) -> m.GpuInfo:
    return m.GpuInfo(index=g, name="NVIDIA H100 80GB HBM3",
                     uuid=f"GPU-{node:08x}-{g:04x}-4000-8000-{node * 16 + g:012x}",
                     pci_bus_id=f"00000000:{0x18 + g * 0x10:02X}:00.0",
                     memory_total_mib=81559, driver="550.54.15")


def _hw(node: int, gpus: int = 8, **kw: object) -> m.Hardware:
    return m.Hardware(**{"cpus": 64, "boards": 1, "sockets": 2, "cores_per_socket": 16,
                         "threads_per_core": 2, "real_memory_mib": 512000,
                         "tmp_disk_mib": 900000, "numa_nodes": 2,
                         "gpus": tuple(_gpu(node, g) for g in range(gpus)),
                         "os": "Linux 6.1.0-18-amd64", "arch": "x86_64",
                         "hostname": f"gpu{node:05d}", **kw})


def _plain(hw: m.Hardware) -> bytes:
    return orjson.dumps(converter.unstructure(hw))


def test_a_node_like_the_first_keeps_a_tenth_of_its_json() -> None:
    shelf = HardwareShelf()
    shelf.pack(_hw(1))
    for n in (2, 777, 9999):
        hw = _hw(n)
        packed = shelf.pack(hw)
        assert packed.json() == _plain(hw)
        assert len(packed) * 10 < len(_plain(hw)), (len(packed), len(_plain(hw)))


def test_reports_unlike_the_dictionary_read_back_exactly() -> None:
    shelf = HardwareShelf()
    first = shelf.pack(_hw(1, gpus=0, arch="aarch64", os="Linux 6.8.0"))
    big = _hw(2, gpus=16, hostname="x" * 3000)  # larger than the window holds with the dict
    assert shelf.pack(big).json() == _plain(big)
    assert first.json() == _plain(_hw(1, gpus=0, arch="aarch64", os="Linux 6.8.0"))


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 8), text, text), min_size=1,
                max_size=5))
def test_any_reports_in_any_order_read_back(reports: list[tuple[int, int, str, str]]) -> None:
    shelf = HardwareShelf()
    packed = [(hw, shelf.pack(hw)) for hw in
              (_hw(n, gpus=g, os=os_, hostname=host) for n, g, os_, host in reports)]
    for hw, p in packed:
        assert p.json() == _plain(hw)


def test_the_state_file_entry_holds_the_plain_report() -> None:
    conf = parse_config_text("NodeName=n[1-2] CPUs=64 RealMemory=1000\n"
                             "PartitionName=p Nodes=n[1-2] Default=YES\n", path="/t.conf")
    c = Cluster(conf, clock=lambda: 0.0, wall=lambda: 1.7e9)
    for i, name in enumerate(("n1", "n2"), 1):
        c.nodes[name].hardware = c.hardware.pack(_hw(i))
    for i, name in enumerate(("n1", "n2"), 1):
        entry = orjson.loads(orjson.dumps(node_entry(c.nodes[name])))
        assert entry["hardware"] == converter.unstructure(_hw(i))
