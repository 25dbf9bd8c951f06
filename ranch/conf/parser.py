"""Text -> logical lines of Key=Value pairs (Lark LALR grammar in grammar.lark), with positions.

The whole file is parsed in one pass; only when it has syntax errors is it re-parsed line by line,
so that every syntax error of the file is reported, not only the first.
"""

from __future__ import annotations

import pathlib
from typing import NamedTuple, cast

import lark

_GRAMMAR = (pathlib.Path(__file__).with_name("grammar.lark")).read_text()


class Pair(NamedTuple):
    """`key=value` with 1-based positions; vcol is the first character of the value proper."""

    key: str
    op: str
    value: str
    line: int
    col: int
    vline: int
    vcol: int
    quoted: bool


class Include(NamedTuple):
    path: str
    line: int
    col: int


class SyntaxProblem(NamedTuple):
    line: int
    col: int
    message: str


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "#\\":
            out.append(text[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _at(tok: lark.Token) -> tuple[int, int]:
    """A token's line and column: the lexer sets both on every token it makes."""
    assert tok.line is not None and tok.column is not None
    return tok.line, tok.column


class _ToLines(lark.Transformer):
    """Builds Pair/Include tuples directly during the LALR parse (no tree)."""

    def pair(self, children: list[lark.Token]) -> Pair:
        key, op, val = children
        (kl, kc), (vl, vc) = _at(key), _at(val)
        if val.type == "QUOTED":
            return Pair(str(key), str(op), val[1:-1], kl, kc, vl, vc + 1, True)
        return Pair(str(key), str(op), _unescape(str(val)), kl, kc, vl, vc, False)

    def line(self, children: list[Pair]) -> list[Pair]:
        return children

    def include(self, children: list[lark.Token]) -> Include:
        tok = children[1]
        line, column = _at(tok)
        if tok.type == "QUOTED":
            return Include(tok[1:-1], line, column + 1)
        return Include(_unescape(str(tok)), line, column)

    def start(self, children: list) -> list:
        return children


_PARSER = lark.Lark(_GRAMMAR, parser="lalr", transformer=_ToLines(), maybe_placeholders=False)


def _message(exc: lark.exceptions.UnexpectedInput) -> str:
    expected = set(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    tok = getattr(exc, "token", None)
    if isinstance(exc, lark.exceptions.UnexpectedCharacters):
        ch = exc.char
        if ch == '"':
            return "unterminated quoted value (missing closing \")"
        if expected and expected <= {"OP"}:
            return f"expected '=' after the key, found {ch!r}"
        if "BARE" in expected or "QUOTED" in expected:
            return f"unexpected {ch!r} where a value was expected"
        return f"unexpected character {ch!r}; expected Key=Value"
    if tok is not None and tok.type == "$END":
        return "unexpected end of file"
    if "OP" in expected:
        found = "end of line" if tok is not None and tok.type == "_NL" else repr(str(tok))
        return f"expected '=' after the key, found {found}"
    if "BARE" in expected or "QUOTED" in expected:
        return "missing value after '='"
    if "PATH" in expected:
        return "Include needs a file name"
    return f"unexpected {str(tok)!r}; expected Key=Value"


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line, joining backslash continuations."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 1
    for i, raw in enumerate(text.split("\n"), start=1):
        if not buf:
            start = i
        buf.append(raw)
        body = raw.rstrip("\r")
        trailing = len(body) - len(body.rstrip("\\"))
        if trailing % 2 == 0:
            out.append((start, "\n".join(buf)))
            buf = []
    if buf:
        out.append((start, "\n".join(buf)))
    return out


def parse_text(text: str) -> tuple[list[list[Pair] | Include], list[SyntaxProblem]]:
    """All logical lines of `text` plus every syntax error found (line/col 1-based)."""
    if not text.endswith("\n"):
        text += "\n"
    try:
        return cast(list[list[Pair] | Include], _PARSER.parse(text)), []
    except lark.exceptions.UnexpectedInput:
        pass
    lines: list[list[Pair] | Include] = []
    problems: list[SyntaxProblem] = []
    for first, chunk in _logical_lines(text.rstrip("\n")):
        try:
            got = cast(list[list[Pair] | Include], _PARSER.parse(chunk + "\n"))
        except lark.exceptions.UnexpectedInput as exc:
            problems.append(SyntaxProblem(first + exc.line - 1, exc.column, _message(exc)))
            continue
        lines.extend(_shift(item, first - 1) for item in got)
    return lines, problems


def _shift(item: list[Pair] | Include, by: int) -> list[Pair] | Include:
    if not by:
        return item
    if isinstance(item, Include):
        return item._replace(line=item.line + by)
    return [p._replace(line=p.line + by, vline=p.vline + by) for p in item]
