"""Ranch's node state machine: base state + flags, events, effects, one transition table.

Names load on first use (module __getattr__), so that `import statemachine.names` does not pay
for the transition table.
"""

from __future__ import annotations

import sys

_MODULES = ("effects", "events", "names")
_WHERE = {
    "InvalidTransition": "statemachine.errors",
    "Base": "statemachine.model",
    "Flag": "statemachine.model",
    "NodeState": "statemachine.model",
    "Reason": "statemachine.model",
    "ReasonSource": "statemachine.model",
    "derive_base": "statemachine.model",
    "initial_state": "statemachine.model",
    "DEFAULT_POLICY": "statemachine.policy",
    "Policy": "statemachine.policy",
    "TABLE": "statemachine.table",
    "apply": "statemachine.table",
    "classify": "statemachine.table",
}

__all__ = sorted((*_WHERE, *_MODULES))


def __getattr__(name: str) -> object:
    if name in _MODULES:
        value = _module(f"statemachine.{name}")
    elif name in _WHERE:
        value = getattr(_module(_WHERE[name]), name)
    else:
        raise AttributeError(f"module 'statemachine' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE, *_MODULES})


def _module(name: str):  # -> ModuleType
    """importlib.import_module without importing importlib (a command's start pays for it)."""
    __import__(name)
    return sys.modules[name]
