"""Slurm 22.05's words for reboots and maintenance windows (the conformance suite saw them),
and the bookkeeping flags that no listing shows."""

from __future__ import annotations

import pytest

from ranch.statemachine import names
from ranch.statemachine.model import Base, Flag, NodeState

F = Flag


def node(base: Base, *flags: Flag, alloc: int = 0) -> NodeState:
    return NodeState("n1", base, frozenset(flags), None, 2, alloc)


@pytest.mark.parametrize(("state", "compact", "long", "complete"), [
    (node(Base.MIXED, F.DRAIN, F.REBOOT_REQUESTED, F.NEXT_RESUME, F.REBOOT_DRAIN, alloc=1),
     "drng@", "draining@", "MIXED+DRAIN+REBOOT_REQUESTED"),
    (node(Base.IDLE, F.DRAIN, F.REBOOT_REQUESTED, F.NEXT_RESUME), "boot", "reboot",
     "IDLE+DRAIN+REBOOT_REQUESTED"),
    (node(Base.DOWN, F.DRAIN, F.REBOOT_ISSUED), "boot^", "reboot^", "DOWN+DRAIN+REBOOT_ISSUED"),
    (node(Base.ALLOCATED, F.REBOOT_REQUESTED, alloc=2), "alloc@", "allocated@",
     "ALLOCATED+REBOOT_REQUESTED"),
    (node(Base.IDLE, F.REBOOT_REQUESTED, F.NO_RESPOND), "boot*", "reboot*",
     "IDLE+REBOOT_REQUESTED+NOT_RESPONDING"),
    (node(Base.IDLE, F.MAINT, F.RESERVED), "maint", "maint", "IDLE+MAINTENANCE+RESERVED"),
    (node(Base.MIXED, F.MAINT, F.RESERVED, alloc=1), "mix$", "mixed$",
     "MIXED+MAINTENANCE+RESERVED"),
    (node(Base.IDLE, F.DRAIN, F.MAINT), "drain$", "drained$", "IDLE+DRAIN+MAINTENANCE"),
    (node(Base.IDLE, F.RESERVED), "resv", "reserved", "IDLE+RESERVED"),
    (node(Base.IDLE, F.DRAIN, F.BOOT_CHECK, F.REBOOT_DRAIN), "drain", "drained", "IDLE+DRAIN"),
])
def test_words(state: NodeState, compact: str, long: str, complete: str) -> None:
    assert (names.compact(state), names.long(state), names.complete(state)) == (
        compact, long, complete)


def test_hidden_flags_are_saved_but_never_listed() -> None:
    s = node(Base.IDLE, F.DRAIN, F.REBOOT_REQUESTED, F.NEXT_DOWN, F.REBOOT_DRAIN, F.BOOT_CHECK)
    assert names.state_array(s) == ["IDLE", "DRAIN", "REBOOT_REQUESTED"]
    assert names.to_json(s)["flags"] == ["DRAIN", "REBOOT_REQUESTED"]
    saved = names.to_json(s, hidden=True)
    assert saved["flags"] == ["DRAIN", "REBOOT_REQUESTED", "NEXT_DOWN", "REBOOT_DRAIN",
                              "BOOT_CHECK"]
    assert names.from_json(saved, name="n1", cpus_total=2) == s


def test_state_filters() -> None:
    rebooting = node(Base.DOWN, F.REBOOT_ISSUED)
    maint = node(Base.IDLE, F.MAINT, F.RESERVED)
    assert names.parse_filter("boot").matches(rebooting)
    assert names.parse_filter("maint").matches(maint)
    assert names.parse_filter("resv").matches(maint)
    assert not names.parse_filter("maint").matches(rebooting)
    with pytest.raises(ValueError):
        names.parse_filter("next_down")  # bookkeeping is no state word
