"""Slurm time forms and sinfo's TIMELIMIT rendering."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.conf.timefmt import format_limit, format_sinfo_limit, parse_minutes


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("30", 30),
        ("0", 0),
        ("5:00", 5),
        ("5:01", 6),  # seconds round up to a whole minute, as Slurm does
        ("01:00:00", 60),
        ("2:30:00", 150),
        ("1-0", 1440),
        ("2-12", 3600),
        ("1-02:30", 1590),
        ("1-00:00:00", 1440),
        ("7-00:00:01", 7 * 1440 + 1),
        ("UNLIMITED", None),
        ("infinite", None),
        ("-1", None),
        # Slurm's carries (time_str2secs has no upper bound on any field)
        ("0:600", 10),
        ("1:75:00", 135),
        ("0:90", 2),
        ("10:60", 11),
        ("1-", 1440),
        ("1-75", 1440 + 75 * 60),
        ("-5", -7199),  # sscanf reads the day as -5; C's division truncates toward zero
    ],
)
def test_parse_minutes_forms(text: str, minutes: int | None) -> None:
    assert parse_minutes(text) == minutes


@pytest.mark.parametrize("text", ["", "abc", "1:2:3:4", "1-2:3:4:5", "1.5", "1:", "::1", "1-2-3",
                                  "1-:5", " 5", "+5", "5m"])
def test_parse_minutes_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid time"):
        parse_minutes(text)


@pytest.mark.parametrize(
    ("minutes", "text"),
    [(None, "infinite"), (0, "00:00:00"), (30, "00:30:00"), (90, "01:30:00"),
     (1440, "1-00:00:00"), (1441, "1-00:01:00"), (10 * 1440 + 61, "10-01:01:00")],
)
def test_format_limit(minutes: int | None, text: str) -> None:
    assert format_limit(minutes) == text


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=400 * 1440))
def test_format_then_parse_round_trips(minutes: int) -> None:
    assert parse_minutes(format_limit(minutes)) == minutes


# What sinfo 22.05 prints for these MaxTime values (checked against real sinfo).
@pytest.mark.parametrize(
    ("minutes", "text"),
    [(5, "5:00"), (30, "30:00"), (59, "59:00"), (60, "1:00:00"), (90, "1:30:00"),
     (23 * 60 + 59, "23:59:00"), (1440, "1-00:00:00"), (2 * 1440, "2-00:00:00"),
     (None, "infinite"), (0, "0:00"), (1441, "1-00:01:00")],
)
def test_format_sinfo_limit(minutes: int | None, text: str) -> None:
    assert format_sinfo_limit(minutes) == text


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=400 * 1440))
def test_sinfo_format_then_parse_round_trips(minutes: int) -> None:
    assert parse_minutes(format_sinfo_limit(minutes)) == minutes
