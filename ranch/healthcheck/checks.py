"""The built-in node checks (disk, memory, load, GPUs, XIDs); each returns Findings."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time

import attrs

from ranch.healthcheck.gpu import GpuView
from ranch.healthcheck.kernlog import KernelLog, recent_xids

WARNING, DRAIN, FAIL = "warning", "drain", "fail"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:I?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1024**2, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


@attrs.frozen
class Finding:
    severity: str  # warning | drain | fail
    message: str


def parse_size(text: str) -> int:
    """'512M', '1.5G', '1T' -> bytes (binary units); a bare number is MiB, as in Slurm."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"bad size {text!r} (expected a number with K, M, G or T)")
    return int(float(match[1]) * _UNITS[match[2].upper()])


def parse_disk_spec(text: str) -> tuple[str, float]:
    """'PATH:MAX%' -> (path, max percent)."""
    path, sep, limit = text.rpartition(":")
    if not sep or not path:
        raise ValueError(f"bad --disk {text!r} (expected PATH:MAX%)")
    try:
        value = float(limit.strip().removesuffix("%"))
    except ValueError:
        raise ValueError(f"bad --disk {text!r}: {limit!r} is not a percentage") from None
    if not 0 <= value <= 100:
        raise ValueError(f"bad --disk {text!r}: the maximum must be between 0 and 100%")
    return path, value


def human_size(n: float) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if abs(n) < 1024 or unit == "T":
            return f"{n:.0f}{unit}" if unit == "" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}T"


def check_disk(path: str, max_pct: float) -> list[Finding]:
    try:
        usage = shutil.disk_usage(path)
    except OSError as exc:
        return [Finding(DRAIN, f"disk {path}: {exc.strerror or exc}")]
    # Like df: the share of the space a user can have that is taken (root's reserve excluded).
    room = usage.used + usage.free
    pct = 100.0 * usage.used / room if room else 100.0
    if pct > max_pct:
        return [Finding(DRAIN, f"disk {path} {pct:.0f}% full (max {max_pct:g}%)")]
    return []


def check_memory(min_free: int, available: int | None = None) -> list[Finding]:
    if available is None:
        import psutil

        available = psutil.virtual_memory().available
    if available < min_free:
        text = f"free memory {human_size(available)} below {human_size(min_free)}"
        return [Finding(DRAIN, text)]
    return []


def check_load(max_load: float, load: float | None = None) -> list[Finding]:
    load = os.getloadavg()[0] if load is None else load
    if load > max_load:
        return [Finding(DRAIN, f"load {load:.2f} above {max_load:g}")]
    return []


def check_gpus(view: GpuView, *, expected: int | None, max_temp: float | None) -> list[Finding]:
    """Boot (count) and metrics (temperature, query errors) checks, after Navarch's."""
    findings = [Finding(DRAIN, error) for error in view.errors]
    if not view.usable:
        return findings
    if expected is not None and view.count != expected:
        findings.append(Finding(DRAIN, f"expected {expected} GPUs, found {view.count}"))
    if max_temp is not None:
        for device in view.devices:
            t = device.temperature_c
            if t is not None and t > max_temp:
                findings.append(Finding(WARNING, f"gpu{device.index} at {t:.0f}C"))
    return findings


def check_xids(
    view: GpuView | None,
    log: KernelLog | None,
    *,
    window: float,
    now: float,
    boot_time: float | None,
    state_path: str | None = None,
) -> list[Finding]:
    """Fatal XIDs fail the node for as long as they are inside the window; other XIDs warn, and
    with a state file each such event warns on one run only."""
    events = list(view.xids) if view is not None else []
    if log is not None:
        events += recent_xids(log, window=window, now=now, boot_time=boot_time)
    findings: list[Finding] = []
    if log is None and not (view is not None and view.xid_events_supported):
        findings.append(Finding(WARNING, "XID check: no kernel log readable, NVML events off"))
    seen = _load_seen(state_path) if state_path else {}
    fresh_keys = []
    reported: set[tuple[str, int]] = set()
    for event in sorted(events, key=lambda e: not e.fatal):
        if not event.fatal and event.key in seen:
            continue
        if not event.fatal:
            fresh_keys.append(event.key)
        if (event.device, event.code) in reported:
            continue
        reported.add((event.device, event.code))
        findings.append(Finding(FAIL if event.fatal else WARNING, event.describe()))
    if state_path:
        _save_seen(state_path, seen, fresh_keys, now=now, keep=max(window, 3600.0) * 2)
    return findings


def _load_seen(path: str) -> dict[str, float]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return {str(k): float(v) for k, v in dict(data.get("seen", {})).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}  # a lost or broken state file only means warnings repeat once


def _save_seen(path: str, seen: dict[str, float], fresh: list[str], *, now: float, keep: float
               ) -> None:
    kept = {k: t for k, t in seen.items() if t >= now - keep}
    kept.update({key: now for key in fresh})
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".xid-state.", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"seen": kept, "written": time.time()}, handle)
        os.replace(tmp, path)
    except OSError:
        pass
