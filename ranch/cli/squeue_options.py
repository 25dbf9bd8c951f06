"""squeue 22.05's command line as its getopt_long reads it, and the checks opts.c makes."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import SimpleNamespace
else:
    SimpleNamespace = type(sys.implementation)  # types.SimpleNamespace, without importing types

NO, REQUIRED, OPTIONAL = 0, 1, 2

# squeue's long options (src/squeue/opts.c): name -> (argument, what it stands for: its letter
# or its own name). Names that stand for the same thing are one option to getopt_long's
# abbreviation rule (`--node` is --nodelist's prefix and its own name: not ambiguous).
LONG: dict[str, tuple[int, str]] = {
    "accounts": (REQUIRED, "A"), "account": (REQUIRED, "A"), "all": (NO, "a"),
    "array": (NO, "r"), "array-unique": (NO, "array-unique"), "Format": (REQUIRED, "O"),
    "format": (REQUIRED, "o"), "federation": (NO, "federation"), "help": (NO, "help"),
    "hide": (NO, "hide"), "iterate": (REQUIRED, "i"), "jobs": (OPTIONAL, "j"),
    "local": (NO, "local"), "long": (NO, "l"), "licenses": (REQUIRED, "L"),
    "cluster": (REQUIRED, "M"), "clusters": (REQUIRED, "M"), "me": (NO, "me"),
    "name": (REQUIRED, "n"), "noconvert": (NO, "noconvert"), "node": (REQUIRED, "w"),
    "nodes": (REQUIRED, "w"), "nodelist": (REQUIRED, "w"), "noheader": (NO, "h"),
    "partitions": (REQUIRED, "p"), "partition": (REQUIRED, "p"), "priority": (NO, "P"),
    "qos": (REQUIRED, "q"), "reservation": (REQUIRED, "R"), "sib": (NO, "sibling"),
    "sibling": (NO, "sibling"), "sort": (REQUIRED, "S"), "start": (NO, "start"),
    "steps": (OPTIONAL, "s"), "states": (REQUIRED, "t"), "usage": (NO, "usage"),
    "user": (REQUIRED, "u"), "users": (REQUIRED, "u"), "verbose": (NO, "v"),
    "version": (NO, "V"), "json": (NO, "json"),
    # Ranch's own (issue 44): why a job is not running, its estimate, what would start it sooner
    "why": (REQUIRED, "why"),
    # Ranch's own: where the controller is
    "server": (REQUIRED, "server"), "key-file": (REQUIRED, "key_file"),
    "conf": (REQUIRED, "conf"),
}
# getopt's short options "A:ahi:j::lL:n:M:O:o:p:Pq:R:rs::S:t:u:U:vVw:" (-U: -A, kept by squeue
# for old scripts)
SHORT: dict[str, int] = {
    "A": REQUIRED, "a": NO, "h": NO, "i": REQUIRED, "j": OPTIONAL, "l": NO, "L": REQUIRED,
    "n": REQUIRED, "M": REQUIRED, "O": REQUIRED, "o": REQUIRED, "p": REQUIRED, "P": NO,
    "q": REQUIRED, "R": REQUIRED, "r": NO, "s": OPTIONAL, "S": REQUIRED, "t": REQUIRED,
    "u": REQUIRED, "U": REQUIRED, "v": NO, "V": NO, "w": REQUIRED,
}
# what each letter or name is kept as (rqueue's argument names)
DEST = {
    "A": "account", "U": "account", "a": "all", "h": "noheader", "i": "iterate", "j": "jobs",
    "l": "long", "L": "licenses", "n": "name", "M": "clusters", "O": "Format", "o": "format",
    "p": "partition", "P": "priority", "q": "qos", "R": "reservation", "r": "array",
    "s": "steps", "S": "sort", "t": "states", "u": "user", "v": "verbose", "w": "nodelist",
    "array-unique": "array_unique",
}
FLAGS = ("all", "noheader", "long", "priority", "array", "array_unique", "federation", "hide",
         "local", "me", "noconvert", "sibling", "start", "json", "help", "usage", "V",
         "job_flag", "step_flag")

USAGE = """\
Usage: {prog} [-A account] [--clusters names] [-i seconds] [--job jobid]
              [-n name] [-o format] [-p partitions] [--qos qos]
              [--reservation reservation] [--sort fields] [--start]
              [--step step_id] [-t states] [-u user_name] [--usage]
              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]
              [-ahjlrsv]
