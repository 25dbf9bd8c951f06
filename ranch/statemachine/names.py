"""Slurm's names for a node state (sinfo %t / %T, the complete string), JSON, and -t filters."""

from __future__ import annotations

from typing import Any

import attrs

from ranch.statemachine.model import (
    FLAG_ORDER,
    SHOWN_ORDER,
    Base,
    Flag,
    NodeState,
    Reason,
    ReasonSource,
)

_BUSY = frozenset({Base.ALLOCATED, Base.MIXED})
_REBOOTS = frozenset({Flag.REBOOT_REQUESTED, Flag.REBOOT_ISSUED})
_BUSY_OR_DOWN = _BUSY | {Base.DOWN}
_D = Flag.DRAIN

# One suffix at most; the first flag present wins (reference §1: $ ^ @ # % ~ ! *).
_SUFFIXES: tuple[tuple[Flag, str], ...] = (
    (Flag.MAINT, "$"),
    (Flag.REBOOT_ISSUED, "^"),
    (Flag.REBOOT_REQUESTED, "@"),
    (Flag.POWERING_UP, "#"),
    (Flag.POWERING_DOWN, "%"),
    (Flag.POWERED_DOWN, "~"),
    (Flag.POWER_DOWN, "!"),
    (Flag.NO_RESPOND, "*"),
)

# base -> (long, compact)
_BASE_NAMES = {
    Base.DOWN: ("DOWN", "DOWN"),
    Base.ALLOCATED: ("ALLOCATED", "ALLOC"),
    Base.IDLE: ("IDLE", "IDLE"),
    Base.MIXED: ("MIXED", "MIX"),
    Base.FUTURE: ("FUTURE", "FUTR"),
    Base.UNKNOWN: ("UNKNOWN", "UNK"),
}


def _words(state: NodeState) -> tuple[str, str, bool]:
    """(long, compact, only_star) in Slurm's decision order."""
    flags = state.flags
    completing = Flag.COMPLETING in flags
    if Flag.REJECTED in flags:  # membership (issue 13) names the node before its base
        return "REJECTED", "REJ", False
    if Flag.PENDING in flags:
        return "PENDING", "PEND", False
    if Flag.INVALID_REG in flags:
        return "INVAL", "INVAL", False
    if Flag.MAINT in flags and _D not in flags and state.base not in _BUSY_OR_DOWN:
        return "MAINT", "MAINT", False
    if not flags.isdisjoint(_REBOOTS) and state.base not in _BUSY:
        return "REBOOT", "BOOT", False  # Slurm names the reboot before a drain
    if Flag.DRAIN in flags:
        if completing or state.base in _BUSY:
            return "DRAINING", "DRNG", False
        return "DRAINED", "DRAIN", False
    if Flag.FAIL in flags:
        if completing or state.base in _BUSY:
            return "FAILING", "FAILG", True
        return "FAIL", "FAIL", True
    if state.base is Base.ALLOCATED and completing:
        return "ALLOCATED+", "ALLOC+", False
    if state.base is Base.IDLE and completing:
        return "COMPLETING", "COMP", False
    if state.base is Base.IDLE and Flag.RESERVED in flags:
        return "RESERVED", "RESV", False
    long_name, compact_name = _BASE_NAMES[state.base]
    return long_name, compact_name, False


def suffix(state: NodeState) -> str:
    flags = state.flags
    if not flags:
        return ""
    only_star = Flag.FAIL in flags and not (
        Flag.INVALID_REG in flags or Flag.DRAIN in flags
    )
    if only_star:
        return "*" if Flag.NO_RESPOND in flags else ""
    if Flag.MAINT in flags:  # MAINT (or MAINT*) as its own word, else the word + `$`
        if _D not in flags and state.base not in _BUSY_OR_DOWN and \
                Flag.INVALID_REG not in flags:
            return "*" if Flag.NO_RESPOND in flags else ""
        return "$"
    if not flags.isdisjoint(_REBOOTS) and state.base not in _BUSY and \
            Flag.INVALID_REG not in flags:  # REBOOT^, REBOOT*, or REBOOT alone (never `@`)
        return "^" if Flag.REBOOT_ISSUED in flags else "*" if Flag.NO_RESPOND in flags else ""
    for flag, mark in _SUFFIXES:
        if flag in flags:
            return mark
    return ""


