"""Expanding hostlist expressions with `[...]` groups, with every bound checked before a name is
built (the rules and bounds: conf/hostlist.py, which hands the expressions that are not plain
lists of names to this module)."""

from __future__ import annotations

from ranch.conf.hostlist import (
    MAX_EXPR_CHARS,
    MAX_HOSTS,
    MAX_RANGE,
    HostlistError,
    LazyPatterns,
    plain_list,
)

_MAX_DIGITS = 64  # keeps int() far from Python's digit limit; no hostname is that long
_DIGIT_CHARS = "0123456789"
_rx = LazyPatterns({
    "SPECIAL": r"[\[\],\s]",
    "ITEM": r"([0-9]+)(?:-([0-9]+))?",  # ASCII only: \d would take other scripts' digits
    "NUMBERS": r"[0-9]{1,64}(?:,[0-9]{1,64})*",  # a group body without ranges
    # A term: text, then any number of `[...]` groups each followed by text; then a comma or
    # the end.
    "TERM": r"([^\[\],\s]*)((?:\[[^\[\]]*\][^\[\],\s]*)*)(,|\Z)",
    "GROUP": r"\[([^\]]*)\]([^\[]*)",
    "RANGES": r"[0-9]{1,64}(?:-[0-9]{1,64})?(?:,[0-9]{1,64}(?:-[0-9]{1,64})?)*",
})


def expand_terms(expr: str) -> list[str]:
    """All host names of `expr` (ranch.conf.hostlist.expand once the expression is not a plain
    list),
    in written order, duplicates kept."""
    out: list[str] = []
    made: dict[str, list[str]] = {}  # group body -> its digit strings
    for head, groups, _ in _terms(expr):
        if not groups:
            out.append(head)
            continue
        names = [head]
        for body, tail in groups:
            digits = made.get(body)
            if digits is None:
                digits = made[body] = _numbers(body)
            names = [n + d + tail for n in names for d in digits]
        out.extend(names)
    return out


def count(expr: str) -> int:
    """How many names `expand(expr)` gives (the same errors), without building them."""
    return sum(n for _, _, n in _terms(expr))


_Terms = list[tuple[str, list[tuple[str, str]], int]]  # text, [(body, text)], names


def _terms(expr: str) -> _Terms:
    """The terms of `expr` as (text, [(group body, text after it), ...], how many names), once
    every bound holds (text length, names per range and in all): checked without building a
    name, with C-speed regular expressions where the text allows. The careful parser below
    (_split_terms...) runs only to say what is wrong and where."""
    # Every comma adds at least one name (a product of counts is at least their sum less the
    # groups, plus one), so this refuses the longest lists before any Python loop runs.
    if expr.count(",") + 1 > MAX_HOSTS:
        raise _too_many(0, expr)
    if plain_list(expr):  # a list of names is split at C speed, however long
        return [(name, [], 1) for name in expr.split(",")]
    if len(expr) > MAX_EXPR_CHARS:
        raise HostlistError(f"the expression is {len(expr):,} characters long; at most "
                            f"{MAX_EXPR_CHARS:,} are allowed with '[...]' in it", 0, expr)
    parts = _rx.TERM.findall(expr)
    if len(parts) > 1 and parts[-1] == ("", "", "") and not parts[-2][2]:
        parts.pop()  # the empty match findall also reports at the end of the text
    terms: _Terms = []
    sizes: dict[str, int] = {}  # group body -> numbers in it (bodies repeat: n[1-4]-ib,m[1-4])
    total = 0
    pos = 0
    last = len(parts) - 1
    for i, (head, blob, sep) in enumerate(parts):
        # findall skips what it cannot match: the pieces must tile the text, comma by comma
        if (not head and not blob) or (sep == ",") != (i < last):
            break
        groups = _rx.GROUP.findall(blob) if blob else []
        n = 1
        for body, _tail in groups:
            size = sizes.get(body)
            if size is None:
                size = sizes[body] = _count_numbers(body)
            if size < 0:
                break
            n *= size
            if n > MAX_HOSTS:
                break
        else:
            total += n
            if total > MAX_HOSTS:
                raise _too_many(pos, expr)
            terms.append((head, groups, n))
            pos += len(head) + len(blob) + len(sep)
            continue
        if n > MAX_HOSTS:
            raise _too_many(pos, expr)
        break
    else:
        if pos == len(expr):
            return terms
    _careful_check(expr)
    raise AssertionError(f"hostlist {expr!r}: the two parsers disagree")  # pragma: no cover


def _too_many(col: int, expr: str) -> HostlistError:
    return HostlistError(f"expands to more than {MAX_HOSTS:,} hosts, the most one hostlist may "
                         "name", col, expr)


