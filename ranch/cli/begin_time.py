"""sbatch's --begin forms turned into wall-clock seconds (local time), as rbatch sends them."""

from __future__ import annotations

import datetime as dt
import re

_UNITS = {
    "": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}
# Named times of day: the next one to come (midnight is tomorrow's 00:00 once today began).
# Slurm 22.05's parse_time.c knows these four (elevenses came later: 22.05 refuses it)
_NAMED = {"midnight": (0, 0), "noon": (12, 0), "fika": (15, 0),
          "teatime": (16, 0)}
_RELATIVE = re.compile(r"now(?:\s*([+-])\s*(\d+)\s*([a-z]*))?")
_CLOCK = r"(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s*([ap]m))?"
_ISO = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[t ]" + _CLOCK + ")?")
_US = re.compile(r"(\d{1,2})[/.](\d{1,2})(?:[/.](\d{2}|\d{4}))?(?:-" + _CLOCK + ")?")
_MMDD = re.compile(r"(\d{2})(\d{2})(\d{2})?")


class BeginError(ValueError):
    pass


def _clock(h: str, mi: str, s: str | None, ampm: str | None) -> dt.time:
    hour, minute, second = int(h), int(mi), int(s or 0)
    if ampm:
        if not 1 <= hour <= 12:
            raise BeginError(f"hour {hour} with {ampm.upper()}")
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    return dt.time(hour, minute, second)


def _year(text: str | None, today: dt.date) -> int:
    if text is None:
        return today.year
    return int(text) + (2000 if len(text) == 2 else 0)


def parse_begin(text: str, now: float) -> float:
    """The epoch time `text` names, `now` being the current one; BeginError if it names none.

    Forms: now[+N[seconds|minutes|hours|days|weeks]], HH:MM[:SS][AM|PM] (tomorrow when that
    time has passed today), YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]], MMDD[YY], today,
    tomorrow, midnight, noon, fika, teatime."""
    word = text.strip().lower()
    current = dt.datetime.fromtimestamp(now)
    today = current.date()
    try:
        if (rel := _RELATIVE.fullmatch(word)) is not None:
            sign, count, unit = rel.groups()
            if sign is None:
                return now
            if unit not in _UNITS:
                raise BeginError(f"unknown unit {unit!r}")
            delta = int(count) * _UNITS[unit]
            return now + (delta if sign == "+" else -delta)
        if word == "today":
            return dt.datetime.combine(today, dt.time()).timestamp()
        if word == "tomorrow":
            return dt.datetime.combine(today + dt.timedelta(days=1), dt.time()).timestamp()
        if word in _NAMED:
            at = dt.datetime.combine(today, dt.time(*_NAMED[word]))
            return (at if at > current else at + dt.timedelta(days=1)).timestamp()
        if (clock := re.fullmatch(_CLOCK, word)) is not None:
            at = dt.datetime.combine(today, _clock(*clock.groups()))
            return (at if at > current else at + dt.timedelta(days=1)).timestamp()
        if (iso := _ISO.fullmatch(word)) is not None:
            y, mo, d, *hms = iso.groups()
            at_time = _clock(*hms) if hms[0] is not None else dt.time()
            return dt.datetime.combine(dt.date(int(y), int(mo), int(d)), at_time).timestamp()
        if (us := _US.fullmatch(word) or _MMDD.fullmatch(word)) is not None:
            mo, d, y, *hms = us.groups() + (None,) * (7 - len(us.groups()))
            at_time = _clock(*hms) if hms[0] is not None else dt.time()
            day = dt.date(_year(y, today), int(mo), int(d))
            return dt.datetime.combine(day, at_time).timestamp()
    except ValueError as exc:  # out-of-range parts: month 13, 25:00...
        raise BeginError(f"--begin={text}: {exc}") from None
    raise BeginError(f"--begin={text}: expected now+N[seconds|minutes|hours|days|weeks], "
                     "HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]], today, "
                     "tomorrow, midnight, noon, fika or teatime")