def compact(state: NodeState) -> str:
    """sinfo %t, e.g. "idle", "drng", "drain*", "idle~", "futr"."""
    return (_words(state)[1] + suffix(state)).lower()


def long(state: NodeState) -> str:
    """sinfo %T, e.g. "drained*", "mixed", "idle~"."""
    return (_words(state)[0] + suffix(state)).lower()


def sorted_flags(flags: frozenset[Flag], hidden: bool = False) -> list[Flag]:
    """In Slurm's order; `hidden` keeps the bookkeeping flags (a reboot's plan) for state save."""
    return [f for f in (FLAG_ORDER if hidden else SHOWN_ORDER) if f in flags]


def complete(state: NodeState) -> str:
    """Slurm's "+"-joined complete string, e.g. "IDLE+DRAIN", "DOWN+CLOUD+POWERED_DOWN"."""
    if not state.flags:
        return state.base.value
    return "+".join([state.base.value, *(f.value for f in sorted_flags(state.flags))])


def state_array(state: NodeState) -> list[str]:
    """sinfo --json node.state, e.g. ["IDLE", "DRAIN"], ["DOWN", "NOT_RESPONDING"]."""
    return [state.base.value, *(f.value for f in sorted_flags(state.flags))]


def describe(state: NodeState) -> str:
    """For error messages: "INVALID_REG (Low RealMemory ...)" or "DOWN+DRAIN (maint)"."""
    what = "INVALID_REG" if Flag.INVALID_REG in state.flags else complete(state)
    if state.reason is not None:
        return f"{what} ({state.reason.text})"
    return what


# --- JSON ---------------------------------------------------------------------------------

_FLAG_BY_NAME: dict[str, Flag] = {f.name: f for f in Flag} | {f.value: f for f in Flag}


def reason_to_json(reason: Reason | None) -> dict[str, Any] | None:
    if reason is None:
        return None
    return {
        "source": reason.source.value,
        "text": reason.text,
        "time": reason.time,
        "user": reason.user,
    }


def reason_from_json(d: dict[str, Any] | None) -> Reason | None:
    if d is None:
        return None
    try:
        source = ReasonSource(d["source"])
    except (KeyError, ValueError) as exc:
        raise ValueError(f"node state JSON: bad reason source in {d!r}") from exc
    return Reason(source, str(d.get("text", "")), float(d.get("time") or 0.0), d.get("user"))


def to_json(state: NodeState, *, full: bool = False, hidden: bool = False) -> dict[str, Any]:
    """{"base": "IDLE", "flags": ["DRAIN"], "reason": {...} | None}; flags use the Flag names
    in Slurm's order. full=True adds name, cpus_total and cpus_alloc (for state save); full or
    hidden keeps the bookkeeping flags (a reboot's plan)."""
    d: dict[str, Any] = {
        "base": state.base.value,
        "flags": [f.name for f in sorted_flags(state.flags, hidden or full)],
        "reason": reason_to_json(state.reason),
    }
    if full:
        d["name"] = state.name
        d["cpus_total"] = state.cpus_total
        d["cpus_alloc"] = state.cpus_alloc
    return d


def from_json(
    d: dict[str, Any], *, name: str = "", cpus_total: int = 0, cpus_alloc: int = 0
) -> NodeState:
    """Inverse of to_json; name/cpus come from `d` when present, else from the arguments."""
    try:
        base = Base(d["base"])
    except (KeyError, ValueError) as exc:
        raise ValueError(f"node state JSON: bad base in {d!r}") from exc
    flags = set()
    for f in d.get("flags", ()):
        if f not in _FLAG_BY_NAME:
            raise ValueError(f"node state JSON: unknown flag {f!r}")
        flags.add(_FLAG_BY_NAME[f])
    return NodeState(
        str(d.get("name", name)),
        base,
        frozenset(flags),
        reason_from_json(d.get("reason")),
        int(d.get("cpus_total", cpus_total)),
        int(d.get("cpus_alloc", cpus_alloc)),
    )


# --- rinfo -t filters ----------------------------------------------------------------------

_SUFFIX_FLAG = {"^": Flag.REBOOT_ISSUED, "@": Flag.REBOOT_REQUESTED,
                "#": Flag.POWERING_UP, "%": Flag.POWERING_DOWN, "~": Flag.POWERED_DOWN,
                "!": Flag.POWER_DOWN, "*": Flag.NO_RESPOND}