"""


class Refused(Exception):
    """A command line squeue refuses: the lines it writes to stderr (and its usage, `usage`)."""

    def __init__(self, lines: list[str], usage: bool = False) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.usage = usage


def _long(name: str, word: str, prog: str) -> tuple[str, int, str]:
    """glibc getopt_long: an exact name, else the prefix of one option (names that stand for
    the same letter and argument count as one). Its messages quote the whole `word`."""
    if name in LONG:
        return (name, *LONG[name])
    hits = [n for n in LONG if n.startswith(name)]
    if not hits:
        raise Refused([f"{prog}: unrecognized option '{word}'", _try(prog)])
    if len({LONG[n] for n in hits}) > 1:
        shown = " ".join(f"'--{n}'" for n in hits)
        raise Refused([f"{prog}: option '{word}' is ambiguous; possibilities: {shown}",
                       _try(prog)])
    return (hits[0], *LONG[hits[0]])


def _try(prog: str) -> str:
    return f'Try "{prog} --help" for more information'


def read(argv: list[str], prog: str = "squeue") -> SimpleNamespace:
    """`argv` as squeue reads it: [(what, value)] in order, then the words that are no option
    (getopt_long permutes them to the end), checked as opts.c does."""
    given: list[tuple[str, str | None]] = []
    rest: list[str] = []
    arg: int | None  # a long option's has_arg, or a letter's (None: no such letter)
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word == "--":
            rest += argv[i:]
            break
        if not word.startswith("-") or word == "-":
            rest.append(word)
            continue
        if word.startswith("--"):
            name, eq, text = word[2:].partition("=")
            full, arg, what = _long(name, word, prog)
            if arg == NO and eq:
                raise Refused([f"{prog}: option '--{full}' doesn't allow an argument",
                               _try(prog)])
            if arg == REQUIRED and not eq:
                if i >= len(argv):
                    raise Refused([f"{prog}: option '--{full}' requires an argument",
                                   _try(prog)])
                text, i = argv[i], i + 1
            given.append((what, text if arg != NO and (eq or arg == REQUIRED) else None))
            continue
        j = 1
        while j < len(word):
            letter = word[j]
            arg = SHORT.get(letter)
            if arg is None:
                raise Refused([f"{prog}: invalid option -- '{letter}'", _try(prog)])
            tail = word[j + 1:]
            if arg == NO:
                given.append((letter, None))
                j += 1
                continue
            if tail:
                given.append((letter, tail))
            elif arg == OPTIONAL:
                given.append((letter, None))
            elif i < len(argv):
                given.append((letter, argv[i]))
                i += 1
            else:
                raise Refused([f"{prog}: option requires an argument -- '{letter}'",
                               _try(prog)])
            break
    return _namespace(given, rest, prog)


def _namespace(given: list[tuple[str, str | None]], rest: list[str], prog: str
               ) -> SimpleNamespace:
    ns = SimpleNamespace()
    for dest in {*DEST.values(), "server", "key_file", "conf", "clusters", "why"}:
        setattr(ns, dest, None)
    for flag in FLAGS:
        setattr(ns, flag, False)
    ns.verbose = 0
    for what, value in given:
        if what in ("help", "usage", "V"):
            setattr(ns, what, True)
            return ns  # squeue prints it and exits at once
        dest = DEST.get(what, what)
        if what == "v":
            ns.verbose += 1
        elif what == "j":
            ns.job_flag = True
            if value is not None:
                ns.jobs = check_jobs(value, prog)
        elif what == "s":
            ns.step_flag = True
            if value is not None:
                ns.steps = check_steps(value, prog)
        elif what == "i":
            ns.iterate, _ = _strtol(value or "")  # atoi
            if ns.iterate <= 0:
                raise Refused([f"{prog}: error: --iterate={value}"])
        elif what == "O" and ns.format is not None:
            raise Refused([f"{prog}: error: -O (--Format) is incompatible with -o (--format)"])
        elif what == "o" and ns.Format is not None:
            raise Refused([f"{prog}: error: -o (--format) is incompatible with -O (--Format)"])
        elif what == "hide":
            ns.all = False
        elif dest in FLAGS:
            setattr(ns, dest, True)
        else:
            setattr(ns, dest, value)
    if rest and ns.job_flag:  # `squeue -j 12`: -j's list is the next word
        ns.jobs = check_jobs(rest.pop(0), prog)
    elif rest and ns.step_flag:
        ns.steps = check_steps(rest.pop(0), prog)
    if rest:
        raise Refused([f"{prog}: error: Unrecognized option: {rest[0]}"], usage=True)
    if ns.job_flag and ns.step_flag:  # -s with a -j list: those jobs' steps
        if ns.jobs is None:
            raise Refused([f"{prog}: error: Incompatible options --jobs and --steps"])
        ns.job_flag = False
    if ns.long and ns.format is not None:
        raise Refused([f"{prog}: fatal: Options -o(--format) and -l(--long) are mutually "
                       "exclusive. Please remove one and retry."])
    if ns.steps is None and ns.step_flag:
        ns.steps = ""  # -s alone: every step
    if ns.sort is not None:
        sort_keys(ns.sort, prog)  # a letter it does not know: exit 1 before any request
    return ns


def _strtol(text: str) -> tuple[int, str]:
    """C's strtol(text, &end, 10): the number at the start (0 if none) and what follows."""
    s = text.lstrip(" \t\n\v\f\r")
    k = 1 if s[:1] in "+-" else 0
    while k < len(s) and s[k].isdigit():
        k += 1
    digits = s[:k]
    if not digits.lstrip("+-"):
        return 0, text
    return int(digits), s[k:]


