"""sbatch 22.05's options: the table (names, arguments) and a getopt_long reader for the command
line and `#SBATCH` lines (those lines: cli/sbatch_script.py; the input environment variables:
cli/sbatch_env.py; --help: cli/sbatch_help.py).

sbatch reads its options with getopt_long, not argparse: an optional argument only attaches
with `=` (`--exclusive job.sh` is a flag and a script, never `--exclusive=job.sh`), long names
may be shortened to any unique prefix, and the first word that is not an option is the script.
Every option sbatch 22.05 takes is accepted; `ACTED` names those Ranch acts on or keeps and
shows, the rest are read and set aside (docs/slurm-compat.md, "sbatch's options").
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

NO, REQUIRED, OPTIONAL = 0, 1, 2


class Opt:
    """One option: long name, short letter, NO/REQUIRED/OPTIONAL, metavar, help. A plain class:
    importing collections for a namedtuple (or typing) costs rbatch a tenth of its start."""

    __slots__ = ("arg", "help", "long", "metavar", "short")

    def __init__(self, long: str, short: str, arg: int, metavar: str = "", help: str = "") -> None:
        self.long = long
        self.short = short
        self.arg = arg
        self.metavar = metavar
        self.help = help

    def __repr__(self) -> str:
        return f"Opt({self.long!r}, {self.short!r}, {self.arg}, {self.metavar!r}, {self.help!r})"


class OptionError(ValueError):
    """A word sbatch would refuse; the message names the option and where it was written."""


# (long name, short letter, argument, metavar, help). Help text only for what Ranch acts on.
_TABLE: tuple[Opt, ...] = (
    Opt("account", "A", REQUIRED, "NAME", "charge the job to this account (kept and shown)"),
    Opt("acctg-freq", "", REQUIRED),
    Opt("array", "a", REQUIRED, "INDEXES", "job array, e.g. 1-10, 0,4,7-9, 1-9:2"),
    Opt("batch", "", REQUIRED),
    Opt("bb", "", REQUIRED),
    Opt("bbf", "", REQUIRED),
    Opt("begin", "b", REQUIRED, "TIME", "eligible from TIME: now+60, 16:00, tomorrow, ..."),
    Opt("chdir", "D", REQUIRED, "DIR", "working directory"),
    Opt("cluster-constraint", "", REQUIRED),
    Opt("clusters", "M", REQUIRED),
    Opt("cluster", "", REQUIRED),
    Opt("comment", "", REQUIRED, "TEXT", "arbitrary comment (kept and shown)"),
    Opt("constraint", "C", REQUIRED, "LIST", "node Features: a, a&b, a|b, (a|b)&c"),
    Opt("container", "", REQUIRED),
    Opt("context", "", REQUIRED),
    Opt("contiguous", "", NO),
    Opt("core-spec", "S", REQUIRED),
    Opt("cores-per-socket", "", REQUIRED),
    Opt("cpu-freq", "", REQUIRED),
    Opt("cpus-per-gpu", "", REQUIRED, "N", "CPUs for each GPU"),
    Opt("cpus-per-task", "c", REQUIRED, "N", "CPUs for each task"),
    Opt("deadline", "", REQUIRED),
    Opt("delay-boot", "", REQUIRED),
    Opt("dependency", "d", REQUIRED, "LIST",
        "after|afterany|afterok|afternotok|aftercorr:ID[:ID...] or singleton; , all ? any"),
    Opt("distribution", "m", REQUIRED),
    Opt("error", "e", REQUIRED, "FILE", "stderr file (%j %J %x %u %A %a %N %n %t %s %%)"),
    Opt("exclude", "x", REQUIRED, "HOSTLIST", "nodes the job must not use"),
    Opt("exclusive", "", OPTIONAL, "user|mcs", "no node sharing (=user: only with own jobs)"),
    Opt("export", "", REQUIRED, "ALL|NONE|VARS", "environment passed to the job"),
    Opt("export-file", "", REQUIRED),
    Opt("extra-node-info", "B", REQUIRED),
    Opt("get-user-env", "", OPTIONAL, "T[S|L]", "kept and shown (the job gets --export's)"),
    Opt("gid", "", REQUIRED),
    Opt("gpu-bind", "", REQUIRED),
    Opt("gpu-freq", "", REQUIRED),
    Opt("gpus", "G", REQUIRED, "[TYPE:]N", "GPUs per node (Ranch's meaning of -G)"),
    Opt("gpus-per-node", "", REQUIRED, "[TYPE:]N", "GPUs per node"),
    Opt("gpus-per-socket", "", REQUIRED),
    Opt("gpus-per-task", "", REQUIRED, "[TYPE:]N", "GPUs for each task"),
    Opt("gres", "", REQUIRED, "gpu[:TYPE]:N", "generic resources per node"),
    Opt("gres-flags", "", REQUIRED),
    Opt("help", "h", NO, "", "show this help and exit"),
    Opt("hint", "", REQUIRED, "HINT", "kept and shown"),
    Opt("hold", "H", NO, "", "submit held (rcontrol release)"),
    Opt("ignore-pbs", "", NO),
    Opt("input", "i", REQUIRED, "FILE", "stdin file (same patterns as -o)"),
    Opt("job-name", "J", REQUIRED, "NAME", "job name"),
    Opt("kill-on-invalid-dep", "", REQUIRED, "yes|no",
        "cancel the job if its dependency can never be satisfied"),
    Opt("licenses", "L", REQUIRED),
    Opt("mail-type", "", REQUIRED, "TYPES", "BEGIN,END,FAIL,REQUEUE,INVALID_DEPEND,ALL,NONE"),
    Opt("mail-user", "", REQUIRED, "USER", "who MailProg mails (default: you)"),
    Opt("mcs-label", "", REQUIRED),
    Opt("mem", "", REQUIRED, "SIZE", "memory per node, e.g. 500M, 4G"),
    Opt("mem-bind", "", REQUIRED),
    Opt("mem-per-cpu", "", REQUIRED, "SIZE", "memory per allocated CPU"),
    Opt("mem-per-gpu", "", REQUIRED, "SIZE", "memory per allocated GPU"),
    Opt("mincpus", "", REQUIRED),
    Opt("network", "", REQUIRED),
    Opt("nice", "", OPTIONAL, "N", "lower the priority by N (default 100)"),
    Opt("no-kill", "k", OPTIONAL),
    Opt("no-requeue", "", NO, "", "never requeue the job"),
    Opt("nodefile", "F", REQUIRED),
    Opt("nodelist", "w", REQUIRED, "HOSTLIST", "nodes the job must use"),
    Opt("nodes", "N", REQUIRED, "N[-M]", "nodes (a minimum, or a range)"),
    Opt("ntasks", "n", REQUIRED, "N", "tasks"),
    Opt("ntasks-per-core", "", REQUIRED),
    Opt("ntasks-per-gpu", "", REQUIRED),
    Opt("ntasks-per-node", "", REQUIRED, "N", "tasks on each node"),
    Opt("ntasks-per-socket", "", REQUIRED),
    Opt("ntasks-per-tres", "", REQUIRED),
    Opt("open-mode", "", REQUIRED, "append|truncate", "how -o/-e files are opened"),
    Opt("output", "o", REQUIRED, "FILE", "stdout file (%j %J %x %u %A %a %N %n %t %s %%)"),
    Opt("overcommit", "O", NO),
    Opt("oversubscribe", "s", NO, "", "kept and shown (Ranch does not oversubscribe CPUs)"),
    Opt("parsable", "", NO, "", "print only the job id"),
    Opt("partition", "p", REQUIRED, "PART", "partition"),
    Opt("power", "", REQUIRED),
    Opt("prefer", "", REQUIRED),
    Opt("priority", "", REQUIRED),
    Opt("profile", "", REQUIRED),
    Opt("propagate", "", OPTIONAL),
    Opt("qos", "q", REQUIRED, "QOS", "quality of service (kept and shown)"),
    Opt("quiet", "Q", NO, "", "print nothing"),
    Opt("reboot", "", NO),
    Opt("requeue", "", NO, "", "requeue the job when its node fails (default)"),
    Opt("reservation", "", REQUIRED),
    Opt("signal", "", REQUIRED, "[B:]SIG[@SECS]", "send SIG SECS (60) before the time limit"),
    Opt("sockets-per-node", "", REQUIRED),
    Opt("spread-job", "", NO),
    Opt("switches", "", REQUIRED),
    Opt("tasks-per-node", "", REQUIRED, "N", "same as --ntasks-per-node"),
    Opt("test-only", "", NO, "", "say when and where the job would start; submit nothing"),
    Opt("thread-spec", "", REQUIRED),
    Opt("threads-per-core", "", REQUIRED),
    Opt("time", "t", REQUIRED, "TIME", "time limit, e.g. 30, 1:00:00, 2-0"),
    Opt("time-min", "", REQUIRED),
    Opt("tmp", "", REQUIRED),
    Opt("uid", "", REQUIRED),
    Opt("usage", "", NO, "", "show a short usage and exit"),
    Opt("use-min-nodes", "", NO),
    Opt("verbose", "v", NO),
    Opt("version", "V", NO, "", "show the version and exit"),
    Opt("wait", "W", NO, "", "wait for the job to end; exit with its exit code"),
    Opt("wait-all-nodes", "", REQUIRED),
    Opt("wckey", "", REQUIRED, "KEY", "workload characterization key (kept and shown)"),
    Opt("wrap", "", REQUIRED, "COMMAND", "run COMMAND in a /bin/sh script"),
)
# Ranch's own options (not sbatch's): where the controller is.
RANCH_OPTS: tuple[Opt, ...] = (
    Opt("server", "", REQUIRED, "HOST:PORT", "controller address (or RANCH_SERVER)"),
    Opt("key-file", "", REQUIRED, "PATH", "cluster key (or RANCH_KEY_FILE)"),
    Opt("conf", "", REQUIRED, "PATH", "read controller address and key from this config"),
)
# Options the command line takes but a script line or a variable may not set.
COMMAND_LINE_ONLY = frozenset({"help", "usage", "version", "server", "key-file", "conf", "wrap"})
ACTED = frozenset(o.long for o in _TABLE if o.help)
# Options whose repeats add up rather than replace (sbatch ORs mail types together).
_ADDITIVE = frozenset({"mail-type"})
# Other names of one setting: (option, the key it is stored under, the value stored for a flag).
_SAME: dict[str, tuple[str, object]] = {
    "tasks-per-node": ("ntasks-per-node", None),
    "cluster": ("clusters", None),
    "no-requeue": ("requeue", False),  # the last of --requeue/--no-requeue wins
}

BY_LONG: dict[str, Opt] = {o.long: o for o in (*_TABLE, *RANCH_OPTS)}
BY_SHORT: dict[str, Opt] = {o.short: o for o in _TABLE if o.short}


class Options:
    """Another command's option table on this reader (ralloc: salloc's options, most of them
    sbatch's): by long name and by short letter."""

    def __init__(self, table: Iterable[Opt]) -> None:
        self.table = tuple(table)
        self.by_long = {o.long: o for o in self.table}
        self.by_short = {o.short: o for o in self.table if o.short}


