"""rcontrol events rendering, --since parsing, the drain history fold, approve/reject/delete
argument checks (pure: no controller)."""

from __future__ import annotations

import time

import pytest

from ranch.cli.controller import CliError
from ranch.cli.events_view import (
    drain_history,
    drains_text,
    event_line,
    parse_membership,
    parse_since,
)

NOW = 1_800_000_000.0


def _state(t: float, node: str, old: str, new: str, user: str | None, reason: str | None,
           cause: str = "admin:x") -> dict:
    return {"seq": int(t), "time": t, "kind": "state", "node": node, "old": old, "new": new,
            "cause": cause, "user": user, "reason": reason}


def test_parse_since_accepts_ages_dates_and_epochs() -> None:
    assert parse_since("2h", NOW) == NOW - 7200
    assert parse_since("now-30min", NOW) == NOW - 1800
    assert parse_since("1day", NOW) == NOW - 86400
    assert parse_since("1700000000", NOW) == 1_700_000_000.0
    assert parse_since("2026-01-31T08:00", NOW) == time.mktime(
        time.strptime("2026-01-31T08:00", "%Y-%m-%dT%H:%M"))
    with pytest.raises(CliError, match="--since 'yesterday'"):
        parse_since("yesterday", NOW)


def test_event_lines_are_key_value() -> None:
    line = event_line(_state(NOW, "n1", "IDLE", "IDLE+DRAIN", "alice", "bad fan"))
    assert "Node=n1 Event=state State=IDLE->IDLE+DRAIN Cause=admin:x User=alice" in line
    assert line.endswith('Reason="bad fan"')
    joined = event_line({"time": NOW, "kind": "joined", "node": "d1", "partitions": ["a", "b"]})
    assert joined.endswith("Event=joined Partitions=a,b")


def test_drain_history_pairs_drains_with_their_resume_note() -> None:
    events = [
        _state(NOW, "n1", "IDLE", "IDLE+DRAIN", "alice", "bad fan"),
        _state(NOW + 1, "n2", "MIXED", "MIXED+DRAIN", None, "HC: disk", cause="healthcheck"),
        {"time": NOW + 2, "kind": "approved", "node": "n3"},
        _state(NOW + 3, "n1", "IDLE+DRAIN", "IDLE", "bob", "fan replaced"),
        _state(NOW + 4, "n1", "IDLE", "IDLE+DRAIN", "carol", "again"),
    ]
    h = drain_history(events)
    assert [(x["node"], x["drained_by"], x["reason"], x["resumed_by"], x["note"]) for x in h] == [
        ("n1", "alice", "bad fan", "bob", "fan replaced"),
        ("n2", None, "HC: disk", None, None),
        ("n1", "carol", "again", None, None),
    ]
    text = drains_text(h)
    assert text.splitlines()[0].split() == ["NODELIST", "DRAINED", "BY", "REASON", "RESUMED",
                                            "BY", "NOTE"]
    assert "healthcheck" in text and "fan replaced" in text


def test_membership_arguments_are_checked() -> None:
    assert parse_membership("approve", ["NodeName=n[1-3]"]) == ("n[1-3]", None)
    with pytest.raises(CliError, match="Reason"):
        parse_membership("reject", ["NodeName=n1"])
    with pytest.raises(CliError, match="NodeName=HOSTLIST is required"):
        parse_membership("delete", [])
    with pytest.raises(CliError, match="'State' is not supported"):
        parse_membership("delete", ["NodeName=n1", "State=DOWN"])
    with pytest.raises(CliError, match="NodeName=n\\[1-"):
        parse_membership("approve", ["NodeName=n[1-"])
