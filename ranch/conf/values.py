"""Typed values of cluster.conf keys: numbers, booleans, enumerations, lists, Gres.

Each converter takes the text as written and returns the typed value or raises ValueError
(`BadValue` when it can say where inside the value the problem is).
"""

from __future__ import annotations

import re

from ranch.conf.model import Gres
from ranch.conf.timefmt import parse_minutes

NODE_STATES = ("CLOUD", "DOWN", "DRAIN", "FAIL", "FAILING", "FUTURE", "UNKNOWN")
DOWN_STATES = ("DOWN", "DRAIN", "FAIL", "FAILING", "FUTURE", "UNKNOWN")
PARTITION_STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")
HEALTH_NODE_STATES = ("ALLOC", "MIXED", "IDLE", "NONDRAINED_IDLE", "ANY", "CYCLE", "START_ONLY",
                      "REBOOT_ONLY")
SUSPEND_EXC_STATES = ("CLOUD", "DOWN", "DRAIN", "DYNAMIC_FUTURE", "DYNAMIC_NORM", "FAIL",
                      "INVALID_REG", "MAINTENANCE", "NOT_RESPONDING", "PLANNED", "RESERVED")

_GRES_RE = re.compile(r"^([A-Za-z0-9_./-]+)((?::[^:,]+)*?)(?::(\d+)([KMGTP]?))?$", re.IGNORECASE)
_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


HTTP_AUTH = ("LOOPBACK", "TOKEN", "NONE")
ENFORCE = ("NO", "ALL", "ANY", "YES")  # EnforcePartLimits (YES: ALL)


