"""Slurm's time forms (parse_time.c) turned into wall-clock seconds (local time): sbatch's --begin
looks ahead (the next 16:00 to come), sacct's --starttime/--endtime look back (`past`)."""

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
# Named times of day, read as HH:MM (midnight looking ahead is tomorrow's 00:00 once today began).
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


def _day_of(at: dt.time, current: dt.datetime, past: bool) -> dt.date:
    """The day of a time given without a date: today when looking back, or when its hour and
    minute (parse_time.c compares no seconds) are still to come today; else tomorrow."""
    if past or (at.hour, at.minute) > (current.hour, current.minute):
        return current.date()
    return current.date() + dt.timedelta(days=1)


def _year(text: str | None, month: int, day: int, at: dt.time, current: dt.datetime,
          past: bool) -> int:
    """The year of a date: as written (YY is 20YY), else, looking back, this year unless the
    month is still to come (then last year's); looking ahead, this year if that moment is still
    to come (to the minute), else next year's (parse_time.c's rule)."""
    if text is not None:
        return int(text) + (2000 if len(text) == 2 else 0)
    if past:
        return current.year - 1 if month > current.month else current.year
    ahead = (month, day, at.hour, at.minute) > (current.month, current.day, current.hour,
                                                current.minute)
    return current.year if ahead else current.year + 1


def parse_begin(text: str, now: float, past: bool = False) -> float:
    """The epoch time `text` names, `now` being the current one; BeginError if it names none.
    `past`: a time or date without its day or year is the latest one not to come (sacct's -S and
    -E), not the next one (sbatch's --begin).

    Forms: now[{+|-}N[seconds|minutes|hours|days|weeks]], HH:MM[:SS][AM|PM],
    YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]], MMDD[YY], today, tomorrow, midnight, noon,
    fika, teatime."""
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
        clock = re.fullmatch(_CLOCK, word)
        if word in _NAMED or clock is not None:
            at = _clock(*clock.groups()) if clock is not None else dt.time(*_NAMED[word])
            return dt.datetime.combine(_day_of(at, current, past), at).timestamp()
        if (iso := _ISO.fullmatch(word)) is not None:
            y, mo, d, *hms = iso.groups()
            at_time = _clock(*hms) if hms[0] is not None else dt.time()
            return dt.datetime.combine(dt.date(int(y), int(mo), int(d)), at_time).timestamp()
        if (us := _US.fullmatch(word) or _MMDD.fullmatch(word)) is not None:
            mo, d, y, *hms = us.groups() + (None,) * (7 - len(us.groups()))
            at_time = _clock(*hms) if hms[0] is not None else dt.time()
            day = dt.date(_year(y, int(mo), int(d), at_time, current, past), int(mo), int(d))
            return dt.datetime.combine(day, at_time).timestamp()
    except ValueError as exc:  # out-of-range parts: month 13, 25:00...
        raise BeginError(f"--begin={text}: {exc}") from None
    raise BeginError(f"--begin={text}: expected now+N[seconds|minutes|hours|days|weeks], "
                     "HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]], today, "
                     "tomorrow, midnight, noon, fika or teatime")