def _count_numbers(body: str) -> int:
    """How many numbers a group body holds; -1 when it is not well formed (or a range in it is
    reversed or too long), for the careful parser to say why."""
    if _rx.NUMBERS.fullmatch(body):
        return body.count(",") + 1
    if not _rx.RANGES.fullmatch(body):
        return -1
    n = 0
    for item in body.split(","):
        lo, dash, hi = item.partition("-")
        if not dash:
            n += 1
            continue
        size = int(hi) - int(lo) + 1
        if not 0 < size <= MAX_RANGE:
            return -1
        n += size
    return n


def _numbers(body: str) -> list[str]:
    """The digit strings of a group body already counted by _count_numbers."""
    if _rx.NUMBERS.fullmatch(body):
        return body.split(",")
    out: list[str] = []
    for item in body.split(","):
        lo, dash, hi = item.partition("-")
        if not dash:
            out.append(item)
        else:
            # Slurm pads every number of a range to the width written in its low bound.
            fmt = f"%0{len(lo)}d"
            out.extend([fmt % i for i in range(int(lo), int(hi) + 1)])
    return out


def _careful_check(expr: str) -> None:
    """Walk `expr` character by character and raise the HostlistError that says where it is
    wrong (the fast parser found it is)."""
    for start, end, groups in _split_terms(expr):
        if start == end:
            what = "empty hostlist" if not expr else "empty host name (stray comma?)"
            raise HostlistError(what, start, expr)
        for open_at, close_at in groups:
            pos = open_at + 1
            while True:
                comma = expr.find(",", pos, close_at)
                _parse_item(expr, pos, close_at if comma < 0 else comma)
                if comma < 0:
                    break
                pos = comma + 1


def _split_terms(expr: str) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """Top-level terms as (start, end, [(open, close) of each bracket group])."""
    terms: list[tuple[int, int, list[tuple[int, int]]]] = []
    groups: list[tuple[int, int]] = []
    start = 0
    open_at = -1
    for m in _rx.SPECIAL.finditer(expr):
        i = m.start()
        c = expr[i]
        if c == "[":
            if open_at >= 0:
                raise HostlistError(f"'[' inside the '[' at offset {open_at}", i, expr)
            open_at = i
        elif c == "]":
            if open_at < 0:
                raise HostlistError("']' without a matching '['", i, expr)
            groups.append((open_at, i))
            open_at = -1
        elif c == ",":
            if open_at < 0:
                terms.append((start, i, groups))
                groups = []
                start = i + 1
        else:
            raise HostlistError("whitespace is not allowed in a hostlist", i, expr)
    if open_at >= 0:
        raise HostlistError("'[' is never closed", open_at, expr)
    terms.append((start, len(expr), groups))
    return terms


def _parse_item(expr: str, start: int, end: int) -> tuple[int, int | None]:
    """(low, high) of one number or lo-hi range, high None for a number; checked."""
    m = _rx.ITEM.fullmatch(expr, start, end)
    if m is None:
        raise _item_error(expr, start, end)
    lo_text, hi_text = m.group(1), m.group(2)
    for text, at in ((lo_text, m.start(1)), (hi_text, m.start(2))):
        if text is not None and len(text) > _MAX_DIGITS:
            raise HostlistError(f"number longer than {_MAX_DIGITS} digits", at, expr)
    if hi_text is None:
        return 0, None
    lo, hi = int(lo_text), int(hi_text)
    if lo > hi:
        raise HostlistError(
            f"range {lo_text}-{hi_text} has its low bound above its high", start, expr
        )
    if hi - lo + 1 > MAX_RANGE:
        raise HostlistError(
            f"range {lo_text}-{hi_text} spans {hi - lo + 1:,} hosts; one range may span at most "
            f"{MAX_RANGE:,}",
            start,
            expr,
        )
    return lo, hi


def _item_error(expr: str, start: int, end: int) -> HostlistError:
    item = expr[start:end]
    if not item:
        return HostlistError("empty number in '[...]' (stray comma?)", start, expr)
    dash = item.find("-")
    if dash == 0 or item[dash + 1 : dash + 2] == "-":
        at = start + (dash if dash == 0 else dash + 1)
        return HostlistError("negative numbers are not allowed in '[...]'", at, expr)
    if dash == len(item) - 1:
        return HostlistError(f"range {item!r} has no high bound", start + dash, expr)
    bad = 0
    for i, c in enumerate(item):
        if not (c in _DIGIT_CHARS or (c == "-" and i == dash)):
            bad = i
            break
    return HostlistError(f"{item!r} is not a number or a lo-hi range of numbers", start + bad, expr)
