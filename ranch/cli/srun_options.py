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
    # srun's options its man page does not list (slurm_opt.c): getopt_long still knows them, so
    # `--in=x` is ambiguous (--input, --interactive) and `--pa=` too (--pack-group, --partition)
    ("interactive", "", NO), ("pack-group", "", REQUIRED),
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


# rrun's own options that take a value, beside SET_ASIDE's (for getopt_words)
_OWN_VALUES = {"n": "ntasks", "N": "nodes", "c": "cpus-per-task", "G": "gpus", "w": "nodelist",
               "x": "exclude", "o": "output", "e": "error", "i": "input", "J": "job-name",
               "p": "partition", "t": "time", "D": "chdir"}
_RANCH_ONLY = ("server", "key-file", "conf")  # Ranch's, not srun's
_OWN_FLAGS = ("help", "label", "unbuffered", "kill-on-bad-exit", "exclusive", "exact", "overlap",
              "verbose", "quiet", "version")
_OWN_LONG = {"ntasks", "nodes", "ntasks-per-node", "cpus-per-task", "gpus-per-task",
             "gpus-per-node", "gpus", "nodelist", "exclude", "output", "error", "input",
             "cpu-bind", "job-name", "jobid", "partition", "time", "mem", "chdir", "mpi",
             "export", "server", "key-file", "conf"}


def long_name(name: str) -> str | None:
    """getopt_long's reading of `--name`: the option itself, the one option it is a unique
    prefix of, or None (unknown: argparse says so); an ambiguous prefix is srun's usage error."""
    names = [long for long, _, _ in SET_ASIDE] + [*_OWN_LONG, *_OWN_FLAGS]
    if name in names:
        return name
    # srun's own names first: Ranch's --server, --key-file and --conf never make one of them
    # ambiguous (`--se` is --send-libs, as in srun)
    hits = sorted(n for n in names if n.startswith(name) and n not in _RANCH_ONLY) if name else []
    if not hits and name:
        hits = sorted(n for n in _RANCH_ONLY if n.startswith(name))
    if len(hits) > 1:
        from ranch.cli.controller import LAUNCHER_USAGE, CliError

        raise CliError(f"option '--{name}' is ambiguous; possibilities: "
                       + " ".join(f"'--{h}'" for h in hits), code=LAUNCHER_USAGE)
    return hits[0] if hits else None


# srun's own whole-number options beside sbatch's (sbatch_options.INT_OPTIONS), each read by
# parse_int as a count of 0 or more
SRUN_INTS = frozenset({"wait", "kill-on-bad-exit"})
_EXCLUSIVE_WORDS = ("", "exclusive", "user", "mcs", "oversubscribe")


def getopt_words(argv: list[str]) -> list[str]:
    """`argv` as srun's getopt_long and slurm_opt.c read it before rrun's parsers do: each long
    option before the command written out in full (a unique prefix is that option, an
    ambiguous one srun's usage error), the whole-number values refused as parse_int refuses
    them (exit 1), and the optional values of --exclusive (user, mcs, oversubscribe: the job's
    sharing, set aside; another word refused), --overlap (taken, as srun takes it) and
    --kill-on-bad-exit (its number) read."""
    from ranch.cli.controller import LAUNCHER_USAGE, CliError
    from ranch.cli.sbatch_options import strtol_whole

    takes = {long for long, _, arg in SET_ASIDE if arg == REQUIRED} | _OWN_LONG
    shorts = {**{s: long for long, s, arg in SET_ASIDE if s and arg == REQUIRED}, **_OWN_VALUES}
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--" or not word.startswith("-") or word == "-":
            return out + argv[i:]
        out.append(word)
        i += 1
        if not word.startswith("--"):  # -n2, -n 2 (a cluster of flags before it: rrun's own)
            full = shorts.get(word[1:2])
            if full is not None and len(word) > 2:
                _check_int(full, word[2:])
            elif full is not None and i < len(argv):
                _check_int(full, argv[i])
                out.append(argv[i])
                i += 1
            continue
        name, eq, value = word[2:].partition("=")
        full = long_name(name) or name
        out[-1] = f"--{full}{eq}{value}"
        if not eq:
            if full in takes and i < len(argv):
                _check_int(full, argv[i])
                out.append(argv[i])
                i += 1
            continue
        _check_int(full, value)
        if full == "exclusive":
            if value.lower() not in _EXCLUSIVE_WORDS:
                raise CliError("Invalid --exclusive specification", code=LAUNCHER_USAGE)
            if value.lower() in ("", "exclusive"):
                out[-1] = "--exclusive"
            else:
                out.pop()
        elif full == "overlap":
            out[-1] = "--overlap"
        elif full == "kill-on-bad-exit":  # an empty optional value is none: the bare flag
            out[-1] = (f"--kill-on-bad-exit-value={strtol_whole(value)}" if value
                       else "--kill-on-bad-exit")
    return out


def _check_int(name: str, value: str) -> None:
    """parse_int's refusal of an srun option's value (exit 1), as sbatch_options.check_int."""
    from ranch.cli.sbatch_options import check_int, strtol_whole

    if name in SRUN_INTS:
        n = strtol_whole(value)
        if n is None or n < 0:
            from ranch.cli.controller import CliError

            raise CliError(f'Invalid numeric value "{value}" for --{name}.')
    else:
        check_int(name, value)
