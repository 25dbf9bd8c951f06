"""GPUs of the node: NVML when a driver answers, else N fake H100s with slowly varying metrics.

Fake mode (`--fake-gpus N` / RANCH_FAKE_GPUS) lets a laptop play a GPU node; a JSON file named
by RANCH_FAKE_GPU_FAULTS ({"temps": {"0": 95}}) pins temperatures so tests can break a GPU.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
from collections.abc import Callable
from typing import Any, Protocol

from ranch.healthcheck.gpu import FAKE_FAULTS_ENV as FAULTS_ENV
from ranch.healthcheck.gpu import FAKE_GPUS_ENV as FAKE_ENV
from ranch.healthcheck.gpu import nvml_text as _text
from ranch.protocol.messages import GpuInfo, GpuMetrics

log = logging.getLogger("rnoded.gpus")

FAKE_NAME = "NVIDIA H100 80GB HBM3"
FAKE_MEMORY_MIB = 81559
FAKE_DRIVER = "550.54.15"
FAKE_IDLE_W, FAKE_MAX_W = 70.0, 700.0


class GpuSource(Protocol):
    def infos(self) -> tuple[GpuInfo, ...]: ...

    def metrics(self) -> tuple[GpuMetrics, ...]: ...


class NoGpus:
    def infos(self) -> tuple[GpuInfo, ...]:
        return ()

    def metrics(self) -> tuple[GpuMetrics, ...]:
        return ()


def fake_uuid(node_name: str, index: int) -> str:
    """Stable per node and index, shaped like NVML's GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    h = hashlib.sha256(f"{node_name}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class FakeGpus:
    """N fake GPUs whose utilisation wanders (random walk); memory, temperature and power follow."""

    def __init__(
        self,
        count: int,
        node_name: str,
        *,
        faults_path: str | None = None,
        seed: int | None = None,
    ) -> None:
        self.count = count
        self.node_name = node_name
        self.faults_path = faults_path
        self._rng = random.Random(seed if seed is not None else node_name)
        self._util = [self._rng.uniform(0.0, 30.0) for _ in range(count)]

    def infos(self) -> tuple[GpuInfo, ...]:
        return tuple(
            GpuInfo(
                index=i,
                name=FAKE_NAME,
                uuid=fake_uuid(self.node_name, i),
                pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
                memory_total_mib=FAKE_MEMORY_MIB,
                driver=FAKE_DRIVER,
            )
            for i in range(self.count)
        )

    def metrics(self) -> tuple[GpuMetrics, ...]:
        pinned = self._pinned_temps()
        out = []
        for i in range(self.count):
            # Small steps, clamped: figures change slowly between heartbeats, as real ones do.
            self._util[i] = min(100.0, max(0.0, self._util[i] + self._rng.gauss(0.0, 5.0)))
            load = self._util[i] / 100.0
            temp = pinned.get(i, 32.0 + 45.0 * load + self._rng.uniform(-1.0, 1.0))
            out.append(
                GpuMetrics(
                    index=i,
                    util_pct=round(self._util[i], 1),
                    memory_used_mib=int(FAKE_MEMORY_MIB * min(0.95, 0.02 + 0.9 * load)),
                    memory_total_mib=FAKE_MEMORY_MIB,
                    temperature_c=round(temp, 1),
                    power_w=round(FAKE_IDLE_W + (FAKE_MAX_W - FAKE_IDLE_W) * load, 1),
                )
            )
        return tuple(out)

    def _pinned_temps(self) -> dict[int, float]:
        if not self.faults_path:
            return {}
        try:
            with open(self.faults_path, encoding="utf-8") as f:
                temps = json.load(f).get("temps", {})
            return {int(k): float(v) for k, v in temps.items()}
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            log.warning("cannot read fake GPU faults from %s: %s", self.faults_path, exc)
            return {}


class NvmlGpus:
    """Real GPUs through NVML; a query that fails on one GPU skips that figure, not the node."""

    def __init__(self) -> None:
        import pynvml  # only when asked: importing is cheap, initialising needs a driver

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.count = pynvml.nvmlDeviceGetCount()
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.count)]

    def infos(self) -> tuple[GpuInfo, ...]:
        nv = self.nvml
        driver = _text(nv.nvmlSystemGetDriverVersion())
        return tuple(
            GpuInfo(
                index=i,
                name=_text(nv.nvmlDeviceGetName(h)),
                uuid=_text(nv.nvmlDeviceGetUUID(h)),
                pci_bus_id=_text(nv.nvmlDeviceGetPciInfo(h).busId),
                memory_total_mib=nv.nvmlDeviceGetMemoryInfo(h).total >> 20,
                driver=driver,
            )
            for i, h in enumerate(self.handles)
        )

    def metrics(self) -> tuple[GpuMetrics, ...]:
        nv = self.nvml
        out = []
        for i, h in enumerate(self.handles):
            mem = self._try(nv.nvmlDeviceGetMemoryInfo, h)
            util = self._try(nv.nvmlDeviceGetUtilizationRates, h)
            temp = self._try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
            power = self._try(nv.nvmlDeviceGetPowerUsage, h)
            out.append(
                GpuMetrics(
                    index=i,
                    util_pct=float(util.gpu) if util is not None else 0.0,
                    memory_used_mib=(mem.used >> 20) if mem is not None else 0,
                    memory_total_mib=(mem.total >> 20) if mem is not None else 0,
                    temperature_c=float(temp) if temp is not None else 0.0,
                    power_w=power / 1000.0 if power is not None else 0.0,
                )
            )
        return tuple(out)

    def _try(self, fn: Callable[..., Any], *args: object) -> Any:
        """fn(*args), None when NVML says it failed (pynvml's results are untyped)."""
        try:
            return fn(*args)
        except self.nvml.NVMLError as exc:
            log.debug("NVML %s failed: %s", fn.__name__, exc)
            return None


def open_gpus(node_name: str, fake_count: int | None) -> GpuSource:
    """Fake GPUs when asked (flag, else RANCH_FAKE_GPUS); else NVML; else none."""
    if fake_count is None and os.environ.get(FAKE_ENV, "").strip():
        text = os.environ[FAKE_ENV].strip()
        if not text.isdigit():
            raise ValueError(f"{FAKE_ENV}={text!r} is not a number of GPUs")
        fake_count = int(text)
    if fake_count is not None:
        return FakeGpus(fake_count, node_name, faults_path=os.environ.get(FAULTS_ENV) or None)
    try:
        return NvmlGpus()
    except Exception as exc:  # no library, no driver, no device: a CPU node
        log.info("no NVML GPUs (%s)", exc)
        return NoGpus()
