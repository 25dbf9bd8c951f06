"""sinfo's `-o FORMAT` strings: `%[.][#|WIDTH]X` fields between literal text, and their printing."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


class FormatError(ValueError):
    """A format string names an unknown field letter or is malformed."""


# Plain classes rather than attrs: importing attrs costs a CLI run more than rendering does.
class Field:
    """One `%` field: its letter, width (0 = as is, -1 = fit the widest value), justification."""

    __slots__ = ("letter", "right", "suffix", "width")

    def __init__(self, letter: str, width: int = 0, right: bool = False, suffix: str = "") -> None:
        self.letter = letter
        self.width = width
        self.right = right
        self.suffix = suffix  # literal text up to the next field

    @property
    def dynamic(self) -> bool:
        return self.width < 0

    def _key(self) -> tuple:
        return (self.letter, self.width, self.right, self.suffix)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Field) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Field({self.letter!r}, {self.width}, {self.right}, {self.suffix!r})"


class Format:
    """A parsed format: literal text before the first field, then the fields."""

    __slots__ = ("fields", "prefix")

    def __init__(self, prefix: str, fields: tuple[Field, ...]) -> None:
        self.prefix = prefix
        self.fields = fields

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Format) and (self.prefix, self.fields) == (
            other.prefix, other.fields)

    def __hash__(self) -> int:
        return hash((self.prefix, self.fields))

    def __repr__(self) -> str:
        return f"Format({self.prefix!r}, {self.fields!r})"


def _tokens(text: str):  # -> Iterator[tuple[int, int, str, bool, str]]
    """(start, end, letter, right, size) of each `%[.][#|digits]X` field, letter "%" for `%%`;
    a `%` that starts neither is literal text. By hand, not with re: `import re` would cost
    every command 6 ms, twice what the rest of a `rinfo` takes."""
    i = text.find("%")
    while i >= 0:
        if text[i + 1 : i + 2] == "%":
            yield i, i + 2, "%", False, ""
            i = text.find("%", i + 2)
            continue
        j = i + 1
        right = text[j : j + 1] == "."
        j += right
        k = j
        if text[k : k + 1] == "#":
            k += 1
        else:
            while k < len(text) and text[k].isdecimal():  # re's \d
                k += 1
        if text[k : k + 1] in _LETTERS:
            yield i, k + 1, text[k], right, text[j:k]
            i = text.find("%", k + 1)
        else:
            i = text.find("%", i + 1)


def parse_format(text: str, known: frozenset[str] | set[str]) -> Format:
    """Split `text` into fields; unknown letters raise FormatError naming the letter and column."""
    fields: list[Field] = []
    pos = 0
    prefix = ""
    pending: dict | None = None
    literal: list[str] = []
    for start, end, letter, right, size in _tokens(text):
        literal.append(text[pos:start])
        pos = end
        if letter == "%":
            literal.append("%")
            continue
        if letter not in known:
            raise FormatError(
                f"invalid format field %{letter} at column {start + 1} of {text!r}"
            )
        if pending is None:
            prefix = "".join(literal)
        else:
            fields.append(Field(suffix="".join(literal), **pending))
        literal = []
        width = -1 if size == "#" else int(size) if size else 0
        pending = {"letter": letter, "width": width, "right": right}
    literal.append(text[pos:])
    if "%" in literal[-1]:
        raise FormatError(f"incomplete format field in {text!r}")
    if pending is None:
        raise FormatError(f"format {text!r} names no field")
    fields.append(Field(suffix="".join(literal), **pending))
    return Format(prefix, tuple(fields))


def parse_sinfo_format(text: str, known: frozenset[str] | set[str], what: str = "node"
                       ) -> tuple[Format, list[str]]:
    """`text` read as sinfo 22.05 reads it (src/sinfo/opts.c _parse_format): the text before
    the first `%` is the prefix, then each run between two `%`s is `[.][WIDTH]X` and its
    suffix. A letter sinfo does not know is no error: that run (`%` included) is printed as it
    is, and a warning names the letter; so is a `%-6a` (sinfo has no `-` flag). Returns the
    format and those warnings. Ranch's `%#X` (fit the widest value) is kept. squeue reads its
    `-o` the same way (src/squeue/opts.c), `what` = "job"."""
    prefix, sep, rest = text.partition("%")
    fields: list[Field] = []
    warnings: list[str] = []
    literal: list[str] = []  # text since the last field: invalid runs and suffixes
    for token in rest.split("%") if sep else ():
        if not token:
            continue  # strtok skips empty runs: `%%` prints nothing
        i = 0
        right = token.startswith(".")
        i += right
        size = ""
        if token[i : i + 1] == "#":
            size, i = "#", i + 1
        else:
            while i < len(token) and token[i].isdecimal():
                size += token[i]
                i += 1
        letter = token[i : i + 1]
        if letter not in known or not letter:
            warnings.append(f"Invalid {what} format specification: {letter}")
            if fields:
                literal.append("%" + token)
            else:
                prefix += "%" + token
            continue
        if fields:
            last = fields[-1]
            fields[-1] = Field(last.letter, last.width, last.right, last.suffix + "".join(literal))
        elif literal:
            prefix += "".join(literal)
        literal = []
        width = -1 if size == "#" else int(size) if size else 0
        fields.append(Field(letter, width, right, token[i + 1 :]))
    if fields and literal:
        last = fields[-1]
        fields[-1] = Field(last.letter, last.width, last.right, last.suffix + "".join(literal))
    return Format(prefix, tuple(fields)), warnings


# sinfo -O's names (src/sinfo/opts.c _parse_long_format) of the fields Ranch has, as -o letters
LONG_NAMES = {
    "available": "a", "cpus": "c", "cpusload": "O", "freemem": "e", "cpusstate": "C",
    "cores": "Y", "defaulttime": "L", "disk": "d", "features": "f", "features_act": "b",
    "groups": "g", "gres": "G", "memory": "m", "nodes": "D", "nodeaddr": "o", "nodeaiot": "F",
    "nodehost": "n", "nodelist": "N", "partition": "P", "partitionname": "R",
    "prioritytier": "p", "reason": "E", "root": "r", "oversubscribe": "h", "share": "h",
    "size": "s", "statecompact": "t", "statelong": "T", "sockets": "X", "socketcorethread": "z",
    "time": "l", "timestamp": "H", "threads": "Z", "user": "u", "userlong": "U",
    "version": "v", "weight": "w", "nodeai": "A", "maxcpuspernode": "B",
    "priorityjobfactor": "I", "preemptmode": "M", "allocnodes": "S", "cluster": "V",
    "comment": "comment", "extra": "extra", "allocmem": "allocmem", "gresused": "gresused",
    "port": "port", "statecomplete": "statecomplete",
}


# sinfo's `-o %all` (src/sinfo/opts.c _parse_format): every letter sinfo 22.05 has, a-z then
# A-Z, `|` after each (` |` after the capitals); a letter it lacks goes with its separator
_SINFO_LETTERS = "abcdefghlmnoprstuvwzABCDEFGHILMNOPRSTUVXYZ"
ALL = "".join(f"%{c}|" for c in "abcdefghijklmnopqrstuvwxyz" if c in _SINFO_LETTERS) + "".join(
    f"%{c} |" for c in "ABCDEFGHIJKLMNOPQRSTUVWXY" if c in _SINFO_LETTERS) + "%Z "


def parse_long_format(text: str, known: frozenset[str] | set[str]) -> tuple[Format, list[str]]:
    """sinfo -O: comma-separated names (any case), each `name[:[.]WIDTH[suffix]]`, 20 wide and
    left-justified by default, no space between fields. A name Ranch has no field for is
    dropped with sinfo's warning (it says "job" format: its words)."""
    fields: list[Field] = []
    warnings: list[str] = []
    for token in (t for t in text.split(",") if t):
        name, colon, spec = token.partition(":")
        right = spec.startswith(".")
        spec = spec[right:]
        digits = ""
        while spec[len(digits):len(digits) + 1].isdecimal():
            digits += spec[len(digits)]
        width = int(digits) if digits else (0 if colon else 20)
        if name.lower() == "all":  # sinfo -O All: every -o letter, as `-o %all`
            fields += parse_sinfo_format(ALL, known)[0].fields
            continue
        letter = LONG_NAMES.get(name.lower())
        if letter is None or letter not in known:
            warnings.append(f"Invalid job format specification: {name}")
            continue
        fields.append(Field(letter, width, right, spec[len(digits):] if colon else ""))
    return Format("", tuple(fields)), warnings


def render_table(
    fmt: Format, names: list[str], rows: Sequence[Sequence[str]], *, header: bool = True,
    whole: frozenset[int] = frozenset(),
) -> list[str]:
    """Lines of `rows` (one string per field) laid out like sinfo: fixed widths cut values
    (padded only in the columns `whole` numbers), `#` widths fit the widest value or header
    name, `.` right-aligns."""
    widths = []
    for i, f in enumerate(fmt.fields):
        if f.dynamic:
            # The header counts even when not printed (-h), so that -h never shifts columns.
            w = max((len(r[i]) for r in rows), default=0)
            widths.append(max(w, len(names[i])))
        else:
            widths.append(f.width)
    # One %-template per table: printf's "%-6.6s" pads and cuts in C, once per row.
    specs = [fmt.prefix.replace("%", "%%")]
    for i, (w, f) in enumerate(zip(widths, fmt.fields, strict=True)):
        cut = "" if i in whole else f".{w}"
        specs.append(f"%{'' if f.right else '-'}{w}{cut}s" if w else "%s")
        specs.append(f.suffix.replace("%", "%%"))
    template = "".join(specs)
    out = [template % tuple(names)] if header else []
    out += [template % tuple(r) for r in rows]
    return out