def _draining(s: NodeState) -> bool:
    return Flag.DRAIN in s.flags and (Flag.COMPLETING in s.flags or s.base in _BUSY)


def _failing(s: NodeState) -> bool:
    return Flag.FAIL in s.flags and (Flag.COMPLETING in s.flags or s.base in _BUSY)


def _base_is(base: Base):
    return lambda s: s.base is base


def _has(flag: Flag):
    return lambda s: flag in s.flags


# Word -> test. Base words compare the base state only (sinfo: `idle` also lists a drained
# idle node); `drain` covers drained and draining, `drained`/`draining` are distinct.
_WORDS: dict[str, Any] = {
    "idle": _base_is(Base.IDLE),
    "alloc": _base_is(Base.ALLOCATED),
    "allocated": _base_is(Base.ALLOCATED),
    "mix": _base_is(Base.MIXED),
    "mixed": _base_is(Base.MIXED),
    "down": _base_is(Base.DOWN),
    "future": _base_is(Base.FUTURE),
    "futr": _base_is(Base.FUTURE),
    "unk": _base_is(Base.UNKNOWN),
    "unknown": _base_is(Base.UNKNOWN),
    "drain": _has(Flag.DRAIN),
    "drained": lambda s: Flag.DRAIN in s.flags and not _draining(s),
    "draining": _draining,
    "drng": _draining,
    "fail": _has(Flag.FAIL),
    "failing": _failing,
    "failg": _failing,
    "comp": _has(Flag.COMPLETING),
    "completing": _has(Flag.COMPLETING),
    "inval": _has(Flag.INVALID_REG),
    "pend": _has(Flag.PENDING),
    "rej": _has(Flag.REJECTED),
    "no_respond": _has(Flag.NO_RESPOND),
    "noresp": _has(Flag.NO_RESPOND),
    "responding": lambda s: Flag.NO_RESPOND not in s.flags,
    "boot": lambda s: not s.flags.isdisjoint({Flag.REBOOT_REQUESTED, Flag.REBOOT_ISSUED}),
    "maint": _has(Flag.MAINT),
    "resv": _has(Flag.RESERVED),
    "reboot": lambda s: not s.flags.isdisjoint({Flag.REBOOT_REQUESTED, Flag.REBOOT_ISSUED}),
} | {f.value.lower(): _has(f) for f in SHOWN_ORDER} | {f.name.lower(): _has(f) for f in SHOWN_ORDER}


@attrs.frozen
class _Term:
    text: str
    negate: bool
    test: Any  # Callable[[NodeState], bool]

    def hit(self, s: NodeState) -> bool:
        return bool(self.test(s))


@attrs.frozen
class StateFilter:
    """A parsed `-t` list: a node matches if it matches any plain term (or there is none) and
    none of the `~`-negated terms."""

    terms: tuple[_Term, ...]

    def matches(self, state: NodeState) -> bool:
        positive = [t for t in self.terms if not t.negate]
        if positive and not any(t.hit(state) for t in positive):
            return False
        return not any(t.hit(state) for t in self.terms if t.negate)


def _term(word: str) -> Any:
    test = _WORDS.get(word)
    if test is not None:
        return test
    mark = word[-1:]
    if mark in _SUFFIX_FLAG and len(word) > 1:  # suffix forms such as idle~ or down*
        inner, flag = _WORDS.get(word[:-1]), _SUFFIX_FLAG[mark]
        if inner is not None:
            return lambda s: flag in s.flags and inner(s)
    return None


def parse_filter(text: str) -> StateFilter:
    """Parse `rinfo -t` (comma list, case-insensitive; `~word` negates; `idle~` suffix forms)."""
    terms = []
    for raw in text.split(","):
        word = raw.strip().lower()
        if not word:
            continue
        negate = word.startswith("~") and len(word) > 1
        if negate:
            word = word[1:]
        test = _term(word)
        if test is None:
            valid = ", ".join(sorted(w for w in _WORDS if w.isalpha() or "_" in w))
            raise ValueError(f"invalid node state {raw.strip()!r} in -t; valid: {valid}")
        terms.append(_Term(raw.strip(), negate, test))
    if not terms:
        raise ValueError("empty node state list in -t")
    return StateFilter(tuple(terms))
