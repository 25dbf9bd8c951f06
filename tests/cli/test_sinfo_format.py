"""ranch.cli.sinfo_format reads `-o` strings as the regular expression it replaced did (sinfo's and
squeue's `%[.][#|WIDTH]X` fields), without importing re."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from ranch.cli.sinfo_format import FormatError, parse_format

_TOKEN = re.compile(r"%(%|(\.)?(#|\d+)?([A-Za-z]))")
KNOWN = frozenset("PaNtTl")


def reference(text: str) -> list[tuple] | str:
    """What the regular-expression reader found: fields as (letter, width, right, suffix), with
    the prefix first, or the error's text."""
    out: list = []
    pos, literal, pending = 0, [], None
    for m in _TOKEN.finditer(text):
        literal.append(text[pos : m.start()])
        pos = m.end()
        if m.group(1) == "%":
            literal.append("%")
            continue
        if m.group(4) not in KNOWN:
            return f"invalid format field %{m.group(4)} at column {m.start() + 1} of {text!r}"
        if pending is None:
            out.append("".join(literal))
        else:
            out.append((*pending, "".join(literal)))
        literal = []
        size = m.group(3)
        pending = (m.group(4), -1 if size == "#" else int(size) if size else 0, bool(m.group(2)))
    literal.append(text[pos:])
    if "%" in literal[-1]:
        return f"incomplete format field in {text!r}"
    if pending is None:
        return f"format {text!r} names no field"
    return [*out, (*pending, "".join(literal))]


def ours(text: str) -> list[tuple] | str:
    try:
        fmt = parse_format(text, KNOWN)
    except FormatError as exc:
        return str(exc)
    return [fmt.prefix, *((f.letter, f.width, f.right, f.suffix) for f in fmt.fields)]


@given(st.text(alphabet=st.sampled_from("%.#0123\u0663PNtQz -|"), max_size=14))
def test_reads_formats_as_the_regular_expression_did(text: str) -> None:
    assert ours(text) == reference(text)


def test_everyday_formats() -> None:
    for text in ("%P %.5a %.10l %.6D %.6t %N", "%#P %N|%%|%20E", "%.18i %.9P %.8j %R"):
        assert ours(text) == reference(text)
