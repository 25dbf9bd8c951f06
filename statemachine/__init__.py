"""Ranch's node state machine: base state + flags, events, effects, one transition table."""

from statemachine import effects, events, names
from statemachine.errors import InvalidTransition
from statemachine.model import (
    Base,
    Flag,
    NodeState,
    Reason,
    ReasonSource,
    derive_base,
    initial_state,
)
from statemachine.policy import DEFAULT_POLICY, Policy
from statemachine.table import TABLE, apply, classify

__all__ = [
    "DEFAULT_POLICY",
    "TABLE",
    "Base",
    "Flag",
    "InvalidTransition",
    "NodeState",
    "Policy",
    "Reason",
    "ReasonSource",
    "apply",
    "classify",
    "derive_base",
    "effects",
    "events",
    "initial_state",
    "names",
]
