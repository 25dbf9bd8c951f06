"""Slurm hostlist expressions: expand "n[01-04,07],login1" into names; fold names back into one.

Our own code, not a wrapper, for measured reasons (bench/hostlist_bench.py, 100,000 names,
2-core machine, best of 3): folding 100,000 shuffled names n000001..n100000 took 1.04 s with
ClusterShell 1.10.1 NodeSet and 0.48 s with python-hostlist 2.3.0 against a goal of 0.1 s
(ours: 0.07 s; 0.04 s for unpadded names under two prefixes). Neither library reports where in
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

Folding writes names as Slurm 22.05's hostlist writes them, so that every node list Ranch prints
(rqueue, rinfo, rcontrol, racct, the JSON documents, SLURM_JOB_NODELIST) reads as Slurm's: only a
name's trailing number is folded (`n[1-2]`, `rack1-n[1-2]`; `n1-ib,n2-ib` stay apart), two names
fold as well as many (`n[001-002]`), and numbers share a range only where they share a width
(`n[9-10]`, `n[09-10]`, but `n[8,09]`). With sort=True (what slurmctld writes for a job's or a
partition's nodes; `scontrol show hostlistsorted`) the names are a set, in Slurm's order: prefixes
compared naturally (rack9 before rack10), a name without a number first among its prefix, then
the numbers; with sort=False it keeps order and duplicates and only joins neighbours, like
`scontrol show hostlist` (`tux2,tux1,tux2` -> `tux[2,1-2]`). tests/conformance/test_hostlist_fold.py
compares both with scontrol's on random name sets. One range never holds more than MAX_RANGE names
(Slurm would write one that it then refuses to read back).

Expressions with `[...]` are expanded by conf/hostexpand.py, loaded on first need: a command that
folds or names plain hosts (`rinfo`, `rcontrol show node n1`) loads neither it nor re.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["MAX_EXPR_CHARS", "MAX_HOSTS", "MAX_RANGE", "HostlistError", "compress_counts",
           "count", "expand", "fold", "natural_cmp"]

MAX_RANGE = 65_536  # hosts in one lo-hi range (Slurm's limit)
# Hosts in one expansion: a typo like a[0-65535]b[0-65535] must neither eat RAM nor stall rctld
# (1,048,576 names took it 2.7 s); twice a full range, more than any cluster Ranch runs.
MAX_HOSTS = 2 * MAX_RANGE
MAX_EXPR_CHARS = 512 << 10
_SHOWN_CHARS = 60  # of a long expression, in error messages
_DIGIT_CHARS = "0123456789"
_MAX_DIGITS = 64  # a longer trailing number is no number (int() refuses past 4,300 digits)


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


def fold(names: Iterable[str], sort: bool = True) -> str:
    """`names` as one expression, written as Slurm 22.05 writes it (see the module docstring):
    sorted, as slurmctld writes a job's or partition's nodes, or (sort=False) in their order,
    as `scontrol show hostlist` writes them."""
    names = list(names)
    _check_names(names)
    if len(names) < 2:  # a job on one node, most jobs: a name is its own expression
        return names[0] if names else ""
    if sort:  # a set, as slurmctld's node bitmaps are: a name once, where it first came
        names = list(dict.fromkeys(names))
        quick = _sorted_by_value(names)
        if quick is not None:
            return _write(quick)
    ranges = _push(names)
    if sort and len(ranges) > 1:
        ranges = _collapse(_sorted(ranges))
    return _write(ranges)


def _sorted_by_value(names: list[str]) -> list[_Range] | None:
    """The sorted ranges when, under each prefix, the numbers are all of one length or none is
    zero-padded (n001..n100, gpu1..gpu16: every real cluster): Slurm's order is then plain value
    order and the input order does not matter. None otherwise (n9,n05,n10), for the full way."""
    digits = _DIGIT_CHARS
    groups: dict[str, list[str]] = {}
    singles: list[str] = []
    for name in names:
        prefix = name.rstrip(digits)
        if not 0 < len(name) - len(prefix) <= _MAX_DIGITS:
            singles.append(name)
            continue
        group = groups.get(prefix)
        if group is None:
            groups[prefix] = [name[len(prefix) :]]
        else:
            group.append(name[len(prefix) :])
    keyed: list[tuple[str, int, list[_Range]]] = [(name, 0, [[name, -1, -1, 0]])
                                                  for name in singles]
    for prefix, numbers in groups.items():
        width = len(numbers[0])
        if not all(len(d) == width for d in numbers):
            if any(d[0] == "0" and len(d) > 1 for d in numbers):
                return None
            width = 0  # none padded: each number as it is
        values = sorted(map(int, numbers))
        runs: list[_Range] = []
        lo = hi = values[0]
        for v in values[1:]:
            if v != hi + 1 or v - lo >= MAX_RANGE:
                runs.append([prefix, lo, hi, width])
                lo = v
            hi = v
        runs.append([prefix, lo, hi, width])
        keyed.append((prefix, 1, runs))
    rank = _natural_ranks({k[0] for k in keyed})
    keyed.sort(key=lambda k: (rank[k[0]], k[1]))
    return [r for _, _, runs in keyed for r in runs]


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


# One range of Slurm's hostlist: [prefix, lo, hi, width], the names prefix+lo .. prefix+hi with
# each number zero-padded to `width`; a name without a trailing number is [name, -1, -1, 0].
_Range = list


def _padding(value: int, width: int) -> int:
    """The zeros `value` takes when written `width` wide."""
    return max(0, width - len(str(value)))


def _widths_agree(a: _Range, b: _Range) -> bool:
    """Whether a's and b's numbers can share one width: applying either's width to both changes
    neither's zeros. Where they can, the one whose zeros would not change takes the other's
    width, as Slurm's hostlist does (n9,n10 -> n[9-10])."""
    if a[3] == b[3]:
        return True
    a_moves = _padding(a[1], a[3]) != _padding(a[1], b[3])
    b_moves = _padding(b[1], b[3]) != _padding(b[1], a[3])
    if a_moves and b_moves:
        return False
    if a_moves:
        b[3] = a[3]
    else:
        a[3] = b[3]
    return True


