"""Straight-line structure hooks for the messages every node sends every few seconds.

cattrs' generated hook calls a checking function per field; a heartbeat of a node with eight
GPUs has 60 scalar fields, and those calls were most of its 18 us decode (docs/benchmarks.md,
issue 50). The hook made here checks each scalar field's type inline, in one expression, and
builds the instance; a list field's items go through their own hook in one comprehension (an
empty one costs nothing), where cattrs' loop took three calls around them. Anything it does not
take at once (a missing key, an int where a float goes, a nested value that fails) goes to
cattrs' own hook, so what is accepted and every error (with its field path) stay exactly
cattrs'. The code is generated, as cattrs generates its own,
because a loop over the fields costs what the calls did.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

import attrs

Hook = Callable[[Any, Any], Any]

# a scalar's check, inline; `v - v == 0.0` is False for nan and for both infinities
_CHECKS: dict[Any, str] = {
    int: "type({v}) is int",
    bool: "type({v}) is bool",
    str: "type({v}) is str",
    float: "(type({v}) is float and {v} - {v} == 0.0)",
}


def _check(tp: Any, v: str) -> str | None:
    """The inline check of one field's type, or None when the field takes a nested hook."""
    if tp in _CHECKS:
        return _CHECKS[tp].format(v=v)
    args = typing.get_args(tp)
    if (typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 2
            and type(None) in args):
        inner = args[0] if args[1] is type(None) else args[1]
        if inner in _CHECKS:
            return f"({v} is None or {_CHECKS[inner].format(v=v)})"
    return None


def _items_of(tp: Any) -> Any:
    """The item type of `tp` when it is tuple[item, ...] (a JSON list), else None."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return None


def fast_structure_hook(cls: type, hook_of: Callable[[Any], Hook], slow: Hook) -> Hook:
    """A structure hook for the attrs class `cls` taking what cattrs' `slow` hook takes, the
    same way; `hook_of(type)` gives the converter's hook for a field that is not a scalar."""
    fields = attrs.fields(cls)
    if not all(f.init for f in fields):
        return slow
    hints = typing.get_type_hints(cls)
    names = [f"v{i}" for i in range(len(fields))]
    env: dict[str, Any] = {"cls": cls, "slow": slow}
    loads = [f"        {n} = o[{f.name!r}]" for n, f in zip(names, fields, strict=True)]
    checks, nested, args = [], [], []
    for i, (n, f) in enumerate(zip(names, fields, strict=True)):
        tp = hints[f.name]
        check = _check(tp, n)
        if check is not None:
            checks.append(check)
            args.append(n)
            continue
        env[f"h{i}"], env[f"t{i}"] = hook_of(tp), tp
        item = _items_of(tp)
        if item is None:
            nested.append(f"        x{i} = h{i}({n}, t{i})")
        else:  # a list's items each through their own hook, without cattrs' loop around them
            env[f"e{i}"], env[f"u{i}"] = hook_of(item), item
            nested.append(f"        x{i} = ((tuple([e{i}(e, u{i}) for e in {n}]) if {n} else ())"
                          f" if type({n}) is list else h{i}({n}, t{i}))")
        args.append(f"x{i}")
    lines = [
        "def structure(o, _):",
        "    if type(o) is not dict:",
        "        return slow(o, _)",
        "    try:",
        *loads,
        "    except KeyError:",  # a field left out: its default, or cattrs' error, is slow's
        "        return slow(o, _)",
        f"    if not ({' and '.join(checks) or 'True'}):",
        "        return slow(o, _)",
    ]
    if nested:  # a nested flaw is raised again by slow, with the whole field path
        lines += ["    try:", *nested, "    except Exception:", "        return slow(o, _)"]
    # by position where attrs' __init__ takes every field so (a keyword costs ~0.3 us of the
    # 1 us a GpuMetrics takes, eight of them a beat)
    given = list(zip(fields, args, strict=True))
    pairs = [a for f, a in given if not f.kw_only] + [f"{f.alias}={a}" for f, a in given
                                                      if f.kw_only]
    lines.append(f"    return cls({', '.join(pairs)})")
    code = "\n".join(lines)
    exec(compile(code, f"<fast structure {cls.__name__}>", "exec"), env)
    hook: Hook = env["structure"]
    return hook


def flat_structure_hook(item: type, build: Callable[[tuple[Any, ...]], Any], slow: Hook) -> Hook:
    """A structure hook for a JSON list of `item` objects (an attrs class of scalar fields) that
    gives `build(flat)`, flat being each item's fields in order, one item after the other, with
    no `item` built; a list it does not take at once goes to `slow`, for its result and errors."""
    fields = attrs.fields(item)
    hints = typing.get_type_hints(item)
    names = [f"v{i}" for i in range(len(fields))]
    checks = [_check(hints[f.name], n) for n, f in zip(names, fields, strict=True)]
    if not all(f.init for f in fields) or None in checks:
        raise TypeError(f"{item.__name__} has a field that is not a plain scalar")
    lines = [
        "def structure(o, _):",
        "    if type(o) is list:",
        "        flat = []",
        "        for g in o:",
        "            if type(g) is not dict:",
        "                break",
        "            try:",
        *(f"                {n} = g[{f.name!r}]" for n, f in zip(names, fields, strict=True)),
        "            except KeyError:",
        "                break",
        f"            if not ({' and '.join(c for c in checks if c)}):",
        "                break",
        f"            flat += ({', '.join(names)},)",
        "        else:",
        "            return build(tuple(flat))",
        "    return slow(o, _)",
    ]
    env: dict[str, Any] = {"build": build, "slow": slow}
    exec(compile("\n".join(lines), f"<flat structure {item.__name__}>", "exec"), env)
    hook: Hook = env["structure"]
    return hook
