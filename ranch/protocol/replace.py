"""attrs.evolve for the frozen slotted classes of hot paths: a straight-line copy, one per class.

Written here because attrs.evolve reads every field with getattr into a dict and calls __init__
with it: 10 µs for a SubmitJob of 59 fields, paid twice for every job submitted (its request
stripped of the environment, then of the script once a pack holds it; docs/benchmarks.md,
issue 50). The copy made here sets each slot once from generated code. It serves only classes
whose __init__ does nothing but set its fields (no validator, converter, alias, field left out of
__init__, extra slot or __attrs_post_init__); any other goes through attrs.evolve itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

T = TypeVar("T")
Copier = Callable[[Any, dict[str, Any]], Any]

_COPIERS: dict[type, Copier] = {}


def replace(inst: T, /, **changes: Any) -> T:
    """A copy of attrs instance `inst` with `changes` (attrs.evolve's result, and its
    TypeError for a name the class does not have)."""
    cls = type(inst)
    copier = _COPIERS.get(cls)
    if copier is None:
        copier = _COPIERS[cls] = _copier(cls)
    return copier(inst, changes)


def _evolve(inst: Any, changes: dict[str, Any]) -> Any:
    return attrs.evolve(inst, **changes)


def plain(cls: type) -> bool:
    """Whether `cls` is slotted and its __init__ only sets each field from its own argument."""
    fields = attrs.fields(cls)
    slots = set(cls.__dict__.get("__slots__", ("__dict__",))) - {"__weakref__"}
    return (slots == {f.name for f in fields}
            and not hasattr(cls, "__attrs_post_init__")
            and all(f.init and f.validator is None and f.converter is None
                    and f.alias == f.name and f.on_setattr in (None, attrs.setters.NO_OP)
                    for f in fields))


def _copier(cls: type) -> Copier:
    if not plain(cls):
        return _evolve
    names = [f.name for f in attrs.fields(cls)]
    lines = ["def copy(inst, changes):", "    new = _new(_cls)"]
    lines += [f"    _set(new, {name!r}, inst.{name})" for name in names]
    lines += ["    for name, value in changes.items():",
              "        if name not in _names:",
              "            raise TypeError(f'{_cls.__name__}.__init__() got an unexpected keyword "
              "argument {name!r}')",
              "        _set(new, name, value)",
              "    return new"]
    scope: dict[str, Any] = {"_new": object.__new__, "_set": object.__setattr__, "_cls": cls,
                             "_names": frozenset(names)}
    exec(compile("\n".join(lines), f"<replace {cls.__qualname__}>", "exec"), scope)
    copy: Copier = scope["copy"]
    return copy
