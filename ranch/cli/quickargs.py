"""A command's options as one table of argparse calls, read without importing argparse when it can.

Each command lists its options once, as the arguments of `add_argument` (OPTIONS below). The
everyday command lines (exact option names, flags, `-ofmt`, `--format=fmt`, `--format fmt`)
are read here straight from that table; anything else (--help, --version, a shortened or
unknown option, a value that starts with '-', '--', positional words, a value its type refuses)
goes to the argparse parser built from the same table, so messages and corner cases stay
argparse's own. Importing argparse and building its parser cost more than the rest of a
`rinfo` (it pulls gettext, locale and shutil too).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import SimpleNamespace
    from typing import Any
else:
    # types.SimpleNamespace, the class of sys.implementation: importing types costs a command
    # more than reading its options does.
    SimpleNamespace = type(sys.implementation)
# argparse.SUPPRESS's text, without the import. argparse tests `help is SUPPRESS` (identity), and
# this string is another object: build() swaps it for argparse's own, or --help prints it.
SUPPRESS = "==SUPPRESS=="
# An option table: (option strings, add_argument keyword arguments), in add_argument order.
Table = tuple[tuple[tuple[str, ...], dict], ...]
_QUICK_ACTIONS = frozenset({"store", "store_true", "count", "append"})


class Declined(Exception):
    """The quick reader does not take this command line: argparse reads it instead."""


def build(table: Table, **parser_kwargs):  # -> argparse.ArgumentParser
    """The argparse parser of `table` (ranch.cli.rinfo.UsageParser: one-line errors, Slurm's
    names)."""
    import argparse

    from ranch.cli.usage_parser import UsageParser

    p = UsageParser(**parser_kwargs)
    for names, kwargs in table:
        given: dict[str, Any] = {k: v() if k == "version" and callable(v) else
                                 argparse.SUPPRESS if k == "help" and v == SUPPRESS else v
                                 for k, v in kwargs.items()}
        p.add_argument(*names, **given)
    return p


def parse(table: Table, argv: list[str], build_parser) -> SimpleNamespace:
    """`argv` read by `table`, quickly when it can be; else `build_parser().parse_args(argv)`."""
    try:
        return quick(table, argv)
    except Declined:
        return build_parser().parse_args(argv)


def _dest(names: tuple[str, ...], kwargs: dict) -> str:
    """argparse's dest: the first long name (else the first short one), '-' as '_'."""
    if "dest" in kwargs:
        return kwargs["dest"]
    long = next((n for n in names if n.startswith("--")), names[0])
    return long.lstrip("-").replace("-", "_")


def quick(table: Table, argv: list[str]) -> SimpleNamespace:
    """The namespace argparse would give for `argv`, or Declined when it is not sure to."""
    by_name, values, words, rest = _quick_table(table)
    i = run_end = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word.startswith("--"):
            i = _quick_long(word, argv, i, by_name, values)
        elif word.startswith("-") and len(word) > 1:
            i = _quick_shorts(word, argv, i, by_name, values)
        elif words is None or word == "-" or (words and run_end != i - 1):
            raise Declined  # no positional taken, '-', or a second run of words
        elif rest == "...":
            words += argv[i - 1:]
            break
        else:
            words.append(word)
            run_end = i
    return SimpleNamespace(**values)


def _quick_table(table: Table) -> tuple[dict[str, tuple[str, str, dict]], dict[str, object],
                                          list[str] | None, str]:
    """(each option name's (action, dest, kwargs), the defaults, the one positional's list if
    the table has one, its nargs: "*" (one run of words) or "..." (argparse.REMAINDER: all that
    follows))."""
    by_name: dict[str, tuple[str, str, dict]] = {}
    values: dict[str, object] = {}
    words: list[str] | None = None
    rest = ""
    for names, kwargs in table:
        if not names[0].startswith("-"):
            rest = kwargs.get("nargs", "")
            if words is not None or rest not in ("*", "...") or "default" in kwargs:
                raise Declined  # other positionals: argparse's matching rules
            words = values[kwargs.get("dest", names[0])] = []
            continue
        action = kwargs.get("action", "store")
        dest = _dest(names, kwargs)
        if action not in ("help", "version"):
            default = kwargs.get("default", False if action == "store_true" else None)
            if action == "append":  # argparse appends to a copy of the default
                default = None if default is None else list(default)
            values.setdefault(dest, default)
        if action == "store" and kwargs.get("nargs") == "?":
            action = "optional"  # its value if one follows (`rqueue -s 12.0`), else const
        elif action not in _QUICK_ACTIONS or "nargs" in kwargs:
            action = "argparse"  # help, version, other nargs: argparse's to handle
        for n in names:
            by_name[n] = (action, dest, kwargs)
    return by_name, values, words, rest


