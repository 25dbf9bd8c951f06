"""Slurm hostlist expressions: expand "n[01-04,07],login1" into names; fold names back into one.

Our own code, not a wrapper, for measured reasons (bench/hostlist_bench.py, 100,000 names,
2-core machine, best of 3): folding 100,000 shuffled names n000001..n100000 took 1.04 s with
ClusterShell 1.10.1 NodeSet and 0.48 s with python-hostlist 2.3.0 against a goal of 0.1 s
(ours: 0.08 s; 0.11 s for unpadded names under two prefixes). Neither library reports where in
the expression an error is (we need the column for PATH:LINE:COL), ClusterShell takes "n[-1]"
as the name "n-1", python-hostlist accepts empty parts ("a,,b") and drops duplicates, neither
caps a range at 65,536 hosts, and neither is a runtime dependency of Ranch. Expanding 100,000
names (n[000001-050000,050001-100000]): ClusterShell 0.15 s, python-hostlist 0.036 s, ours 0.026 s.

Rules (Slurm's): a term is text with any number of `[...]` groups (several groups give their
cartesian product, first group outermost); a group holds comma-separated numbers and lo-hi
ranges, zero-padded to the width written in the low bound (`[01-10]` -> 01..10, `[8-10]` ->
8,9,10); top-level commas separate terms. Expansion keeps written order and duplicates, as
Slurm's hostlist does (`n[2,1-2]` -> n2,n1,n2). `ALL` is not special here.

Folding with sort=True treats names as a set (duplicates dropped) and writes them in the order
of `sort_key` (shape, then each number in turn); it folds the last number of each name, then
merges neighbouring groups on earlier numbers (`rack[0-1]_blade[0-2]`). Names whose numbers
have different zero paddings are never put in one range they would not expand back to.
With sort=False it keeps order and duplicates and only joins neighbours, like
`scontrol show hostlist` (`tux2,tux1,tux2` -> `tux[2,1-2]`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MAX_HOSTS", "MAX_RANGE", "HostlistError", "expand", "fold", "sort_key"]

MAX_RANGE = 65_536  # hosts in one lo-hi range (Slurm's limit)
MAX_HOSTS = 1 << 20  # hosts in one expansion: a typo like a[0-65535]b[0-65535] must not eat RAM
_MAX_DIGITS = 64  # keeps int() far from Python's digit limit; no hostname is that long

_SPECIAL = re.compile(r"[\[\],\s]")
_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?")  # ASCII only: \d would take other scripts' digits
_DIGITS = re.compile(r"([0-9]+)")
_LAST_NUMBER = re.compile(r"(.*?)([0-9]+)([^0-9]*)")
_FORBIDDEN = re.compile(r"[\[\],\s]")
_DIGIT_CHARS = "0123456789"
_PADDED = re.compile(r",0[0-9]")  # in ",".join(numbers): a number written with leading zeros


class HostlistError(ValueError):
    """A bad hostlist expression (or a name fold cannot write); `col` is the 0-based offset."""

    def __init__(self, message: str, col: int, expr: str) -> None:
        super().__init__(f"bad hostlist {expr!r} at offset {col}: {message}")
        self.message = message
        self.col = col
        self.expr = expr


# ---------------------------------------------------------------------------------------------
# expand


def expand(expr: str) -> list[str]:
    """All host names of `expr`, in written order, duplicates kept."""
    out: list[str] = []
    for start, end, groups in _split_terms(expr):
        if start == end:
            what = "empty hostlist" if not expr else "empty host name (stray comma?)"
            raise HostlistError(what, start, expr)
        names = _expand_term(expr, start, end, groups)
        if len(out) + len(names) > MAX_HOSTS:
            raise HostlistError(f"expands to more than {MAX_HOSTS:,} hosts", start, expr)
        out.extend(names)
    return out


def _split_terms(expr: str) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """Top-level terms as (start, end, [(open, close) of each bracket group])."""
    terms: list[tuple[int, int, list[tuple[int, int]]]] = []
    groups: list[tuple[int, int]] = []
    start = 0
    open_at = -1
    for m in _SPECIAL.finditer(expr):
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


def _expand_term(expr: str, start: int, end: int, groups: list[tuple[int, int]]) -> list[str]:
    if not groups:
        return [expr[start:end]]
    texts = [expr[start : groups[0][0]]]
    choices = []
    total = 1
    for k, (open_at, close_at) in enumerate(groups):
        nxt = groups[k + 1][0] if k + 1 < len(groups) else end
        texts.append(expr[close_at + 1 : nxt])
        choice = _expand_group(expr, open_at + 1, close_at)
        total *= len(choice)
        if total > MAX_HOSTS:
            raise HostlistError(f"expands to more than {MAX_HOSTS:,} hosts", start, expr)
        choices.append(choice)
    if len(choices) == 1:
        head, tail = texts
        return [head + d + tail for d in choices[0]]
    names = [texts[0]]
    for choice, text in zip(choices, texts[1:], strict=True):
        names = [n + d + text for n in names for d in choice]
    return names


def _expand_group(expr: str, start: int, end: int) -> list[str]:
    """The numbers of one `[...]` body expr[start:end], as padded digit strings."""
    out: list[str] = []
    pos = start
    while True:
        comma = expr.find(",", pos, end)
        stop = end if comma < 0 else comma
        out.extend(_expand_item(expr, pos, stop))
        if comma < 0:
            return out
        pos = comma + 1


def _expand_item(expr: str, start: int, end: int) -> list[str]:
    m = _ITEM.fullmatch(expr, start, end)
    if m is None:
        raise _item_error(expr, start, end)
    lo_text, hi_text = m.group(1), m.group(2)
    for text, at in ((lo_text, m.start(1)), (hi_text, m.start(2))):
        if text is not None and len(text) > _MAX_DIGITS:
            raise HostlistError(f"number longer than {_MAX_DIGITS} digits", at, expr)
    if hi_text is None:
        return [lo_text]
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
    # Slurm pads every number of a range to the width written in its low bound.
    fmt = f"%0{len(lo_text)}d"
    return [fmt % i for i in range(lo, hi + 1)]


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


# ---------------------------------------------------------------------------------------------
# fold


def sort_key(name: str) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """The order `fold(..., sort=True)` writes names in: text pieces, then (value, width)s."""
    parts = _DIGITS.split(name)
    return tuple(parts[0::2]), tuple((int(d), len(d)) for d in parts[1::2])


def fold(names: Iterable[str], sort: bool = True) -> str:
    """The shortest expression we can find for `names` (see the module docstring)."""
    names = list(names)
    _check_names(names)
    if not names:
        return ""
    return _fold_sorted(set(names)) if sort else _fold_in_order(names)


def _check_names(names: list[str]) -> None:
    joined = "\0".join(names)
    if "" in names or _FORBIDDEN.search(joined) or "\0" in joined.replace("\0", "", len(names) - 1):
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"host names must be str, not {type(name).__name__}")
            if not name:
                raise HostlistError("empty host name", 0, name)
            m = _FORBIDDEN.search(name)
            if m or "\0" in name:
                at = m.start() if m else name.index("\0")
                raise HostlistError(f"{name[at]!r} cannot be part of a host name", at, name)


# A group is the names that differ only in their last number: (prefix, suffix) -> digit strings.
_Groups = dict[tuple[str, str], list[str]]


def _split_last_number(name: str) -> tuple[str, str, str] | None:
    m = _LAST_NUMBER.fullmatch(name)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def _fold_sorted(names: set[str]) -> str:
    groups: _Groups = {}
    plain: list[str] = []
    digits = _DIGIT_CHARS
    names_list = list(names)
    prefixes = [name.rstrip(digits) for name in names_list]
    if len(set(prefixes)) == 1 and len(prefixes[0]) < min(map(len, names_list)):
        # Fast path: one prefix and every name ends with its number (n0001..n9999).
        cut = len(prefixes[0])
        groups[(prefixes[0], "")] = [name[cut:] for name in names_list]
        names_list = []
    for name, prefix in zip(names_list, prefixes, strict=False):
        if len(prefix) != len(name):  # the number ends the name
            ds = groups.get((prefix, ""))
            if ds is None:
                groups[(prefix, "")] = [name[len(prefix) :]]
            else:
                ds.append(name[len(prefix) :])
            continue
        split = _split_last_number(name)
        if split is None:
            plain.append(name)
        else:
            groups.setdefault((split[0], split[2]), []).append(split[1])

    # One entry per group or plain name: (sort key, fields, texts); a field is a (value, digits)
    # still to merge or an already written string.
    entries: list[tuple[tuple, list, list[str]]] = []
    for name in plain:
        entries.append((((name,), ()), [], [name]))
    for (prefix, suffix), ds in groups.items():
        parts = _DIGITS.split(prefix)
        texts = [*parts[0::2], suffix]
        nums = [(int(d), d) for d in parts[1::2]]
        last = _write_sorted_numbers(ds)
        key = (tuple(texts), tuple((v, len(d)) for v, d in nums))
        around = len(prefix) + len(suffix)
        if not nums and around <= 1 and len(ds) > 1:
            # With one character (or none) around the number, "a1,a2" beats "a[1-2]".
            if sum(map(len, ds)) + len(ds) * (around + 1) - 1 < around + len(last):
                ordered = sorted(ds, key=lambda d: (int(d), len(d)))
                entries.append((key, [], [",".join(prefix + d + suffix for d in ordered)]))
                continue
        entries.append((key, [*nums, last], texts))
    entries.sort(key=lambda e: e[0])

    out: list[str] = []
    i = 0
    while i < len(entries):
        shape = entries[i][0][0]
        j = i + 1
        while j < len(entries) and entries[j][0][0] == shape:
            j += 1
        rows = [e[1] for e in entries[i:j]]
        texts = entries[i][2]
        for row in _merge_earlier_numbers(rows):
            out.append(_join_row(texts, row))
        i = j
    return ",".join(out)


def _write_sorted_numbers(ds: list[str]) -> str:
    """The last-number field of one group: digits alone, or `[...]` in (value, width) order."""
    if len(ds) == 1:
        return ds[0]
    width = len(ds[0])
    if min(map(len, ds)) == width == max(map(len, ds)):
        values = sorted(map(int, ds))
    elif _PADDED.search("," + ",".join(ds)) is None:
        width = 0  # every number written without padding
        values = sorted(map(int, ds))
    else:
        pairs = sorted(((int(d), d) for d in ds), key=lambda p: (p[0], len(p[1])))
        return "[" + ",".join(_ranges(pairs)) + "]"
    # Fast path: one width for all, so a range is a run of consecutive values (capped).
    pieces: list[str] = []
    run_start = values[0]
    prev = run_start
    for v in values[1:]:
        if v != prev + 1 or v - run_start >= MAX_RANGE:
            pieces.append(_range_text(run_start, prev, width))
            run_start = v
        prev = v
    pieces.append(_range_text(run_start, prev, width))
    return "[" + ",".join(pieces) + "]"


def _range_text(lo: int, hi: int, width: int) -> str:
    if lo == hi:
        return str(lo).zfill(width)
    return f"{str(lo).zfill(width)}-{str(hi).zfill(width)}"


def _ranges(pairs: list[tuple[int, str]]) -> list[str]:
    """Range texts for (value, digits) in the given order; a range only takes a number that
    expanding it would write the same way (so n09,n10 -> 09-10 but n8,n09 stay apart), and
    never more than MAX_RANGE numbers, which expand would refuse."""
    out: list[str] = []
    i = 0
    while i < len(pairs):
        lo_d = pairs[i][1]
        width = len(lo_d)
        j = i
        while j + 1 < len(pairs):
            v, d = pairs[j + 1]
            if v != pairs[j][0] + 1 or d != str(v).zfill(width) or j + 1 - i >= MAX_RANGE:
                break
            j += 1
        out.append(lo_d if j == i else f"{lo_d}-{pairs[j][1]}")
        i = j + 1
    return out


def _merge_earlier_numbers(rows: list[list]) -> list[list]:
    """Merge neighbouring rows that differ only in one earlier number, right to left."""
    nfields = len(rows[0])
    for k in range(nfields - 2, -1, -1):
        merged: list[list] = []
        i = 0
        while i < len(rows):
            row = rows[i]
            j = i + 1
            while j < len(rows) and rows[j][k + 1 :] == row[k + 1 :] and rows[j][:k] == row[:k]:
                j += 1
            if j == i + 1:
                merged.append(row)
            else:
                values = [r[k] for r in rows[i:j]]
                merged.append([*row[:k], "[" + ",".join(_ranges(values)) + "]", *row[k + 1 :]])
            i = j
        rows = merged
    return rows


def _join_row(texts: list[str], row: list) -> str:
    pieces = [texts[0]]
    for field, text in zip(row, texts[1:], strict=True):
        pieces.append(field if isinstance(field, str) else field[1])
        pieces.append(text)
    return "".join(pieces)


def _fold_in_order(names: list[str]) -> str:
    """Slurm's unsorted compression: only neighbours sharing prefix and suffix are joined."""
    out: list[str] = []
    key: tuple[str, str] | None = None
    run: list[tuple[int, str]] = []

    def flush() -> None:
        if key is None:
            return
        prefix, suffix = key
        if len(run) == 1:
            out.append(prefix + run[0][1] + suffix)
            return
        bracket = prefix + "[" + ",".join(_ranges(run)) + "]" + suffix
        listed = ",".join(prefix + d + suffix for _, d in run)
        out.append(listed if len(listed) < len(bracket) else bracket)

    for name in names:
        split = _split_last_number(name)
        if split is None:
            flush()
            key, run = None, []
            out.append(name)
            continue
        prefix, d, suffix = split
        if (prefix, suffix) != key:
            flush()
            key, run = (prefix, suffix), []
        run.append((int(d), d))
    flush()
    return ",".join(out)
