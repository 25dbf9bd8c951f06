"""What the node's GPUs look like right now, from NVML or from the fake-GPU mode
(RANCH_FAKE_GPUS=N; faults injected through the JSON file named by RANCH_FAKE_GPU_FAULTS)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import attrs

from ranch.healthcheck.xid import XidEvent, normalize_bus_id

FAKE_GPUS_ENV = "RANCH_FAKE_GPUS"
FAKE_FAULTS_ENV = "RANCH_FAKE_GPU_FAULTS"
FAKE_TEMPERATURE = 40.0
# Bus ids of an 8-GPU HGX board, so fake XID lines look like real ones.
_FAKE_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
NVML_EVENT_WAIT_MS = 200


@attrs.frozen
class GpuDevice:
    index: int
    pci_bus_id: str  # normalized: "0000:3b:00"
    temperature_c: float | None = None


@attrs.frozen
class GpuView:
    source: str  # "nvml" | "fake"
    devices: tuple[GpuDevice, ...] = ()
    errors: tuple[str, ...] = ()  # NVML query failures: each one drains the node
    xids: tuple[XidEvent, ...] = ()  # live events (NVML) or injected ones (fake)
    xid_events_supported: bool = False
    usable: bool = True  # False when NVML could not even start

    @property
    def count(self) -> int:
        return len(self.devices)

    def index_of(self, bus_id: str) -> int | None:
        return next((d.index for d in self.devices if d.pci_bus_id == bus_id), None)


def fake_bus_id(index: int) -> str:
    bus = _FAKE_BUSES[index] if index < len(_FAKE_BUSES) else (0x10 + index) & 0xFF
    return f"0000:{bus:02x}:00"


def fake_view(count: int, faults_path: str | None) -> GpuView:
    """`count` fake GPUs with the faults in the file applied (a missing file means none)."""
    try:
        return _fake_view(count, faults_path)
    except ValueError as exc:
        return GpuView("fake", errors=(str(exc),), usable=False)
    except (TypeError, AttributeError):
        message = f"fake GPU faults file {faults_path}: unexpected layout"
        return GpuView("fake", errors=(message,), usable=False)


def _fake_view(count: int, faults_path: str | None) -> GpuView:
    faults = _load_faults(faults_path)
    missing = _int(faults.get("missing", 0), "missing", faults_path)
    temps = {str(k): v for k, v in dict(faults.get("temps") or {}).items()}
    devices = tuple(
        GpuDevice(i, fake_bus_id(i), float(temps.get(str(i), FAKE_TEMPERATURE)))
        for i in range(max(0, count - missing))
    )
    xids = []
    for entry in faults.get("xids") or ():
        gpu = _int(entry.get("gpu", 0), "xids[].gpu", faults_path)
        code = _int(entry.get("xid"), "xids[].xid", faults_path)
        detail = str(entry.get("message", ""))
        xids.append(XidEvent(fake_bus_id(gpu), code, detail, None, f"fake/{gpu}/{code}"))
    errors = (f"NVML: {faults['nvml_error']}",) if faults.get("nvml_error") else ()
    return GpuView("fake", devices, errors, tuple(xids), xid_events_supported=True)


def nvml_view(*, want_temperatures: bool, watch_xids: bool) -> GpuView:
    """Query NVML; any failure becomes an error line rather than an exception."""
    try:
        import pynvml
    except ImportError:
        return GpuView("nvml", errors=("NVML: pynvml is not installed",), usable=False)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return GpuView("nvml", errors=(f"NVML: cannot initialise: {exc}",), usable=False)
    try:
        errors: list[str] = []
        devices: list[GpuDevice] = []
        handles: list[Any] = []
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            return GpuView("nvml", errors=(f"NVML: cannot count GPUs: {exc}",), usable=False)
        for index in range(count):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                bus = normalize_bus_id(nvml_text(pynvml.nvmlDeviceGetPciInfo(handle).busId))
            except pynvml.NVMLError as exc:
                errors.append(f"NVML: gpu{index}: {exc}")
                continue
            temperature = None
            if want_temperatures:
                try:
                    temperature = float(
                        pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
                    )
                except pynvml.NVMLError as exc:
                    errors.append(f"NVML: gpu{index} temperature: {exc}")
            handles.append(handle)
            devices.append(GpuDevice(index, bus, temperature))
        supported = False
        xids: tuple[XidEvent, ...] = ()
        if watch_xids and handles:
            supported, xids, wait_error = _watch_xid_events(pynvml, handles)
            if wait_error:
                errors.append(wait_error)
        return GpuView("nvml", tuple(devices), tuple(errors), xids, supported)
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _watch_xid_events(
    pynvml: Any, handles: list[Any]
) -> tuple[bool, tuple[XidEvent, ...], str]:
    """Register for critical-XID events and wait briefly: (supported, events, error). NVML only
    reports XIDs raised while we listen, so this catches what happens during the run; the kernel
    log covers the past. The wait ends on NVMLError_Timeout; a driver without the wait call
    means "unsupported" (kernel log only); any other failure of the wait is an NVML error."""
    timeout_error = getattr(pynvml, "NVMLError_Timeout", None)
    missing_error = getattr(pynvml, "NVMLError_FunctionNotFound", None)
    try:
        event_set = pynvml.nvmlEventSetCreate()
    except pynvml.NVMLError:
        return False, (), ""
    registered = 0
    try:
        for handle in handles:
            try:
                kinds = pynvml.nvmlDeviceGetSupportedEventTypes(handle)
                if kinds & pynvml.nvmlEventTypeXidCriticalError:
                    pynvml.nvmlDeviceRegisterEvents(
                        handle, pynvml.nvmlEventTypeXidCriticalError, event_set
                    )
                    registered += 1
            except pynvml.NVMLError:
                continue
        if not registered:
            return False, (), ""
        events: list[XidEvent] = []
        deadline = time.monotonic() + NVML_EVENT_WAIT_MS / 1000
        while (left := deadline - time.monotonic()) > 0:
            try:
                data = pynvml.nvmlEventSetWait_v2(event_set, max(1, int(left * 1000)))
            except pynvml.NVMLError as exc:
                if timeout_error is not None and isinstance(exc, timeout_error):
                    break  # nothing more happened
                if missing_error is not None and isinstance(exc, missing_error):
                    return False, tuple(events), ""
                return True, tuple(events), f"NVML: waiting for XID events: {exc}"
            try:
                bus = normalize_bus_id(nvml_text(pynvml.nvmlDeviceGetPciInfo(data.device).busId))
            except pynvml.NVMLError:
                bus = "unknown"
            now = time.time()
            code = int(data.eventData)
            events.append(XidEvent(bus, code, "", now, f"nvml/{bus}/{code}/{now:.6f}"))
        return True, tuple(events), ""
    finally:
        try:
            pynvml.nvmlEventSetFree(event_set)
        except pynvml.NVMLError:
            pass


def _load_faults(path: str | None) -> dict[str, Any]:
    if not path or not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ValueError(f"fake GPU faults file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"fake GPU faults file {path}: expected a JSON object")
    return data


def _int(value: object, field: str, path: str | None) -> int:
    if isinstance(value, int | float | str):  # of what JSON gives, what int() takes
        try:
            return int(value)
        except ValueError:
            pass
    raise ValueError(f"fake GPU faults file {path}: {field} must be an integer")


def nvml_text(value: bytes | str) -> str:
    """NVML strings are bytes in older pynvml releases and str in newer ones."""
    return value.decode() if isinstance(value, bytes) else value