def _lookup_long(name: str, where: str, by_long: dict[str, Opt] = BY_LONG) -> Opt:
    """getopt_long: an exact name, else the one option this is a unique prefix of."""
    opt = by_long.get(name)
    if opt is not None:
        return opt
    hits = [o for long, o in by_long.items() if long.startswith(name)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise OptionError(f"unrecognized option '--{name}'{where}")
    names = " ".join(f"'--{o.long}'" for o in hits)
    raise OptionError(f"option '--{name}' is ambiguous; possibilities: {names}{where}")


def store(values: dict[str, object], opt: Opt, value: object) -> None:
    """One option's value among `values`, under the name of its setting (repeats that add up
    joined)."""
    key, flag_value = _SAME.get(opt.long, (opt.long, None))
    if flag_value is not None:
        value = flag_value
    if key != opt.long:
        opt = BY_LONG[key]
    if opt.long in _ADDITIVE and isinstance(value, str) and opt.long in values:
        value = f"{values[opt.long]},{value}"
    values[opt.long] = value


def parse(words: Iterable[str], *, where: str = "", positional: bool = True,
          options: Options | None = None) -> tuple[dict[str, object], list[str]]:
    """Options as getopt_long reads them: ({long name: value}, the words after them).

    A value is the argument text, True for a flag, or None for an optional argument not given.
    The first word that is not an option ends them (the script and its arguments); with
    `positional=False` (a script line) such a word is an error. `where` goes into messages.
    `options`: another command's table (default: sbatch's)."""
    by_long = options.by_long if options is not None else BY_LONG
    by_short = options.by_short if options is not None else BY_SHORT
    words = list(words)
    values: dict[str, object] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return values, words[i + 1:]
        if not word.startswith("-") or word == "-":
            if positional:
                return values, words[i:]
            raise OptionError(f"invalid directive {word!r}{where}: not an option")
        i += 1
        if word.startswith("--"):
            i = _long_option(word, words, i, values, where, by_long)
        else:
            i = _short_options(word, words, i, values, where, by_short)
    return values, []


def _long_option(word: str, words: list[str], i: int, values: dict[str, object], where: str,
                 by_long: dict[str, Opt]) -> int:
    """`--name[=value]` (its value the next word, words[i], where it needs one): the index of
    the word after it."""
    name, eq, text = word[2:].partition("=")
    opt = _lookup_long(name, where, by_long)
    if opt.arg == NO:
        if eq:
            raise OptionError(f"option '--{opt.long}' doesn't allow an argument{where}")
        store(values, opt, True)
    elif opt.arg == OPTIONAL:  # an empty one is none (slurm_process_option)
        store(values, opt, text if eq and text else None)
    elif eq:
        store(values, opt, text)
    elif i < len(words):
        store(values, opt, words[i])
        i += 1
    else:
        raise OptionError(f"option '--{opt.long}' requires an argument{where}")
    return i


def _short_options(word: str, words: list[str], i: int, values: dict[str, object], where: str,
                   by_short: dict[str, Opt]) -> int:
    """A cluster of short options: -Hv, -N2, -N 2 (its value the next word, words[i]): the
    index of the word after it."""
    j = 1
    while j < len(word):
        letter = word[j]
        opt = by_short.get(letter)
        if opt is None:
            raise OptionError(f"invalid option -- '{letter}'{where}")
        rest = word[j + 1:]
        if opt.arg == NO:
            store(values, opt, True)
            j += 1
            continue
        if rest:
            store(values, opt, rest)
        elif opt.arg == OPTIONAL:
            store(values, opt, None)
        elif i < len(words):
            store(values, opt, words[i])
            i += 1
        else:
            raise OptionError(f"option requires an argument -- '{letter}'{where}")
        break
    return i


def arg(v: Mapping[str, object], name: str) -> str:
    """Option `name`'s argument as text, "" when not given (the readers keep an option's
    argument as its text, True and False only for flags)."""
    value = v.get(name)
    return "" if value is None else str(value)


# -- parse_int: the options Slurm 22.05 reads as whole numbers ----------------------------------
# (src/common/proc_args.c parse_int, called from src/common/slurm_opt.c): strtol in base 10, the
# whole word, never negative, and above zero where the option asks for a count. A refused word is
# `Invalid numeric value "X" for --name.` and exit 1 (parse_int exits itself), whatever the
# option means to Ranch. Shared by rbatch, ralloc and rrun.

# long name -> (the name parse_int says, positive)
INT_OPTIONS: dict[str, tuple[str, bool]] = {
    "core-spec": ("--core-spec", False), "cores-per-socket": ("--cores-per-socket", True),
    "cpus-per-gpu": ("--cpus-per-gpu", True), "cpus-per-task": ("--cpus-per-task", True),
    "immediate": ("immediate", False), "jobid": ("--jobid", True),
    "threads": ("--threads", True), "mincpus": ("--mincpus", True),
    "msg-timeout": ("--msg-timeout", True), "ntasks": ("--ntasks", True),
    "ntasks-per-core": ("--ntasks-per-core", True), "ntasks-per-node": ("--ntasks-per-node", True),
    "ntasks-per-socket": ("--ntasks-per-socket", True),
    "ntasks-per-gpu": ("--ntasks-per-gpu", True), "relative": ("--relative", False),
    "sockets-per-node": ("--sockets-per-node", True), "thread-spec": ("--thread-spec", True),
    "threads-per-core": ("--threads-per-core", True),
    "wait-all-nodes": ("--wait-all-nodes", False),
}
_SPACE = " \t\n\v\f\r"


def strtol_whole(text: str) -> int | None:
    """strtol(text, &end, 10) when `end` reaches the end of the word, else None (C's rules:
    leading white space, one sign, then digits; nothing after)."""
    s = text.lstrip(_SPACE)
    body = s[1:] if s[:1] in "+-" else s
    if not body:
        return 0 if not text else None  # "" : strtol reads nothing and stops at the end
    if not body.isascii() or not body.isdigit():
        return None
    return int(s)


def check_int(name: str, value: object) -> None:
    """Refuse `value` of option `name` as parse_int does (names it does not read pass)."""
    spec = INT_OPTIONS.get(name)
    if spec is None or not isinstance(value, str):
        return
    said, positive = spec
    n = strtol_whole(value)
    if n is None or n < 0 or (positive and n <= 0):
        from ranch.cli.controller import CliError

        raise CliError(f'Invalid numeric value "{value}" for {said}.')


def check_ints(values: dict) -> None:
    for name, value in values.items():
        check_int(name, value)


def _str_to_nodes(text: str) -> tuple[int, str]:
    """proc_args.c _str_to_nodes: strtol's number (-1 where there are no digits), times 1024
    for a k and 1048576 for an m after it; and what is left over."""
    s = text.lstrip(_SPACE)
    sign = s[:1] if s[:1] in "+-" else ""
    i = len(sign)
    while i < len(s) and "0" <= s[i] <= "9":
        i += 1
    if i == len(sign):
        return -1, text
    num, rest = int(s[:i]), s[i:]
    if rest[:1] in ("k", "K"):
        num, rest = num * 1024, rest[1:]
    if rest[:1] in ("m", "M"):
        num, rest = num * 1024 * 1024, rest[1:]
    return num, rest


def node_count(text: str) -> tuple[int, int]:
    """-N MIN[-MAX] as Slurm 22.05 reads it (proc_args.c verify_node_count): (min, max), max 0
    where no maximum was given; `2k` is 2048, a missing minimum (`-1`) is 1. A refused word is
    the launchers' usage error (slurm_opt.c's exit(-1)), in Slurm's words."""
    from ranch.cli.controller import LAUNCHER_USAGE, CliError

    low, dash, high = text.partition("-")
    n_min, left = _str_to_nodes(low)
    if left.strip(_SPACE):
        raise CliError(f'"{low}" is not a valid node count', code=LAUNCHER_USAGE)
    if not dash:
        if n_min < 0:
            raise CliError(f'"{text}" is not a valid node count', code=LAUNCHER_USAGE)
        n_max = n_min
    else:
        n_min = n_min if n_min >= 0 else 1
        n_max, left = _str_to_nodes(high)
        if left.strip(_SPACE):
            raise CliError(f'"{high}" is not a valid node count', code=LAUNCHER_USAGE)
    if n_max and n_max < n_min:
        raise CliError(f"Maximum node count {n_max} is less than minimum node count {n_min}",
                       code=LAUNCHER_USAGE)
    return n_min, n_max