def _quick_long(word: str, argv: list[str], i: int, by_name: dict[str, tuple[str, str, dict]],
                values: dict[str, object]) -> int:
    """`--name[=value]` (its value argv[i] where it takes one): the index after it."""
    name, eq, attached = word.partition("=")
    action, dest, kwargs = by_name.get(name) or ("argparse", "", {})
    if action == "optional" and not eq:
        i = _optional(kwargs, dest, values, argv, i)
    elif action in ("store", "optional", "append"):
        if not eq:
            if i >= len(argv) or argv[i].startswith("-"):
                raise Declined
            attached = argv[i]
            i += 1
        _store(action, dest, values, _typed(kwargs, attached))
    elif eq:
        raise Declined  # a flag given a value: argparse's error
    else:
        _flag(action, dest, values)
    return i


def _quick_shorts(word: str, argv: list[str], i: int,
                  by_name: dict[str, tuple[str, str, dict]], values: dict[str, object]) -> int:
    """A cluster of short options (-la, -n4, -n 4): the index after it."""
    j = 1
    while j < len(word):
        action, dest, kwargs = by_name.get("-" + word[j]) or ("argparse", "", {})
        j += 1
        if action == "optional" and j == len(word):
            return _optional(kwargs, dest, values, argv, i)
        if action in ("store", "optional", "append"):
            attached = word[j:]
            if not attached:
                if i >= len(argv) or argv[i].startswith("-"):
                    raise Declined
                attached = argv[i]
                i += 1
            elif "=" in attached:
                raise Declined  # `-o=FMT` and `-oa=b`: argparse splits at '='
            _store(action, dest, values, _typed(kwargs, attached))
            break
        _flag(action, dest, values)
    return i


def _optional(kwargs: dict, dest: str, values: dict, argv: list[str], i: int) -> int:
    """nargs='?' with nothing attached: the next word unless it is an option, else const."""
    if i < len(argv) and not argv[i].startswith("-"):
        values[dest] = _typed(kwargs, argv[i])
        return i + 1
    values[dest] = kwargs.get("const")
    return i


def _store(action: str, dest: str, values: dict, value: object) -> None:
    if action == "append":
        values[dest] = [*(values[dest] or ()), value]
    else:
        values[dest] = value


def _flag(action: str, dest: str, values: dict) -> None:
    if action == "store_true":
        values[dest] = True
    elif action == "count":
        values[dest] = (values[dest] or 0) + 1
    else:
        raise Declined


def _typed(kwargs: dict, text: str) -> object:
    convert = kwargs.get("type")
    if convert is None:
        return text
    try:
        return convert(text)
    except Exception:
        raise Declined from None  # argparse says what is wrong with it


# -- getopt_long's reading (Slurm commands whose every word must mean what it means to them) --

# How a table entry takes its value: getopt_long's has_arg
NO, REQUIRED, OPTIONAL = 0, 1, 2
_FLAGS = frozenset({"store_true", "count", "help", "version"})


def _arg(kwargs: dict) -> int:
    if kwargs.get("action", "store") in _FLAGS:
        return NO
    return OPTIONAL if kwargs.get("nargs") == "?" else REQUIRED


class GetoptError(ValueError):
    """A word getopt_long refuses, in glibc's words."""


def getopt(table: Table, argv: list[str], exact: tuple[str, ...] = ()
         ) -> tuple[SimpleNamespace, list[str]]:
    """(the namespace argparse would give, the words that are no option) for `argv` read as
    getopt_long does: a required argument is the next word whatever it starts with (`-A -j`
    is the account `-j`), a long name may be any unique prefix of one, words that are no
    option are gathered from anywhere (GNU's permutation) and everything after `--`.
    `exact`: long names (Ranch's own, no Slurm command has them) taken only in full, so that
    every abbreviation means what it means to the Slurm command. A word getopt refuses is a
    GetoptError in glibc's words; --help and --version are answered by the caller (their dests
    are set)."""
    longs, shorts, values = _getopt_table(table)
    words: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word == "--":
            words += argv[i:]
            break
        if not word.startswith("-") or word == "-":
            words.append(word)
        elif word.startswith("--"):
            i = _getopt_long(word, argv, i, longs, exact, values)
        else:
            i = _getopt_shorts(word, argv, i, shorts, values)
    return SimpleNamespace(**values), words


