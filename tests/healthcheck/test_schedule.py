"""HealthCheckNodeState eligibility, CYCLE offsets and the is-healthy view."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.healthcheck.schedule import (
    cycle_delay,
    eligible,
    is_healthy,
    runs_periodically,
    uses_cycle,
    validate_node_state,
)

STATES = [
    "IDLE", "IDLE+DRAIN", "ALLOCATED", "MIXED", "MIXED+DRAIN", "DOWN", "IDLE+FAIL",
    "ALLOCATED+COMPLETING", "IDLE+NOT_RESPONDING",
]
# setting -> the STATES above it selects, in order
EXPECTED = {
    ("ANY",): [True, True, True, True, True, True, True, True, True],
    ("IDLE",): [True, True, False, False, False, False, True, False, True],
    ("ALLOC",): [False, False, True, False, False, False, False, True, False],
    ("MIXED",): [False, False, False, True, True, False, False, False, False],
    ("NONDRAINED_IDLE",): [True, False, False, False, False, False, True, False, True],
    ("CYCLE",): [True] * 9,
    ("IDLE", "CYCLE"): [True, True, False, False, False, False, True, False, True],
    ("ALLOC", "MIXED"): [False, False, True, True, True, False, False, True, False],
    ("START_ONLY",): [False] * 9,
    ("REBOOT_ONLY",): [False] * 9,
    (): [True] * 9,
}


@pytest.mark.parametrize("setting", list(EXPECTED))
def test_eligible_table(setting: tuple[str, ...]) -> None:
    got = [eligible(state, setting) for state in STATES]
    assert got == EXPECTED[setting], list(zip(STATES, got, strict=True))


@pytest.mark.parametrize(
    "state",
    [
        "IDLE+CLOUD+POWERED_DOWN", "IDLE+POWERING_UP", "ALLOCATED+POWERING_DOWN", "FUTURE",
        "IDLE+INVALID_REG", "DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING", "IDLE+REBOOT_ISSUED",
    ],
)
@pytest.mark.parametrize("setting", [("ANY",), ("IDLE",), ("CYCLE",), ("NONDRAINED_IDLE",)])
def test_never_eligible(state: str, setting: tuple[str, ...]) -> None:
    assert not eligible(state, setting)


def test_case_and_aliases() -> None:
    assert eligible("idle+drain", ("idle",))
    assert eligible("ALLOC", ("ALLOC",))
    assert eligible("mixed", ("Mixed", "Cycle"))
    assert not eligible("", ("ANY",))
    assert not eligible("IDLE", ("BOGUS",))  # unknown values match nothing


def test_validate_node_state() -> None:
    assert validate_node_state(("any", "cycle")) == ("ANY", "CYCLE")
    with pytest.raises(ValueError, match="BOGUS"):
        validate_node_state(("IDLE", "bogus"))
    with pytest.raises(ValueError, match="START_ONLY"):
        validate_node_state(("START_ONLY", "IDLE"))


def test_periodic_and_cycle_helpers() -> None:
    assert runs_periodically(("ANY",)) and not runs_periodically(("START_ONLY",))
    assert uses_cycle(("IDLE", "CYCLE")) and not uses_cycle(("IDLE",))


@pytest.mark.parametrize(
    ("state", "healthy"),
    [
        ("IDLE", True), ("MIXED", True), ("IDLE+NOT_RESPONDING", True), ("IDLE+DRAIN", False),
        ("MIXED+DRAIN", False), ("DOWN", False), ("IDLE+FAIL", False), ("IDLE+MAINT", False),
        ("DOWN+NOT_RESPONDING", False),
    ],
)
def test_is_healthy(state: str, healthy: bool) -> None:
    assert is_healthy(state) is healthy


@settings(max_examples=50, deadline=None)
@given(name=st.text(min_size=1, max_size=30), interval=st.floats(0.001, 1e6))
def test_cycle_delay_in_range_and_stable(name: str, interval: float) -> None:
    delay = cycle_delay(name, interval)
    assert 0 <= delay < interval
    assert delay == cycle_delay(name, interval)


def test_cycle_delay_spreads_nodes() -> None:
    delays = [cycle_delay(f"node{i:03d}", 100.0) for i in range(200)]
    buckets = [sum(1 for d in delays if b * 10 <= d < (b + 1) * 10) for b in range(10)]
    assert all(count > 0 for count in buckets), buckets
    assert cycle_delay("n1", 0) == 0.0
