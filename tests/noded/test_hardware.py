"""Hardware probe, `rnoded -C`, and fake GPUs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ranch.noded import main as rnoded
from ranch.noded.gpus import FAKE_MEMORY_MIB, FakeGpus, fake_uuid, open_gpus
from ranch.noded.hardware import (
    format_uptime,
    probe_hardware,
    probe_metrics,
    slurmd_c_text,
    topology,
)
from ranch.protocol.messages import Hardware


def test_dash_c_prints_slurmd_style(capsys: pytest.CaptureFixture[str]) -> None:
    assert rnoded.main(["-C", "--fake-gpus", "4", "--name", "gpu01"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"NodeName=gpu01 CPUs=\d+ Boards=1 SocketsPerBoard=\d+ CoresPerSocket=\d+ "
        r"ThreadsPerCore=\d+ RealMemory=\d+ Gres=gpu:4",
        first,
    )
    assert re.fullmatch(r"UpTime=\d+-\d\d:\d\d:\d\d", second)


def test_slurmd_c_text_fields() -> None:
    hw = Hardware(16, 1, 2, 4, 2, 64000, 1000)
    text = slurmd_c_text("n7", hw, boot_time=0.0, now=90061.0)
    assert text == (
        "NodeName=n7 CPUs=16 Boards=1 SocketsPerBoard=2 CoresPerSocket=4 ThreadsPerCore=2 "
        "RealMemory=64000\nUpTime=1-01:01:01\n"
    )
    assert format_uptime(59) == "0-00:00:59"


@pytest.mark.parametrize(
    ("cpus", "cores", "sockets", "want"),
    [(16, 8, 2, (2, 4, 2)), (4, 4, 1, (1, 4, 1)), (3, 8, 2, (1, 3, 1)), (6, 4, 4, (1, 6, 1))],
)
def test_topology(cpus: int, cores: int, sockets: int, want: tuple[int, int, int]) -> None:
    got = topology(cpus, cores, sockets)
    assert got == want and got[0] * got[1] * got[2] == cpus


def test_probe_is_consistent() -> None:
    gpus = FakeGpus(2, "n1")
    hw = probe_hardware(gpus)
    assert hw.sockets * hw.cores_per_socket * hw.threads_per_core == hw.cpus
    assert hw.real_memory_mib > 0 and hw.numa_nodes >= 1 and len(hw.gpus) == 2
    metrics = probe_metrics(gpus)
    assert 0 <= metrics.memory_used_mib <= metrics.memory_total_mib == hw.real_memory_mib


def test_fake_gpus_realistic_and_slowly_varying() -> None:
    gpus = FakeGpus(4, "gpu01", seed=3)
    infos = gpus.infos()
    assert [g.uuid for g in infos] == [fake_uuid("gpu01", i) for i in range(4)]
    assert infos == FakeGpus(4, "gpu01").infos()  # deterministic per node
    assert fake_uuid("gpu01", 0) != fake_uuid("gpu02", 0)
    assert re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", infos[0].uuid)
    assert len({g.pci_bus_id for g in infos}) == 4
    previous = None
    for _ in range(300):
        sample = gpus.metrics()
        for g in sample:
            assert 0 <= g.util_pct <= 100
            assert 0 < g.memory_used_mib < g.memory_total_mib == FAKE_MEMORY_MIB
            assert 25 <= g.temperature_c <= 85
            assert 70 <= g.power_w <= 700
        if previous:
            steps = [abs(a.util_pct - b.util_pct) for a, b in zip(sample, previous, strict=True)]
            assert max(steps) < 30
        previous = sample


def test_fault_file_pins_temperature(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps({"temps": {"2": 95}}))
    monkeypatch.setenv("RANCH_FAKE_GPU_FAULTS", str(faults))
    monkeypatch.setenv("RANCH_FAKE_GPUS", "4")
    gpus = open_gpus("gpu01", None)
    temps = [g.temperature_c for g in gpus.metrics()]
    assert temps[2] == 95 and max(temps[:2] + temps[3:]) < 90
    faults.write_text("not json")  # a broken file is logged, never fatal
    assert len(gpus.metrics()) == 4


def test_bad_fake_gpu_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANCH_FAKE_GPUS", "many")
    with pytest.raises(ValueError, match="RANCH_FAKE_GPUS"):
        open_gpus("n", None)
