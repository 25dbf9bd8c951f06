"""nvml_view against a stand-in pynvml module (no GPU here): counts, temperatures, query errors
and the critical-XID event path."""

from __future__ import annotations

import shutil
import sys
import types

import pytest

from ranch.healthcheck.checks import check_gpus
from ranch.healthcheck.gpu import nvml_view


class NVMLError(Exception):
    pass


# pynvml's real classes (checked against nvidia-ml-py): NVMLError_<Name> subclasses of NVMLError.
class NVMLError_Timeout(NVMLError):
    pass


class NVMLError_FunctionNotFound(NVMLError):
    pass


def fake_pynvml(*, buses: list[bytes], temps: list[int | None], xids: list[tuple[int, int]],
                init_error: bool = False, wait_error: NVMLError | None = None
                ) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.NVMLError_Timeout = NVMLError_Timeout
    m.NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    m.NVML_TEMPERATURE_GPU = 0
    m.nvmlEventTypeXidCriticalError = 8
    m.calls = []
    pending = list(xids)

    def init() -> None:
        if init_error:
            raise NVMLError("Driver Not Loaded")

    def temperature(handle: int, sensor: int) -> int:
        value = temps[handle]
        if value is None:
            raise NVMLError("GPU is lost")
        return value

    def wait(event_set: object, ms: int) -> object:
        if not pending:
            raise wait_error or NVMLError_Timeout("Timeout")
        gpu, code = pending.pop(0)
        return types.SimpleNamespace(device=gpu, eventData=code)

    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.calls.append("shutdown")
    m.nvmlDeviceGetCount = lambda: len(buses)
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=buses[h])
    m.nvmlDeviceGetTemperature = temperature
    m.nvmlEventSetCreate = lambda: "set"
    m.nvmlDeviceGetSupportedEventTypes = lambda h: 0xFF
    m.nvmlDeviceRegisterEvents = lambda h, kind, s: m.calls.append(("register", h, kind))
    m.nvmlEventSetWait_v2 = wait
    m.nvmlEventSetFree = lambda s: m.calls.append("free")
    return m


def test_nvml_view_counts_temps_and_xid_events(monkeypatch) -> None:
    fake = fake_pynvml(buses=[b"00000000:3B:00.0", b"00000000:5D:00.0"], temps=[45, 92],
                       xids=[(1, 79)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    view = nvml_view(want_temperatures=True, watch_xids=True)
    assert [d.pci_bus_id for d in view.devices] == ["0000:3b:00", "0000:5d:00"]
    assert view.xid_events_supported
    assert [(x.device, x.code) for x in view.xids] == [("0000:5d:00", 79)]
    assert ("register", 0, 8) in fake.calls and "free" in fake.calls and "shutdown" in fake.calls
    findings = check_gpus(view, expected=2, max_temp=90)
    assert [(f.severity, f.message) for f in findings] == [("warning", "gpu1 at 92C")]


def test_nvml_query_error_drains(monkeypatch) -> None:
    fake = fake_pynvml(buses=[b"00000000:3B:00.0"], temps=[None], xids=[])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    view = nvml_view(want_temperatures=True, watch_xids=False)
    findings = check_gpus(view, expected=1, max_temp=90)
    assert [(f.severity, f.message) for f in findings] == [
        ("drain", "NVML: gpu0 temperature: GPU is lost")
    ]


def test_nvml_init_failure_drains(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(buses=[], temps=[], xids=[],
                                                           init_error=True))
    view = nvml_view(want_temperatures=False, watch_xids=True)
    assert not view.usable
    findings = check_gpus(view, expected=8, max_temp=None)
    assert [(f.severity, f.message) for f in findings] == [
        ("drain", "NVML: cannot initialise: Driver Not Loaded")
    ]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has a GPU driver")
def test_real_nvml_missing_drains() -> None:
    view = nvml_view(want_temperatures=False, watch_xids=False)
    assert not view.usable and view.errors[0].startswith("NVML: ")


def test_fake_module_matches_real_pynvml_names() -> None:
    pynvml = pytest.importorskip("pynvml")
    fake = fake_pynvml(buses=[], temps=[], xids=[])
    names = [n for n in vars(fake) if n.startswith(("nvml", "NVML"))]
    assert [n for n in names if not hasattr(pynvml, n)] == []
    assert issubclass(pynvml.NVMLError_Timeout, pynvml.NVMLError)
    assert pynvml.nvmlEventTypeXidCriticalError == fake.nvmlEventTypeXidCriticalError


def test_xid_wait_failure_drains_but_missing_call_falls_back(monkeypatch) -> None:
    buses = [b"00000000:3B:00.0"]
    lost = fake_pynvml(buses=buses, temps=[40], xids=[], wait_error=NVMLError("GPU is lost"))
    monkeypatch.setitem(sys.modules, "pynvml", lost)
    view = nvml_view(want_temperatures=False, watch_xids=True)
    assert view.errors == ("NVML: waiting for XID events: GPU is lost",)
    assert [f.severity for f in check_gpus(view, expected=1, max_temp=None)] == ["drain"]
    old = fake_pynvml(buses=buses, temps=[40], xids=[(0, 79)],
                      wait_error=NVMLError_FunctionNotFound("Function Not Found"))
    monkeypatch.setitem(sys.modules, "pynvml", old)
    view = nvml_view(want_temperatures=False, watch_xids=True)
    assert view.errors == () and [x.code for x in view.xids] == [79]
    assert not view.xid_events_supported  # so the kernel log is relied on
