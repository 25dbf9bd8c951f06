"""Slurm time limits: parse the forms slurm.conf accepts, format them as sinfo and scontrol do."""

from __future__ import annotations

_UNLIMITED = frozenset({"UNLIMITED", "INFINITE", "-1"})
# Compiled by re's cache on first use: importing re costs a command (which only formats) 6 ms.
_DAYS = r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$"
_CLOCK = r"^(\d+)(?::(\d+))?(?::(\d+))?$"


def parse_minutes(text: str) -> int | None:
    """Minutes of a Slurm time string; None means UNLIMITED. Raises ValueError when malformed.

    Forms: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`, `UNLIMITED`/`INFINITE`/-1.
    Seconds round up to the next minute, as Slurm does.
    """
    import re

    s = text.strip()
    if s.upper() in _UNLIMITED:
        return None
    m = re.match(_DAYS, s)
    if m:
        d, h, mi, se = (int(g) if g is not None else 0 for g in m.groups())
        _check_fields(text, mi, se)
        secs = ((d * 24 + h) * 60 + mi) * 60 + se
    else:
        m = re.match(_CLOCK, s)
        if not m:
            raise ValueError(
                f"invalid time {text!r}: expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
                "D-HH:MM:SS or UNLIMITED"
            )
        a, b, c = m.groups()
        if b is None:
            return int(a)
        if c is None:
            mi, se = int(a), int(b)
            _check_fields(text, 0, se)
            secs = mi * 60 + se
        else:
            h, mi, se = int(a), int(b), int(c)
            _check_fields(text, mi, se)
            secs = (h * 60 + mi) * 60 + se
    return (secs + 59) // 60


def _check_fields(text: str, minutes: int, seconds: int) -> None:
    if minutes > 59 or seconds > 59:
        raise ValueError(f"invalid time {text!r}: minutes and seconds must be below 60")


def format_limit(minutes: int | None) -> str:
    """scontrol's MaxTime/DefaultTime: `infinite`, `HH:MM:SS`, or `D-HH:MM:SS` from a day on."""
    if minutes is None:
        return "infinite"
    days, rem = divmod(minutes, 24 * 60)
    hours, mins = divmod(rem, 60)
    if days:
        return f"{days}-{hours:02d}:{mins:02d}:00"
    return f"{hours:02d}:{mins:02d}:00"


def format_sinfo_limit(minutes: int | None) -> str:
    """sinfo's TIMELIMIT/DEFAULTTIME: no leading zeros and no empty hours, so `5:00` (MM:SS),
    `1:30:00` (H:MM:SS), `1-00:00:00` (D-HH:MM:SS) or `infinite` (what scripts parse)."""
    if minutes is None:
        return "infinite"
    days, rem = divmod(minutes, 24 * 60)
    hours, mins = divmod(rem, 60)
    if days:
        return f"{days}-{hours:02d}:{mins:02d}:00"
    if hours:
        return f"{hours}:{mins:02d}:00"
    return f"{mins}:00"


def slurm_timestamp(epoch: float | None = None, missing: str = "Unknown") -> str:
    """Slurm's timestamp, YYYY-MM-DDTHH:MM:SS in local time (now when `epoch` is None; `missing`
    for 0, as Slurm prints an unset time). The one home of this form for commands and daemons."""
    import time

    if epoch is None:
        return time.strftime("%Y-%m-%dT%H:%M:%S")
    if not epoch:
        return missing
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))
