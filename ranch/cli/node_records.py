"""Readings of snapshot node records (docs/internals.md, "Snapshot records") shared by views."""

from __future__ import annotations

from ranch.protocol.records import is_unusable, reason_of, reason_user, usage_class

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
_ASCII_DIGITS = "0123456789"
_digit_runs = None  # re.compile(r"(\d+)").split, for names with a number before the last


def state_value(node: dict) -> int:
    st = node["state"]
    value = _BASE_VALUE.get(st["base"], 0)
    for f in st["flags"]:
        value |= _FLAG_VALUE.get(f, 0)
    return value


def not_responding(node: dict) -> bool:
    return "NO_RESPOND" in node["state"]["flags"]


def is_future(node: dict) -> bool:
    return node["state"]["base"] == "FUTURE"


def natural_key(name: str) -> tuple:
    """Sort key putting node2 before node10 (re.split(r"(\\d+)")'s pieces, numbers as ints)."""
    head = name.rstrip(_ASCII_DIGITS)
    # letters alone (C speed), or ASCII without a digit: text then at most one number
    if head.isalpha() or not head or (
            head.isascii() and not any(d in head for d in _ASCII_DIGITS)):
        # (gpu0012, login, n-ib3): most names, and no `import re`
        return (head, int(name[len(head):]), "") if len(head) < len(name) else (head,)
    global _digit_runs
    if _digit_runs is None:
        import re

        _digit_runs = re.compile(r"(\d+)").split
    parts: list = _digit_runs(name)
    parts[1::2] = map(int, parts[1::2])
    return tuple(parts)


def iso_time(epoch: float | None, missing: str = "Unknown") -> str:
    """Slurm's timestamp form YYYY-MM-DDTHH:MM:SS in local time."""
    from ranch.conf.timefmt import slurm_timestamp  # only when a time is shown

    return slurm_timestamp(epoch or 0, missing)


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


__all__ = ["is_unusable", "reason_of", "reason_user", "usage_class"]  # shared readings
