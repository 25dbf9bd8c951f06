"""sinfo's `-o FORMAT` strings: `%[.][#|WIDTH]X` fields between literal text, and their printing."""

from __future__ import annotations

import re

import attrs

_TOKEN = re.compile(r"%(%|(\.)?(#|\d+)?([A-Za-z]))")


class FormatError(ValueError):
    """A format string names an unknown field letter or is malformed."""


@attrs.frozen
class Field:
    """One `%` field: its letter, width (0 = as is, -1 = fit the widest value), justification."""

    letter: str
    width: int = 0
    right: bool = False
    suffix: str = ""  # literal text up to the next field

    @property
    def dynamic(self) -> bool:
        return self.width < 0


@attrs.frozen
class Format:
    prefix: str
    fields: tuple[Field, ...]


def parse_format(text: str, known: frozenset[str] | set[str]) -> Format:
    """Split `text` into fields; unknown letters raise FormatError naming the letter and column."""
    fields: list[Field] = []
    pos = 0
    prefix = ""
    pending: dict | None = None
    literal: list[str] = []
    for m in _TOKEN.finditer(text):
        literal.append(text[pos : m.start()])
        pos = m.end()
        if m.group(1) == "%":
            literal.append("%")
            continue
        letter = m.group(4)
        if letter not in known:
            raise FormatError(
                f"invalid format field %{letter} at column {m.start() + 1} of {text!r}"
            )
        if pending is None:
            prefix = "".join(literal)
        else:
            fields.append(Field(suffix="".join(literal), **pending))
        literal = []
        size = m.group(3)
        width = -1 if size == "#" else int(size) if size else 0
        pending = {"letter": letter, "width": width, "right": bool(m.group(2))}
    literal.append(text[pos:])
    if "%" in literal[-1]:
        raise FormatError(f"incomplete format field in {text!r}")
    if pending is None:
        raise FormatError(f"format {text!r} names no field")
    fields.append(Field(suffix="".join(literal), **pending))
    return Format(prefix, tuple(fields))


def render_table(
    fmt: Format, names: list[str], rows: list[list[str]], *, header: bool = True
) -> list[str]:
    """Lines of `rows` (one string per field) laid out like sinfo: fixed widths cut values,
    `#` widths fit the widest value or header name, `.` right-aligns."""
    widths = []
    for i, f in enumerate(fmt.fields):
        if f.dynamic:
            # The header counts even when not printed (-h), so that -h never shifts columns.
            w = max((len(r[i]) for r in rows), default=0)
            widths.append(max(w, len(names[i])))
        else:
            widths.append(f.width)
    plan = [(w, f.right, f.suffix) for w, f in zip(widths, fmt.fields, strict=True)]
    out = []
    if header:
        out.append(_line(fmt.prefix, plan, names))
    for r in rows:
        out.append(_line(fmt.prefix, plan, r))
    return out


def _line(prefix: str, plan: list[tuple[int, bool, str]], values: list[str]) -> str:
    parts = [prefix]
    for (w, right, suffix), v in zip(plan, values, strict=True):
        if w:
            v = v[:w]
            v = v.rjust(w) if right else v.ljust(w)
        parts.append(v)
        parts.append(suffix)
    return "".join(parts)
