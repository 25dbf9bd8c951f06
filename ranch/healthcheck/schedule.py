"""When a node runs its periodic health check: HealthCheckNodeState against the node's complete
state string from the controller, and a stable per-node offset for CYCLE. Pure."""

from __future__ import annotations

import hashlib

NODE_STATE_VALUES = (
    "ANY", "IDLE", "ALLOC", "MIXED", "NONDRAINED_IDLE", "CYCLE", "START_ONLY", "REBOOT_ONLY",
)
STATE_VALUES = frozenset({"ANY", "IDLE", "ALLOC", "MIXED", "NONDRAINED_IDLE"})
EXCLUSIVE_VALUES = frozenset({"START_ONLY", "REBOOT_ONLY"})  # never periodic

# A node in any of these is off, on its way on or off, or not a real member yet.
NEVER_ELIGIBLE = frozenset({
    "POWERED_DOWN", "POWERING_UP", "POWERING_DOWN", "FUTURE", "DYNAMIC_FUTURE", "INVALID_REG",
    "REBOOT_ISSUED", "EXTERNAL",
})
UNHEALTHY = frozenset({"DOWN", "DRAIN", "FAIL", "MAINT", "MAINTENANCE"})
_BASE_ALIASES = {"ALLOCATED": "ALLOC", "MIX": "MIXED"}


def validate_node_state(setting: tuple[str, ...]) -> tuple[str, ...]:
    """Upper-cased values, or ValueError naming the bad one (for conf to call)."""
    values = tuple(v.strip().upper() for v in setting if v.strip())
    for value in values:
        if value not in NODE_STATE_VALUES:
            raise ValueError(
                f"HealthCheckNodeState: unknown value {value!r} "
                f"(valid: {', '.join(NODE_STATE_VALUES)})"
            )
    if any(v in EXCLUSIVE_VALUES for v in values) and len(values) > 1:
        raise ValueError("HealthCheckNodeState: START_ONLY and REBOOT_ONLY must stand alone")
    return values


def runs_periodically(node_state_setting: tuple[str, ...]) -> bool:
    return not any(v.strip().upper() in EXCLUSIVE_VALUES for v in node_state_setting)


def uses_cycle(node_state_setting: tuple[str, ...]) -> bool:
    return any(v.strip().upper() == "CYCLE" for v in node_state_setting)


def eligible(node_state_complete: str, node_state_setting: tuple[str, ...]) -> bool:
    """Whether a periodic run is due on a node in this state. Values combine by OR; CYCLE only
    spreads the runs (alone it means ANY); START_ONLY/REBOOT_ONLY never run periodically.
    NOT_RESPONDING is ignored: the node asking is alive. Unknown values match nothing."""
    settings = {v.strip().upper() for v in node_state_setting if v.strip()}
    if settings & EXCLUSIVE_VALUES:
        return False
    parts = _parts(node_state_complete)
    if not parts or parts & NEVER_ELIGIBLE:
        return False
    base = _BASE_ALIASES.get(_base(node_state_complete), _base(node_state_complete))
    wanted = settings & STATE_VALUES
    if not wanted:
        if settings - {"CYCLE"}:
            return False  # only unknown values
        wanted = {"ANY"}
    if "ANY" in wanted:
        return True
    if "IDLE" in wanted and base == "IDLE":
        return True
    if "ALLOC" in wanted and base == "ALLOC":
        return True
    if "MIXED" in wanted and base == "MIXED":
        return True
    return "NONDRAINED_IDLE" in wanted and base == "IDLE" and "DRAIN" not in parts


def is_healthy(node_state_complete: str) -> bool:
    """The controller's view for RANCH_NODE_IS_HEALTHY: no when down, drained, failed or in
    maintenance."""
    return not (_parts(node_state_complete) & UNHEALTHY)


def cycle_delay(node_name: str, interval: float) -> float:
    """A stable offset in [0, interval) from the node name, so CYCLE spreads nodes evenly and a
    restarted rnoded keeps its slot."""
    if interval <= 0:
        return 0.0
    digest = hashlib.sha256(node_name.encode("utf-8")).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2.0**64
    return min(fraction * interval, interval * (1 - 1e-12))


def _parts(complete: str) -> frozenset[str]:
    # Display suffixes (idle*, down~) may come from older writers; they carry no extra flag here.
    return frozenset(_word(p) for p in complete.split("+") if p.strip())


def _base(complete: str) -> str:
    return _word(complete.split("+", 1)[0])


def _word(part: str) -> str:
    return part.strip().upper().rstrip("*~#%!$@^-")
