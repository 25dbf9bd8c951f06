"""srun 22.05's options that rrun reads and sets aside (its man page's list, less those rrun acts
on: cli/rrun.py), so that a tool's srun command line is never refused for an option Ranch has no
use for; and getopt_long's rule for optional arguments (attached with `=` only)."""

from __future__ import annotations

NO, REQUIRED, OPTIONAL = 0, 1, 2
# (long name, short letter, argument), in the man page's order
SET_ASIDE: tuple[tuple[str, str, int], ...] = (
    ("accel-bind", "", REQUIRED), ("account", "A", REQUIRED), ("acctg-freq", "", REQUIRED),
    ("bb", "", REQUIRED), ("bbf", "", REQUIRED), ("bcast", "", OPTIONAL),
    ("bcast-exclude", "", REQUIRED), ("begin", "b", REQUIRED),
    ("cluster-constraint", "", REQUIRED), ("clusters", "M", REQUIRED), ("comment", "", REQUIRED),
    ("compress", "", OPTIONAL), ("constraint", "C", REQUIRED), ("container", "", REQUIRED),
    ("contiguous", "", NO), ("core-spec", "S", REQUIRED), ("cores-per-socket", "", REQUIRED),
    ("cpu-freq", "", REQUIRED), ("cpus-per-gpu", "", REQUIRED), ("deadline", "", REQUIRED),
    ("delay-boot", "", REQUIRED), ("dependency", "d", REQUIRED), ("disable-status", "X", NO),
    ("distribution", "m", REQUIRED), ("epilog", "", REQUIRED), ("extra-node-info", "B", REQUIRED),
    ("gid", "", REQUIRED), ("gpu-bind", "", REQUIRED), ("gpu-freq", "", REQUIRED),
    ("gpus-per-socket", "", REQUIRED), ("gres", "", REQUIRED), ("gres-flags", "", REQUIRED),
    ("het-group", "", REQUIRED), ("hint", "", REQUIRED), ("hold", "H", NO),
    ("immediate", "I", OPTIONAL), ("licenses", "L", REQUIRED), ("mail-type", "", REQUIRED),
    ("mail-user", "", REQUIRED), ("mcs-label", "", REQUIRED), ("mem-bind", "", REQUIRED),
    ("mem-per-cpu", "", REQUIRED), ("mem-per-gpu", "", REQUIRED), ("mincpus", "", REQUIRED),
    ("msg-timeout", "", REQUIRED), ("multi-prog", "", NO), ("network", "", REQUIRED),
    ("nice", "", OPTIONAL), ("no-allocate", "Z", NO), ("no-kill", "k", OPTIONAL),
    ("nodefile", "F", REQUIRED), ("ntasks-per-core", "", REQUIRED),
    ("ntasks-per-gpu", "", REQUIRED), ("ntasks-per-socket", "", REQUIRED),
    ("open-mode", "", REQUIRED), ("overcommit", "O", NO), ("oversubscribe", "s", NO),
    ("power", "", REQUIRED), ("prefer", "", REQUIRED), ("preserve-env", "E", NO),
    ("priority", "", REQUIRED), ("profile", "", REQUIRED), ("prolog", "", REQUIRED),
    ("propagate", "", OPTIONAL), ("pty", "", NO), ("qos", "q", REQUIRED),
    ("quit-on-interrupt", "", NO), ("reboot", "", NO), ("relative", "r", REQUIRED),
    ("reservation", "", REQUIRED), ("resv-ports", "", OPTIONAL), ("send-libs", "", OPTIONAL),
    ("signal", "", REQUIRED), ("slurmd-debug", "", REQUIRED), ("sockets-per-node", "", REQUIRED),
    ("spread-job", "", NO), ("switches", "", REQUIRED), ("task-epilog", "", REQUIRED),
    ("task-prolog", "", REQUIRED), ("test-only", "", NO), ("thread-spec", "", REQUIRED),
    ("threads", "T", REQUIRED), ("threads-per-core", "", REQUIRED), ("time-min", "", REQUIRED),
    ("tmp", "", REQUIRED), ("uid", "", REQUIRED), ("usage", "", NO), ("use-min-nodes", "", NO),
    ("wait", "W", REQUIRED), ("wckey", "", REQUIRED), ("x11", "", OPTIONAL),
)
BARE = "\x00"  # the value argparse sees for an optional-argument option given without one


def add_to(parser) -> None:  # parser: argparse.ArgumentParser
    """Each set-aside option, as argparse reads it; help suppressed (rrun --help lists what it
    acts on)."""
    import argparse

    for long, short, arg in SET_ASIDE:
        names = [f"--{long}", *([f"-{short}"] if short else [])]
        dest = "aside_" + long.replace("-", "_")
        if arg == NO:
            parser.add_argument(*names, dest=dest, action="store_true", help=argparse.SUPPRESS)
        else:
            parser.add_argument(*names, dest=dest, help=argparse.SUPPRESS)


def attach_optional(argv: list[str], takes_value: set[str]) -> list[str]:
    """`argv` with each optional-argument option given bare (`--bcast`, `-I`) written as
    `--bcast=<BARE>`, so that argparse never takes the next word for its value (getopt_long
    attaches an optional argument only with `=`, or a short one only when joined). Stops at the
    first word that is not an option (the command) or at `--`."""
    optional = {f"--{long}" for long, _, arg in SET_ASIDE if arg == OPTIONAL}
    optional |= {f"-{short}" for _, short, arg in SET_ASIDE if arg == OPTIONAL and short}
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--" or not word.startswith("-") or word == "-":
            return out + argv[i:]
        if word in optional:
            out.append(f"{word}={BARE}" if word.startswith("--") else f"{word}{BARE}")
        else:
            out.append(word)
            if word in takes_value and "=" not in word:
                if i + 1 < len(argv):
                    out.append(argv[i + 1])
                i += 1
        i += 1
    return out


# rrun's own options that take a value, beside SET_ASIDE's (for option_words)
_OWN_VALUES = {"n": "ntasks", "N": "nodes", "c": "cpus-per-task", "G": "gpus", "w": "nodelist",
               "x": "exclude", "o": "output", "e": "error", "i": "input", "J": "job-name",
               "p": "partition", "t": "time", "D": "chdir"}
_OWN_LONG = {"ntasks", "nodes", "ntasks-per-node", "cpus-per-task", "gpus-per-task",
             "gpus-per-node", "gpus", "nodelist", "exclude", "output", "error", "input",
             "cpu-bind", "job-name", "jobid", "partition", "time", "mem", "chdir", "mpi",
             "export", "server", "key-file", "conf"}


def option_words(argv: list[str]) -> list[tuple[str, str]]:
    """(long name, value) of each option given a value before the command, in order: long
    names written out in full (`--ntasks=2`, `--ntasks 2`) and short letters (`-n2`, `-n 2`)."""
    takes = {long for long, _, arg in SET_ASIDE if arg == REQUIRED} | _OWN_LONG
    shorts = {**{s: long for long, s, arg in SET_ASIDE if s and arg == REQUIRED}, **_OWN_VALUES}
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--" or not word.startswith("-") or word == "-":
            break
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            if eq:
                out.append((name, value))
            elif name in takes and i + 1 < len(argv):
                out.append((name, argv[i + 1]))
                i += 1
        elif word[1:2] in shorts:
            if len(word) > 2:
                out.append((shorts[word[1]], word[2:]))
            elif i + 1 < len(argv):
                out.append((shorts[word[1]], argv[i + 1]))
                i += 1
        i += 1
    return out