def as_listen(text: str) -> str:
    """HOST:PORT (host may be empty for every address, [v6] bracketed); returned as written."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise BadValue(f"expected HOST:PORT with a port from 1 to 65535, got {text.strip()!r}")
    if host.startswith("[") != host.endswith("]"):
        raise BadValue(f"unbalanced brackets in host {host!r}")
    return text.strip()


def as_port_range(text: str) -> tuple[int, int]:
    from ranch.conf.client import port_range

    try:
        return port_range(text)
    except ValueError as exc:
        raise BadValue(str(exc)) from None


def as_endpoints(text: str) -> tuple[str, ...]:
    """EtcdEndpoints: HOST:PORT, comma list (an http:// in front is allowed and dropped)."""
    out, at = [], 0
    for part in text.split(","):
        item = part.strip()
        bare = item.removeprefix("http://")
        host, sep, port = bare.rpartition(":")
        if not item or not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise BadValue(f"expected HOST:PORT with a port from 1 to 65535, got {item!r}",
                           at + len(part) - len(part.lstrip()))
        out.append(bare)
        at += len(part) + 1
    return tuple(out)


def as_etcd_prefix(text: str) -> str:
    s = text.strip()
    if not s.startswith("/") or len(s) < 2 or any(c.isspace() for c in s):
        raise BadValue(f"expected a key prefix starting with '/' and no spaces, got {s!r}")
    return s


class BadValue(ValueError):
    """A value error with an offset (0-based) inside the value where the problem is."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


def as_int(text: str, lo: int = 0, hi: int | None = None) -> int:
    s = text.strip()
    if not re.fullmatch(r"[+-]?\d+", s):
        raise BadValue(f"{text!r} is not a whole number")
    v = int(s)
    if v < lo or (hi is not None and v > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise BadValue(f"{v} is out of range ({rng})")
    return v


def as_bool(text: str) -> bool:
    u = text.strip().upper()
    if u in ("YES", "TRUE", "1", "Y"):
        return True
    if u in ("NO", "FALSE", "0", "N"):
        return False
    raise BadValue(f"{text!r} is not YES or NO")


def as_enum(text: str, allowed: tuple[str, ...]) -> str:
    u = text.strip().upper()
    if u not in allowed:
        raise BadValue(f"unknown value {text!r}; valid values: {' '.join(allowed)}")
    return u


def as_enum_list(text: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    offset = 0
    for part in text.split(","):
        u = part.strip().upper()
        if u and u not in allowed:
            raise BadValue(f"unknown value {part!r}; valid values: {' '.join(allowed)}", offset)
        if u:
            out.append(u)
        offset += len(part) + 1
    return tuple(out)


def as_time(text: str) -> int | None:
    minutes = parse_minutes(text.strip())
    if minutes is not None and minutes < 0:  # `-5`: a day count Slurm reads as negative
        raise ValueError(f"invalid time {text!r}: a negative time")
    return minutes


def as_minutes_to_seconds(text: str) -> int:
    """A Slurm time (minutes, or [D-]HH:MM:SS) in seconds; UNLIMITED is refused."""
    minutes = as_time(text)
    if minutes is None:
        raise ValueError(f"invalid time {text!r}: not a finite time")
    return minutes * 60


MEM_UNITS = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2, "P": 1024.0 ** 3}


def as_billing_weights(text: str) -> tuple[tuple[str, float], ...]:
    """TRESBillingWeights: `NAME=WEIGHT[,...]`; names lower-cased (cpu, mem, node, gres/gpu);
    a memory weight is kept per MB (its K/M/G/T/P suffix names the unit it was given per)."""
    out: list[tuple[str, float]] = []
    offset = 0
    for part in text.split(","):
        name, eq, raw = part.strip().partition("=")
        unit = raw.strip()[-1:].upper() if raw.strip()[-1:].isalpha() else ""
        number = raw.strip()[:-1] if unit else raw.strip()
        try:
            weight = float(number)
        except ValueError:
            raise BadValue(f"invalid TRES billing weight {part.strip()!r}: NAME=NUMBER",
                           offset) from None
        if not eq or not name or weight < 0 or (unit and (
                name.lower() != "mem" or unit not in MEM_UNITS)):
            raise BadValue(f"invalid TRES billing weight {part.strip()!r}", offset)
        out.append((name.lower(), weight / MEM_UNITS[unit] if name.lower() == "mem" else weight))
        offset += len(part) + 1
    return tuple(out)


def as_list(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def parse_gres(text: str) -> tuple[Gres, ...]:
    """`name[:type][:no_consume]:count[KMGTP]`, comma separated; count defaults to 1."""
    out: list[Gres] = []
    offset = 0
    for part in split_top(text):
        item = part.strip()
        if item and item.lower() != "(null)":
            m = _GRES_RE.match(item)
            if not m:
                raise BadValue(f"bad Gres {item!r}: expected name[:type]:count", offset)
            name, middle, count, suffix = m.groups()
            types = [t for t in middle.split(":") if t and t.lower() != "no_consume"]
            n = int(count) * _SUFFIX[suffix.upper()] if count is not None else 1
            # slurmctld 22.05 starts with `gpu:a:b:2` and reads it as gpu:a:2,gpu:b:2 (checked
            # with `scontrol show node`): each type gets the count.
            out.extend(Gres(name, t, n) for t in types or [None])
        offset += len(part) + 1
    return tuple(out)


def split_top(text: str) -> list[str]:
    """Split on commas that are outside brackets."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


PURGE_UNITS = {"hour": 3600, "hours": 3600, "day": 86400, "days": 86400,
               "month": 30 * 86400, "months": 30 * 86400}


def as_purge_age(text: str) -> int:
    """slurmdbd's PurgeJobAfter: `N` months, or `Nhours`, `Ndays`, `Nmonths` (a month is 30
    days here); seconds, at least one hour."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or (unit and unit not in PURGE_UNITS):
        raise BadValue(f"{text!r} is not N, Nhours, Ndays or Nmonths")
    n = int(m.group(1))
    if n < 1:
        raise BadValue(f"{text!r} is out of range (at least 1hour)")
    return n * PURGE_UNITS[unit or "months"]


def as_seconds_or_infinite(text: str) -> int | None:
    u = text.strip().upper()
    if u in ("INFINITE", "UNLIMITED", "NONE", "-1"):
        return None
    return as_int(text)
