"""Slurm time limits: parse the forms slurm.conf accepts, format them as sinfo and scontrol do."""

from __future__ import annotations

_UNLIMITED = frozenset({"UNLIMITED", "INFINITE", "-1"})


def _valid_timespec(s: str) -> bool:
    """Slurm's _is_valid_timespec (src/common/parse_time.c): digits, at most one '-' (before
    any ':'), at most two ':', and enough runs of digits that no field is empty."""
    digits = dashes = colons = 0
    in_digits = False
    for ch in s:
        if "0" <= ch <= "9":
            if not in_digits:
                digits += 1
                in_digits = True
        elif ch == "-":
            in_digits = False
            dashes += 1
            if colons:
                return False
        elif ch == ":":
            in_digits = False
            colons += 1
        else:
            return False
    if not digits or dashes > 1 or colons > 2:
        return False
    need = {1: 3, 2: 4} if dashes else {1: 2, 2: 3}
    return digits >= need.get(colons, 0)


def _scan(text: str, seps: str) -> list[int]:
    """C's sscanf("%d<sep>%d<sep>%d..."): the leading integers read before the first mismatch."""
    out: list[int] = []
    pos = 0
    for i in range(len(seps) + 1):
        if i:
            if pos >= len(text) or text[pos] != seps[i - 1]:
                break
            pos += 1
        start = pos
        if pos < len(text) and text[pos] in "+-":
            pos += 1
        while pos < len(text) and text[pos].isdigit():
            pos += 1
        if pos == start or not text[start:pos].lstrip("+-"):
            break
        out.append(int(text[start:pos]))
    return out


def parse_seconds(text: str) -> int | None:
    """Seconds of a Slurm time string, read as Slurm's time_str2secs does; None means UNLIMITED.
    Raises ValueError when Slurm would refuse it.

    Forms: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`, `UNLIMITED`/`INFINITE`/-1. No field
    has an upper bound: `0:600` is ten minutes and `1:75:00` is 2:15:00, as in Slurm.
    """
    s = text
    if s.upper() in _UNLIMITED:
        return None
    if not _valid_timespec(s):
        raise ValueError(
            f"invalid time {text!r}: expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
            "D-HH:MM:SS or UNLIMITED"
        )
    if "-" in s:
        d, h, m, se = [*_scan(s, "-::"), 0, 0, 0, 0][:4]
        return d * 86400 + h * 3600 + m * 60 + se
    fields = _scan(s, "::")
    if len(fields) == 3:
        return fields[0] * 3600 + fields[1] * 60 + fields[2]
    fields.append(0)
    return fields[0] * 60 + fields[1]


def parse_minutes(text: str) -> int | None:
    """Minutes of a Slurm time string (Slurm's time_str2mins): seconds round up to the next
    minute; None means UNLIMITED. Raises ValueError when malformed (see parse_seconds)."""
    secs = parse_seconds(text)
    if secs is None:
        return None
    return int((secs + 59) / 60)  # C's division truncates toward zero


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
