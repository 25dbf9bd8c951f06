"""rbatch --begin: sbatch's time forms, read against a fixed "now" in UTC (conftest)."""

from __future__ import annotations

import datetime as dt

import pytest

from ranch.cli.begin_time import BeginError, parse_begin

NOW = dt.datetime(2026, 11, 22, 14, 30, 0, tzinfo=dt.UTC).timestamp()  # a Sunday, 14:30


def at(*parts: int) -> float:
    return dt.datetime(*parts, tzinfo=dt.UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", NOW),
        ("now+60", NOW + 60),
        ("now+1hour", NOW + 3600),
        ("now+90minutes", NOW + 5400),
        ("NOW+2days", NOW + 2 * 86400),
        ("now+1week", NOW + 7 * 86400),
        ("16:00", at(2026, 11, 22, 16, 0)),
        ("14:00", at(2026, 11, 23, 14, 0)),  # passed today: tomorrow's
        ("16:00:30", at(2026, 11, 22, 16, 0, 30)),
        ("4:00pm", at(2026, 11, 22, 16, 0)),
        ("2026-11-23T16:00:00", at(2026, 11, 23, 16, 0)),
        ("2026-11-23T16:00", at(2026, 11, 23, 16, 0)),
        ("2026-12-01", at(2026, 12, 1)),
        ("12/24", at(2026, 12, 24)),
        ("12/24/27-08:15", at(2027, 12, 24, 8, 15)),
        ("122427", at(2027, 12, 24)),
        ("today", at(2026, 11, 22)),
        ("tomorrow", at(2026, 11, 23)),
        ("midnight", at(2026, 11, 23)),
        ("noon", at(2026, 11, 23, 12, 0)),
        ("teatime", at(2026, 11, 22, 16, 0)),
        ("fika", at(2026, 11, 22, 15, 0)),
    ],
)
def test_begin_forms(text: str, expected: float) -> None:
    assert parse_begin(text, NOW) == expected


@pytest.mark.parametrize("text", ["later", "now+5fortnights", "25:00", "2026-13-01",
                                  "13:00pm", ""])
def test_bad_begin_names_the_option(text: str) -> None:
    with pytest.raises(BeginError, match="--begin="):
        parse_begin(text, NOW)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("01/15", at(2027, 1, 15)),  # passed this year: next year's, as sbatch --begin reads it
        ("11/22", at(2027, 11, 22)),  # today at 00:00, already past
        ("11/22-15:00", at(2026, 11, 22, 15, 0)),  # today, still to come
        ("0115", at(2027, 1, 15)),
        ("14:30:45", at(2026, 11, 23, 14, 30, 45)),  # this minute: parse_time.c counts it passed
    ],
)
def test_begin_reads_a_missing_day_or_year_as_the_next_to_come(text: str,
                                                                 expected: float) -> None:
    assert parse_begin(text, NOW) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("fika", at(2026, 11, 22, 15, 0)),  # today's, though not come yet (was: tomorrow's)
        ("teatime", at(2026, 11, 22, 16, 0)),
        ("14:00", at(2026, 11, 22, 14, 0)),
        ("midnight", at(2026, 11, 22)),
        ("noon", at(2026, 11, 22, 12, 0)),
        ("12/24", at(2025, 12, 24)),  # its month still to come: last year's
        ("11/30", at(2026, 11, 30)),  # this month: this year's, as parse_time.c reads it
        ("01/15", at(2026, 1, 15)),
        ("2026-11-23", at(2026, 11, 23)),
        ("now-1hour", NOW - 3600),
    ],
)
def test_sacct_looks_back(text: str, expected: float) -> None:
    """sacct passes parse_time's `past` flag: a time of day is today's, a date's year the one
    whose month has come."""
    assert parse_begin(text, NOW, past=True) == expected


def test_racct_reads_its_times_looking_back() -> None:
    from ranch.cli.controller import CliError
    from ranch.cli.racct import parse_time

    assert parse_time("fika", NOW, "-S") == at(2026, 11, 22, 15, 0)
    assert parse_time("12/24", NOW, "-S") == at(2025, 12, 24)
    with pytest.raises(CliError, match=r"Invalid time specification \(pos=0\): 25:00"):
        parse_time("25:00", NOW, "-S")
    with pytest.raises(CliError, match="-S later: invalid time"):
        parse_time("later", NOW, "-S")
