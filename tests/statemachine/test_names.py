"""sinfo names (compact, long, complete, suffix priority), JSON, and rinfo -t filters."""

from __future__ import annotations

import pytest

from ranch.statemachine import names
from ranch.statemachine.model import Base, Flag, NodeState, Reason, ReasonSource

F = Flag
R = Reason(ReasonSource.ADMIN, "maint", 5.0, "alice")


def st(base: Base, *flags: Flag, alloc: int = 0) -> NodeState:
    return NodeState("n1", base, frozenset(flags), R, 8, alloc)


@pytest.mark.parametrize(
    ("state", "compact", "long", "complete"),
    [
        (st(Base.IDLE), "idle", "idle", "IDLE"),
        (st(Base.ALLOCATED, alloc=8), "alloc", "allocated", "ALLOCATED"),
        (st(Base.MIXED, alloc=2), "mix", "mixed", "MIXED"),
        (st(Base.DOWN), "down", "down", "DOWN"),
        (st(Base.FUTURE), "futr", "future", "FUTURE"),
        (st(Base.UNKNOWN), "unk", "unknown", "UNKNOWN"),
        (st(Base.IDLE, F.DRAIN), "drain", "drained", "IDLE+DRAIN"),
        (st(Base.MIXED, F.DRAIN, alloc=2), "drng", "draining", "MIXED+DRAIN"),
        (st(Base.IDLE, F.DRAIN, F.COMPLETING), "drng", "draining", "IDLE+COMPLETING+DRAIN"),
        (st(Base.DOWN, F.DRAIN, F.NO_RESPOND), "drain*", "drained*",
         "DOWN+DRAIN+NOT_RESPONDING"),
        (st(Base.IDLE, F.FAIL), "fail", "fail", "IDLE+FAIL"),
        (st(Base.ALLOCATED, F.FAIL, alloc=8), "failg", "failing", "ALLOCATED+FAIL"),
        (st(Base.IDLE, F.FAIL, F.POWERED_DOWN), "fail", "fail", "IDLE+FAIL+POWERED_DOWN"),
        (st(Base.IDLE, F.FAIL, F.NO_RESPOND, F.POWER_DOWN), "fail*", "fail*",
         "IDLE+FAIL+POWER_DOWN+NOT_RESPONDING"),
        (st(Base.IDLE, F.INVALID_REG, F.DRAIN), "inval", "inval", "IDLE+DRAIN+INVALID_REG"),
        (st(Base.IDLE, F.CLOUD, F.POWERED_DOWN), "idle~", "idle~", "IDLE+CLOUD+POWERED_DOWN"),
        (st(Base.DOWN, F.CLOUD, F.POWERED_DOWN, F.NO_RESPOND), "down~", "down~",
         "DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING"),
        (st(Base.IDLE, F.POWERING_UP, F.NO_RESPOND), "idle#", "idle#",
         "IDLE+NOT_RESPONDING+POWERING_UP"),
        (st(Base.IDLE, F.POWERING_DOWN, F.POWER_DOWN), "idle%", "idle%",
         "IDLE+POWER_DOWN+POWERING_DOWN"),
        (st(Base.MIXED, F.POWER_DOWN, F.NO_RESPOND, alloc=1), "mix!", "mixed!",
         "MIXED+POWER_DOWN+NOT_RESPONDING"),
        (st(Base.IDLE, F.NO_RESPOND), "idle*", "idle*", "IDLE+NOT_RESPONDING"),
        (st(Base.ALLOCATED, F.COMPLETING, alloc=8), "alloc+", "allocated+",
         "ALLOCATED+COMPLETING"),
        (st(Base.IDLE, F.COMPLETING), "comp", "completing", "IDLE+COMPLETING"),
    ],
)
def test_names(state: NodeState, compact: str, long: str, complete: str) -> None:
    assert names.compact(state) == compact
    assert names.long(state) == long
    assert names.complete(state) == complete
    assert names.state_array(state) == complete.split("+")


def test_suffix_priority_over_every_pair() -> None:
    order = [F.POWERING_UP, F.POWERING_DOWN, F.POWERED_DOWN, F.POWER_DOWN, F.NO_RESPOND]
    marks = "#%~!*"
    for i, hi in enumerate(order):
        for lo in order[i + 1:]:
            assert names.suffix(st(Base.IDLE, hi, lo)) == marks[i]


def test_json_round_trip_and_shape() -> None:
    s = st(Base.DOWN, F.DRAIN, F.NO_RESPOND)
    d = names.to_json(s)
    assert d == {
        "base": "DOWN",
        "flags": ["DRAIN", "NO_RESPOND"],
        "reason": {"source": "admin", "text": "maint", "time": 5.0, "user": "alice"},
    }
    assert names.from_json(d, name="n1", cpus_total=8) == s
    assert names.from_json(names.to_json(s, full=True)) == s
    alias = names.from_json({"base": "IDLE", "flags": ["NOT_RESPONDING"], "reason": None})
    assert alias.flags == {F.NO_RESPOND}
    with pytest.raises(ValueError, match="unknown flag"):
        names.from_json({"base": "IDLE", "flags": ["BOGUS"]})
    with pytest.raises(ValueError, match="bad base"):
        names.from_json({"base": "ERROR", "flags": []})


def test_filter_drain_covers_drained_and_draining() -> None:
    drained, draining = st(Base.IDLE, F.DRAIN), st(Base.MIXED, F.DRAIN, alloc=2)
    plain = st(Base.IDLE)
    assert names.parse_filter("drain").matches(drained)
    assert names.parse_filter("DRAIN").matches(draining)
    assert not names.parse_filter("drain").matches(plain)
    assert names.parse_filter("drained").matches(drained)
    assert not names.parse_filter("drained").matches(draining)
    assert names.parse_filter("draining").matches(draining)
    assert not names.parse_filter("draining").matches(drained)


def test_filter_bases_flags_lists_suffixes_and_negation() -> None:
    cloud_off = st(Base.IDLE, F.CLOUD, F.POWERED_DOWN)
    down_star = st(Base.DOWN, F.NO_RESPOND)
    mixed = st(Base.MIXED, alloc=2)
    assert names.parse_filter("idle").matches(cloud_off)
    assert names.parse_filter("mix").matches(mixed) and names.parse_filter("mixed").matches(mixed)
    assert names.parse_filter("powered_down").matches(cloud_off)
    assert names.parse_filter("cloud").matches(cloud_off)
    assert names.parse_filter("not_responding").matches(down_star)
    assert names.parse_filter("idle,down").matches(down_star)
    assert not names.parse_filter("idle,alloc").matches(down_star)
    assert names.parse_filter("idle~").matches(cloud_off)
    assert not names.parse_filter("idle~").matches(st(Base.IDLE))
    assert names.parse_filter("down*").matches(down_star)
    assert not names.parse_filter("~down").matches(down_star)
    assert names.parse_filter("~down").matches(mixed)
    assert names.parse_filter("futr").matches(st(Base.FUTURE))
    assert names.parse_filter("unk").matches(st(Base.UNKNOWN))
    with pytest.raises(ValueError, match="invalid node state 'bogus'"):
        names.parse_filter("idle,bogus")
