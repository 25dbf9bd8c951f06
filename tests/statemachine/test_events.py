"""parse_admin_state: Slurm's case-insensitive State= abbreviations; event validation."""

from __future__ import annotations

import pytest

from ranch.statemachine import events as ev


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("drain", "DRAIN"), ("DRA", "DRAIN"), ("noresp", "NORESP"), ("NoResp", "NORESP"),
        ("res", "RESUME"), ("Resume", "RESUME"), ("und", "UNDRAIN"), ("fut", "FUTURE"),
        ("down", "DOWN"), ("idl", "IDLE"), ("fail", "FAIL"),
        ("power_d", "POWER_DOWN"), ("POWER_DOWN", "POWER_DOWN"), ("power_u", "POWER_UP"),
        ("power_down_a", "POWER_DOWN_ASAP"), ("power_down_force", "POWER_DOWN_FORCE"),
    ],
)
def test_parse_admin_state(text: str, word: str) -> None:
    assert ev.parse_admin_state(text) == word


@pytest.mark.parametrize("text", ["dr", "pow", "power_", "power_down_", "alloc", "", "drainx"])
def test_parse_admin_state_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="Valid states are: NoResp DRAIN FAIL FUTURE RESUME "
                       "POWER_DOWN"):
        ev.parse_admin_state(text)


def test_events_validate_their_words() -> None:
    with pytest.raises(ValueError):
        ev.AdminUpdate(1.0, "drain")
    with pytest.raises(ValueError):
        ev.HealthResult(1.0, "bad")
    assert ev.AdminUpdate(1.0, "DRAIN").kind == "State=DRAIN"
    assert ev.Registered(1.0, valid=False).kind == "register invalid"
