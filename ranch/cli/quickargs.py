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

# types.SimpleNamespace, the class of sys.implementation: importing types costs a command more
# than reading its options does.
SimpleNamespace = type(sys.implementation)
SUPPRESS = "==SUPPRESS=="  # argparse.SUPPRESS, without the import
# An option table: (option strings, add_argument keyword arguments), in add_argument order.
Table = tuple[tuple[tuple[str, ...], dict], ...]
_QUICK_ACTIONS = frozenset({"store", "store_true", "count", "append"})


class Declined(Exception):
    """The quick reader does not take this command line: argparse reads it instead."""


def build(table: Table, **parser_kwargs):  # -> argparse.ArgumentParser
    """The argparse parser of `table` (ranch.cli.rinfo.UsageParser: one-line errors, Slurm's
    names)."""
    from ranch.cli.usage_parser import UsageParser

    p = UsageParser(**parser_kwargs)
    for names, kwargs in table:
        p.add_argument(*names, **{k: v() if k == "version" and callable(v) else v
                                  for k, v in kwargs.items()})
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
    by_name: dict[str, tuple[str, str, dict]] = {}
    values: dict[str, object] = {}
    words: list[str] | None = None  # the one positional's list, if the table has one
    rest = ""  # its nargs: "*" (one run of words) or "..." (argparse.REMAINDER: all that follows)
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
    i = run_end = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word.startswith("--"):
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
        elif word.startswith("-") and len(word) > 1:
            j = 1
            while j < len(word):
                action, dest, kwargs = by_name.get("-" + word[j]) or ("argparse", "", {})
                j += 1
                if action == "optional" and j == len(word):
                    i = _optional(kwargs, dest, values, argv, i)
                    break
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
        elif words is None or word == "-" or (words and run_end != i - 1):
            raise Declined  # no positional taken, '-', or a second run of words
        elif rest == "...":
            words += argv[i - 1:]
            break
        else:
            words.append(word)
            run_end = i
    return SimpleNamespace(**values)


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
