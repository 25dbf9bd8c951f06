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

Expressions with `[...]` are expanded by conf/hostexpand.py, loaded on first need: a command that
folds or names plain hosts (`rinfo`, `rcontrol show node n1`) loads neither it nor re.
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
_DIGIT_CHARS = "0123456789"


class LazyPatterns:
    """Regular expressions by name (`patterns.DIGITS`), each compiled on first use: a command
    that folds or names plain hosts never imports re, which costs it 6 ms."""

    def __init__(self, sources: dict[str, str]) -> None:
        self._sources = sources

    def __getattr__(self, name: str):  # -> re.Pattern
        if name.startswith("_"):
            raise AttributeError(name)
        import re

        pattern = re.compile(self._sources[name])
        setattr(self, name, pattern)  # later lookups find the attribute, not this method
        return pattern


_rx = LazyPatterns({
    "SPECIAL": r"[\[\],\s]",
    "DIGITS": r"([0-9]+)",
    "PADDED": r",0[0-9]",  # in ",".join(numbers): a number written with leading zeros
})


def _no_special(text: str) -> bool:
    """`text` holds no `[`, `]`, `,` or whitespace (str.split's, which is re's), at C speed."""
    return "[" not in text and "]" not in text and "," not in text and (
        not text or text.split() == [text])


def plain_list(expr: str) -> bool:
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
# expand (conf/hostexpand.py)


def expand(expr: str) -> list[str]:
    """All host names of `expr`, in written order, duplicates kept."""
    if expr.count(",") < MAX_HOSTS and plain_list(expr):  # names alone: no loop
        return expr.split(",")
    from ranch.conf.hostexpand import expand_terms

    return expand_terms(expr)


def count(expr: str) -> int:
    """How many names `expand(expr)` gives (the same errors), without building them."""
    from ranch.conf.hostexpand import count

    return count(expr)


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