def check_jobs(text: str, prog: str) -> str:
    """_build_job_list: each comma word a positive id, `ID` or `ID_TASK`."""
    for word in (w for w in text.split(",") if w):
        job_id, _ = _strtol(word)
        if job_id <= 0:
            raise Refused([f"{prog}: error: Invalid job id: {word}"])
    return text


def check_steps(text: str, prog: str) -> str:
    """_build_step_list: each comma word `JOB.STEP` (JOB may be ID_TASK)."""
    for word in (w for w in text.split(",") if w):
        parts = [p for p in word.split(".") if p]
        if not parts:
            break
        if len(parts) == 1:
            raise Refused([f"{prog}: error: Invalid job_step id: {parts[0]}.??"])
        job_id, _ = _strtol(parts[0])
        step_id, _ = _strtol(parts[1])
        if job_id <= 0 or step_id < 0:
            raise Refused([f"{prog}: error: Invalid job_step id: {parts[0]}.{parts[1]}"])
    return text


# --sort's letters (src/squeue/sort.c): those it sorts by, those it takes and ignores
SORT_LETTERS = frozenset("BCdDegGHiIjJlLmMNpPQStTuUvVz")
SORT_IGNORED = frozenset("cfhnO")


def sort_keys(text: str, prog: str, say: bool = True) -> list[tuple[str, bool]]:
    """--sort as squeue reads it, last key first: [(letter or "cluster", descending)]. A letter
    it does not know is Refused; `b` (gres, no longer sorted) is said (`say`) and skipped."""
    out: list[tuple[str, bool]] = []
    i = len(text) - 1
    while i >= 0:
        ch = text[i]
        if ch in ",+-":
            i -= 1
            continue
        if i + 1 >= 7 and text[i - 6:i + 1].lower() == "cluster":
            out.append(("cluster", i >= 7 and text[i - 7] == "-"))
            i -= 7
            continue
        descending = i > 0 and text[i - 1] == "-"
        if ch == "b":
            if say:
                print(f"{prog}: Invalid sort specification: b", file=sys.stderr)
        elif ch in SORT_LETTERS:
            out.append((ch, descending))
        elif ch not in SORT_IGNORED:
            raise Refused([f"{prog}: error: Invalid sort specification: {ch}"])
        i -= 1
    return out
