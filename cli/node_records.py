"""Readings of snapshot node records (docs/internals.md, "Snapshot records") shared by views."""

from __future__ import annotations

import re
import time

# Slurm's state word (reference §1): base enum in the low bits, flags above. Used to sort rows the
# way sinfo's `-t` sort key does (numeric state value).
_BASE_VALUE = {"UNKNOWN": 0, "DOWN": 1, "IDLE": 2, "ALLOCATED": 3, "MIXED": 5, "FUTURE": 6}
_FLAG_VALUE = {
    "CLOUD": 1 << 7,
    "DRAIN": 1 << 9,
    "COMPLETING": 1 << 10,
    "NO_RESPOND": 1 << 11,
    "POWERED_DOWN": 1 << 12,
    "FAIL": 1 << 13,
    "POWERING_UP": 1 << 14,
    "POWERING_DOWN": 1 << 18,
    "INVALID_REG": 1 << 22,
    "POWER_DOWN": 1 << 23,
}
_UNUSABLE_BASES = frozenset({"DOWN", "UNKNOWN", "FUTURE"})
_DIGITS = re.compile(r"(\d+)")


def state_value(node: dict) -> int:
    st = node["state"]
    value = _BASE_VALUE.get(st["base"], 0)
    for f in st["flags"]:
        value |= _FLAG_VALUE.get(f, 0)
    return value


def usage_class(node: dict) -> str:
    """sinfo's A/I/O split: "A" allocated or mixed, "I" idle, "O" other (down, drained, failed)."""
    st = node["state"]
    base = st["base"]
    if base in ("ALLOCATED", "MIXED"):
        return "A"
    flags = st["flags"]
    if base in _UNUSABLE_BASES or "DRAIN" in flags or "FAIL" in flags:
        return "O"
    return "I" if base == "IDLE" else "O"


def is_unusable(node: dict) -> bool:
    st = node["state"]
    flags = st["flags"]
    return st["base"] in _UNUSABLE_BASES or "DRAIN" in flags or "FAIL" in flags


def not_responding(node: dict) -> bool:
    return "NO_RESPOND" in node["state"]["flags"]


def is_future(node: dict) -> bool:
    return node["state"]["base"] == "FUTURE"


def natural_key(name: str) -> tuple:
    """Sort key putting node2 before node10."""
    parts: list = _DIGITS.split(name)
    parts[1::2] = map(int, parts[1::2])
    return tuple(parts)


def reason_of(node: dict) -> dict | None:
    return node["state"].get("reason")


def reason_user(reason: dict | None) -> str:
    # Reasons the controller sets itself carry no user; Slurm shows its SlurmUser there (root).
    if not reason:
        return "Unknown"
    return reason.get("user") or "root"


def iso_time(epoch: float | None, missing: str = "Unknown") -> str:
    """Slurm's timestamp form YYYY-MM-DDTHH:MM:SS in local time."""
    if not epoch:
        return missing
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def min_plus(values: list[int]) -> str:
    """sinfo's collapsed number: the minimum, with `+` when the group holds larger values."""
    if not values:
        return "0"
    lo = min(values)
    return f"{lo}+" if max(values) > lo else str(lo)


def gres_text(node: dict) -> str:
    return node.get("gres") or "(null)"


def features_text(node: dict) -> str:
    return ",".join(node.get("features") or ()) or "(null)"
