"""Small figure helpers: percentiles and a process's CPU and memory as psutil sees them."""

from __future__ import annotations

import math
import os
import time

import psutil


def percentile(values: list[float], pct: float) -> float | None:
    """The nearest-rank percentile of `values` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


class CpuWindow:
    """CPU used by a process between `start()` and `stop()`, as percent of one core."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self._t0 = self._cpu0 = 0.0
        self.pct: float | None = None

    def _cpu(self) -> float:
        t = self.proc.cpu_times()
        return t.user + t.system

    def start(self) -> None:
        self._t0, self._cpu0 = time.monotonic(), self._cpu()

    def stop(self) -> float:
        wall = time.monotonic() - self._t0
        self.pct = 100.0 * (self._cpu() - self._cpu0) / wall if wall > 0 else 0.0
        return self.pct


def rss_mb(pid: int) -> float | None:
    try:
        return psutil.Process(pid).memory_info().rss / 1e6
    except psutil.Error:
        return None


def peak_rss_mb(pid: int) -> float | None:
    """The kernel's high-water mark of the process's resident set (VmHWM), in MB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return rss_mb(pid)


def self_pid() -> int:
    return os.getpid()