def _joins(tail: _Range, prefix: str, lo: int) -> bool:
    """Range `tail` ends right before prefix+lo (and has room for it)."""
    return (tail[1] >= 0 and tail[2] == lo - 1 and tail[0] == prefix
            and tail[2] - tail[1] + 1 < MAX_RANGE)


def _push(names: list[str]) -> list[_Range]:
    """The ranges of `names` in their order, each name joining the range before it when its
    number comes next (Slurm's hostlist_push_host): only a trailing number is a range's."""
    digits = _DIGIT_CHARS
    ranges: list[_Range] = []
    tail: _Range = ["", -1, -1, 0]
    for name in names:
        prefix = name.rstrip(digits)
        if not 0 < len(name) - len(prefix) <= _MAX_DIGITS:
            tail = [name, -1, -1, 0]
            ranges.append(tail)
            continue
        number = name[len(prefix) :]
        lo = int(number)
        new = [prefix, lo, lo, len(number)]
        if _joins(tail, prefix, lo) and _widths_agree(tail, new):
            tail[2] = lo
        else:
            tail = new
            ranges.append(tail)
    return ranges


def _sorted(ranges: list[_Range]) -> list[_Range]:
    """Slurm's order: prefixes compared naturally (strnatcmp: rack9 before rack10), a name without
    a number before the ranges of its prefix, then the numbers. Two numbers that can share a
    width compare by value, others by width; as keys: a zero-padded number (n05) by its width,
    then value; an unpadded one (n9, n10) after the padded ones of its own length or shorter."""
    rank = _natural_ranks({r[0] for r in ranges})

    def key(r: _Range) -> tuple[int, int, int, int, int]:
        lo = r[1]
        if lo < 0:
            return rank[r[0]], 0, 0, 0, 0
        length = len(str(lo))
        if r[3] > length:  # zero-padded: only its own width shares with it
            return rank[r[0]], 1, r[3], 0, lo
        return rank[r[0]], 1, length, 1, lo

    return sorted(ranges, key=key)


def _collapse(ranges: list[_Range]) -> list[_Range]:
    """Neighbours in sorted order whose numbers run on are one range (up to MAX_RANGE names)."""
    out = [ranges[0]]
    for r in ranges[1:]:
        last = out[-1]
        if r[1] >= 0 and _joins(last, r[0], r[1]) and r[2] - last[1] + 1 <= MAX_RANGE \
                and _widths_agree(last, r):
            last[2] = r[2]
        else:
            out.append(r)
    return out


def _write(ranges: list[_Range]) -> str:
    """Neighbouring ranges of one prefix go in one pair of brackets (`n[1-3,7]`); a lone name
    goes without (`n4`), as does every name without a number."""
    out: list[str] = []
    i, n = 0, len(ranges)
    while i < n:
        prefix, lo, hi, _ = ranges[i]
        if lo < 0:
            out.append(prefix)
            i += 1
            continue
        j = i + 1
        while j < n and ranges[j][1] >= 0 and ranges[j][0] == prefix:
            j += 1
        pieces = [f"{str(r[1]).zfill(r[3])}-{str(r[2]).zfill(r[3])}" if r[2] > r[1]
                  else str(r[1]).zfill(r[3]) for r in ranges[i:j]]
        if j == i + 1 and hi == lo:
            out.append(prefix + pieces[0])
        else:
            out.append(f"{prefix}[{','.join(pieces)}]")
        i = j
    return ",".join(out)


def _natural_ranks(texts: set[str]) -> dict[str, int]:
    """Each text's place in natural order (Slurm's strnatcmp); few distinct prefixes, so a
    comparison sort over them costs little."""
    if len(texts) == 1:
        return dict.fromkeys(texts, 0)
    from functools import cmp_to_key

    return {t: i for i, t in enumerate(sorted(texts, key=cmp_to_key(natural_cmp)))}


def natural_cmp(a: str, b: str) -> int:
    """Compare as Slurm's strnatcmp (Martin Pool's natural order): runs of digits by value (the
    longer run wins, then the first differing digit), except that a run starting with 0 on
    either side compares digit by digit from the left, as a fraction; other characters by code.
    Whitespace is skipped."""
    i = j = 0
    la, lb = len(a), len(b)
    while True:
        while i < la and a[i].isspace():
            i += 1
        while j < lb and b[j].isspace():
            j += 1
        ca = a[i] if i < la else ""
        cb = b[j] if j < lb else ""
        if ca in _DIGIT_CHARS and cb in _DIGIT_CHARS and ca and cb:
            ea, eb = _digit_run_end(a, i), _digit_run_end(b, j)
            ra, rb = a[i:ea], b[j:eb]
            if ca == "0" or cb == "0":  # as fractions: the first differing digit decides
                for da, db in zip(ra, rb, strict=False):
                    if da != db:
                        return -1 if da < db else 1
                if len(ra) != len(rb):
                    return -1 if len(ra) < len(rb) else 1
            elif len(ra) != len(rb):
                return -1 if len(ra) < len(rb) else 1
            elif ra != rb:
                return -1 if ra < rb else 1
        if not ca and not cb:
            return 0
        if ca != cb:
            return -1 if ca < cb else 1
        i += 1
        j += 1


def _digit_run_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and text[end] in _DIGIT_CHARS:
        end += 1
    return end


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