def _getopt_table(table: Table) -> tuple[dict[str, tuple[str, int, dict]],
                                         dict[str, tuple[str, int, dict]], dict[str, object]]:
    """(long names' (dest, has_arg, kwargs), short letters' likewise, the defaults)."""
    longs: dict[str, tuple[str, int, dict]] = {}
    shorts: dict[str, tuple[str, int, dict]] = {}
    values: dict[str, object] = {}
    for names, kwargs in table:
        dest = _dest(names, kwargs)
        action = kwargs.get("action", "store")
        if action in ("help", "version"):
            values.setdefault(dest, False)
        else:
            default = kwargs.get("default", False if action == "store_true" else None)
            values.setdefault(dest, list(default) if isinstance(default, list) else default)
        for n in names:
            entry = (dest, _arg(kwargs), kwargs)
            if n.startswith("--"):
                longs[n[2:]] = entry
            else:
                shorts[n[1:]] = entry
    return longs, shorts, values


def _getopt_long(word: str, argv: list[str], i: int, longs: dict[str, tuple[str, int, dict]],
                 exact: tuple[str, ...], values: dict[str, object]) -> int:
    """`--name[=value]` (a required value is argv[i] when not attached): the index after it."""
    name, eq, text = word[2:].partition("=")
    full = _long(name, longs, exact)
    dest, arg, kwargs = longs[full]
    if arg == NO:
        if eq:
            raise GetoptError(f"option '--{full}' doesn't allow an argument")
        _apply(values, dest, kwargs, None)
    elif eq or arg == OPTIONAL:
        _apply(values, dest, kwargs, text if eq else None)
    elif i < len(argv):
        _apply(values, dest, kwargs, argv[i])
        i += 1
    else:
        raise GetoptError(f"option '--{full}' requires an argument")
    return i


def _getopt_shorts(word: str, argv: list[str], i: int,
                   shorts: dict[str, tuple[str, int, dict]], values: dict[str, object]) -> int:
    """A cluster of short options (a required value is the rest of the word, else argv[i]):
    the index after it."""
    j = 1
    while j < len(word):
        letter = word[j]
        if letter not in shorts:
            raise GetoptError(f"invalid option -- '{letter}'")
        dest, arg, kwargs = shorts[letter]
        rest = word[j + 1:]
        if arg == NO:
            _apply(values, dest, kwargs, None)
            j += 1
            continue
        if rest or arg == OPTIONAL:
            _apply(values, dest, kwargs, rest or None)
        elif i < len(argv):
            _apply(values, dest, kwargs, argv[i])
            i += 1
        else:
            raise GetoptError(f"option requires an argument -- '{letter}'")
        break
    return i


def _long(name: str, longs: dict[str, tuple[str, int, dict]], exact: tuple[str, ...]) -> str:
    """getopt_long: the exact name, else the one option (or options of one meaning) the word is
    a prefix of."""
    if name in longs:
        return name
    hits = [n for n in longs if n.startswith(name) and f"--{n}" not in exact]
    if len({id(longs[n][2]) for n in hits}) == 1:
        return hits[0]
    if not hits:
        raise GetoptError(f"unrecognized option '--{name}'")
    raise GetoptError(f"option '--{name}' is ambiguous; possibilities: "
                   + " ".join(f"'--{n}'" for n in hits))


def _apply(values: dict[str, object], dest: str, kwargs: dict, text: str | None) -> None:
    action = kwargs.get("action", "store")
    if action in ("help", "version"):
        values[dest] = True
    elif action == "store_true":
        values[dest] = True
    elif action == "count":
        values[dest] = (values[dest] or 0) + 1  # type: ignore[operator]
    elif action == "append":
        values[dest] = [*(values[dest] or ()), text]  # type: ignore[misc]
    else:
        values[dest] = kwargs.get("const") if text is None else text
