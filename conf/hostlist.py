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

Bounds (refused with a HostlistError naming the limit, before any name is built, so that a
hostile or mistyped expression costs a scan of its text and nothing more): one lo-hi range
spans at most MAX_RANGE (65,536) hosts, as in Slurm; one expression names at most MAX_HOSTS
(131,072) hosts in all (expanding that many takes about 40 ms); an expression with `[...]`
in it is at most MAX_EXPR_CHARS (512 KiB) long, which bounds the check at about 0.3 s on a
2-core machine (ordinary expressions take a few ms; a plain list of names is split at C speed).

Folding with sort=True treats names as a set (duplicates dropped) and writes them in the order
of `sort_key` (shape, then each number in turn); it folds the last number of each name, then
merges neighbouring groups on earlier numbers (`rack[0-1]_blade[0-2]`). Names whose numbers
have different zero paddings are never put in one range they would not expand back to.
With sort=False it keeps order and duplicates and only joins neighbours, like
`scontrol show hostlist` (`tux2,tux1,tux2` -> `tux[2,1-2]`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["MAX_EXPR_CHARS", "MAX_HOSTS", "MAX_RANGE", "HostlistError", "compress_counts",
           "count", "expand",
           "fold", "sort_key"]

MAX_RANGE = 65_536  # hosts in one lo-hi range (Slurm's limit)
# Hosts in one expansion: a typo like a[0-65535]b[0-65535] must neither eat RAM nor stall rctld
# (1,048,576 names took it 2.7 s); twice a full range, more than any cluster Ranch runs.
MAX_HOSTS = 2 * MAX_RANGE
MAX_EXPR_CHARS = 512 << 10
_SHOWN_CHARS = 60  # of a long expression, in error messages
_MAX_DIGITS = 64  # keeps int() far from Python's digit limit; no hostname is that long
_DIGIT_CHARS = "0123456789"

_SOURCES = {
    "SPECIAL": r"[\[\],\s]",
    "ITEM": r"([0-9]+)(?:-([0-9]+))?",  # ASCII only: \d would take other scripts' digits
    "NUMBERS": r"[0-9]{1,64}(?:,[0-9]{1,64})*",  # a group body without ranges
    "DIGITS": r"([0-9]+)",
    "PADDED": r",0[0-9]",  # in ",".join(numbers): a number written with leading zeros
    # A term: text, then any number of `[...]` groups each followed by text; then a comma or
    # the end.
    "TERM": r"([^\[\],\s]*)((?:\[[^\[\]]*\][^\[\],\s]*)*)(,|\Z)",
    "GROUP": r"\[([^\]]*)\]([^\[]*)",
    "RANGES": r"[0-9]{1,64}(?:-[0-9]{1,64})?(?:,[0-9]{1,64}(?:-[0-9]{1,64})?)*",
}


class _Patterns:
    """The regular expressions, each compiled on first use: a command that folds or names
    plain hosts (`rinfo`, `rcontrol show node n1`) never imports re, which costs it 6 ms."""

    def __getattr__(self, name: str):  # -> re.Pattern
        import re

        pattern = re.compile(_SOURCES[name])
        setattr(self, name, pattern)  # later lookups find the attribute, not this method
        return pattern


_rx = _Patterns()


def _no_special(text: str) -> bool:
    """`text` holds no `[`, `]`, `,` or whitespace (str.split's, which is re's), at C speed."""
    return "[" not in text and "]" not in text and "," not in text and (
        not text or text.split() == [text])


def _plain_list(expr: str) -> bool:
    """`expr` is a comma list of names without brackets or whitespace (nothing to expand)."""
    return (bool(expr) and "[" not in expr and "]" not in expr and ",," not in expr
            and expr[0] != "," and expr[-1] != "," and expr.split() == [expr])


class HostlistError(ValueError):
    """A bad hostlist expression (or a name fold cannot write); `col` is the 0-based offset."""

    def __init__(self, message: str, col: int, expr: str) -> None:
        shown = repr(expr)
        if len(expr) > _SHOWN_CHARS:  # a 1 MB expression must not make a 1 MB message
            shown = f"{expr[:_SHOWN_CHARS]!r}... ({len(expr):,} characters)"
        super().__init__(f"bad hostlist {shown} at offset {col}: {message}")
        self.message = message
        self.col = col
        self.expr = expr


# ---------------------------------------------------------------------------------------------
# expand


def expand(expr: str) -> list[str]:
    """All host names of `expr`, in written order, duplicates kept."""
    if expr.count(",") < MAX_HOSTS and _plain_list(expr):  # names alone: no loop
        return expr.split(",")
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
    if _plain_list(expr):  # a list of names is split at C speed, however long
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


# ---------------------------------------------------------------------------------------------
# fold


def sort_key(name: str) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """The order `fold(..., sort=True)` writes names in: text pieces, then (value, width)s."""
    parts = _rx.DIGITS.split(name)
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
    if "" in names or not _no_special(joined) or "\0" in joined.replace("\0", "", len(names) - 1):
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"host names must be str, not {type(name).__name__}")
            if not name:
                raise HostlistError("empty host name", 0, name)
            m = _rx.SPECIAL.search(name)
            if m or "\0" in name:
                at = m.start() if m else name.index("\0")
                raise HostlistError(f"{name[at]!r} cannot be part of a host name", at, name)


# A group is the names that differ only in their last number: (prefix, suffix) -> digit strings.
_Groups = dict[tuple[str, str], list[str]]


def _split_last_number(name: str) -> tuple[str, str, str] | None:
    """(text before, digits, text after) of the last number in `name`; None without one."""
    end = len(name)
    while end and name[end - 1] not in _DIGIT_CHARS:
        end -= 1
    if not end:
        return None
    start = len(name[:end].rstrip(_DIGIT_CHARS))
    return name[:start], name[start:end], name[end:]


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
        # an earlier number (rack1-n[1-4]) is rare: most names never need re
        parts = _rx.DIGITS.split(prefix) if any(d in prefix for d in digits) else [prefix]
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
    elif _rx.PADDED.search("," + ",".join(ds)) is None:
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


def compress_counts(counts: Iterable[int]) -> str:
    """Slurm's per-node count lists (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE): runs of one
    value as V(xN): [2, 2, 1] -> "2(x2),1"."""
    out: list[str] = []
    last, times = None, 0
    for value in [*counts, None]:
        if value == last:
            times += 1
            continue
        if last is not None:
            out.append(str(last) if times == 1 else f"{last}(x{times})")
        last, times = value, 1
    return ",".join(out)
