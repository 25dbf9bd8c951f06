"""The value matrix's cases: every option of the Slurm 22.05 man pages (man_options.py) crossed
with the value forms its kind of argument takes, derived from Slurm's parsers' rules
(src/common/parse_time.c time_str2secs, src/common/proc_args.c, slurm_opt.c), not written out
one at a time: each documented form, the boundaries and carries, abbreviations (of option names
and of value words), the empty value and an invalid one."""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass

from tests.conformance.man_options import NO, OPTIONAL, REQUIRED, ManOption, read

COMMANDS = ("sbatch", "srun", "salloc", "squeue", "sinfo", "scancel", "scontrol", "sacct",
            "sshare", "sacctmgr")
UNKNOWN_JOB = "999999"  # an id neither system has given out in the matrix's run

# What each command's case runs around its option: (before, after). `{base}` is the id of a
# held job submitted on each side before the cases run.
FRAME: dict[str, tuple[list[str], list[str]]] = {
    # a held job: parsed by sbatch and slurmctld, its record compared, never run
    "sbatch": (["-H"], ["job.sh"]),
    # a job that does not exist: srun parses every option, then asks for that allocation
    "srun": ([f"--jobid={UNKNOWN_JOB}"], ["true"]),
    # a partition neither has: salloc parses every option, then slurmctld refuses the job
    # (-I: a case that names the real partition is granted at once or given up, never waits)
    "salloc": (["-I", "--no-shell", "-p", "nosuch"], []),
    "squeue": ([], ["-j", "{base}"]),
    "sinfo": ([], []),
    "scancel": ([], [UNKNOWN_JOB]),
    "scontrol": ([], ["show", "partition", "main"]),
    "sacct": (["-c"], ["-j", UNKNOWN_JOB]),
    "sshare": ([], []),
    "sacctmgr": ([], ["list", "account"]),
}

# Commands whose every case's output is compared (the same on two clusters of one shape)
OUTPUT_COMPARED = frozenset({"sshare", "sacctmgr"})

# Options a case cannot run in this frame, with why (each is still listed, so a man page
# option is never silently missing).
EXCLUDED: dict[tuple[str, str], str] = {
    ("sbatch", "wait"): "waits for the job to end; the matrix's jobs are held, so it never would",
    ("squeue", "iterate"): "repeats for ever",
    ("sinfo", "iterate"): "repeats for ever",
    ("srun", "pty"): "needs a terminal",
    ("salloc", "bell"): "",  # placeholder removed below; keeps the table's shape obvious
}
EXCLUDED.pop(("salloc", "bell"))

# Which options' values are read as what (Slurm's parser for each, by its option name).
TIME_OPTS = {"time", "time-min"}
DATE_OPTS = {"begin", "deadline", "starttime", "endtime"}
SIZE_OPTS = {"mem", "mem-per-cpu", "mem-per-gpu", "tmp"}
INT_META = re.compile(r"^<(number|ncpus|num|n|ntasks|cores|sockets|threads|minutes|seconds|count|"
                      r"value|uid|priority|adjustment)>$|^(adjustment|off)$")
NODELIST_OPTS = {"nodelist", "exclude", "nodes"}  # `nodes` only where it is a hostlist (sinfo -n)


@dataclass(frozen=True)
class Case:
    command: str
    option: str  # the option's long name (or its letter where it has none)
    form: str  # what this case tries, for the report: `--time=0:600`, `-t 5`, `--ti=5`
    argv: tuple[str, ...]  # the whole command line, the frame's words around the option
    compare_output: bool = False  # its stdout is compared too (format tokens)

    @property
    def key(self) -> str:
        return f"{self.command} {self.form}"


# -- value forms, by kind -------------------------------------------------------------------

def time_forms() -> list[str]:
    """time_str2secs' forms (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) with each field set to each
    boundary (0, 1, 59, 60, 75, 600: the carries Slurm does), the words for no limit, and the
    shapes its _is_valid_timespec refuses."""
    fields = ("0", "1", "59", "60", "75", "600")
    out: list[str] = []
    for template in ("{}", "{}:{}", "{}:{}:{}", "{}-{}", "{}-{}:{}", "{}-{}:{}:{}"):
        n = template.count("{}")
        for pos, value in itertools.product(range(n), fields):
            parts = ["1"] * n
            parts[pos] = value
            out.append(template.format(*parts))
    out += ["00:01:00", "0:0", "0-0", "00", "UNLIMITED", "unlimited", "INFINITE", "Infinite", "-1",
            "unlim", "", "abc", "1.5", "1:2:3:4", "1-2-3", ":5", "5:", "1-", "-5", " 5", "+5",
            "1-:5", "1::5", "5m", "1h"]
    return list(dict.fromkeys(out))


DATE_FORMS = ["now", "now+60", "now+60seconds", "now+5minutes", "now+1hour", "now+2days",
              "now+1week", "now+1", "16:00", "16:00:30", "midnight", "noon", "elevenses", "fika",
              "teatime", "today", "tomorrow", "2030-01-02", "2030-01-02T10:00",
              "2030-01-02T10:00:00", "01/02/30", "010230", "", "abc", "now+", "now+1x",
              "25:00", "2030-13-01", "now-60"]
SIZE_FORMS = ["0", "1", "100", "100K", "100k", "100M", "1G", "1g", "1T", "1P", "100KB", "100MB",
              "1.5G", "1X", "-1", "+1", "1M1", "", "abc", "0M", "999999999"]
INT_FORMS = ["0", "1", "2", "3", "5", "100", "-1", "+1", "01", "1k", "1K", "0x2", "1.5", "abc", "",
             " 1", "2 "]
NODES_FORMS = ["1", "2", "3", "1-2", "2-1", "0", "0-1", "1-", "-1", "1-3", "2-2", "1,2", "1:2",
               "abc", "", "1k", "1-2-3"]
SIGNAL_FORMS = ["USR1", "SIGUSR1", "usr1", "10", "R:USR1", "B:USR1", "RB:USR1", "USR1@30",
                "B:USR1@30", "SIGUSR1@0", "USR1@-1", "0", "64", "65", "BOGUS", "", "USR1@",
                "@30", "X:USR1", "TERM", "KILL", "HUP", "9"]
HOSTLIST_FORMS = ["c1", "c2", "c[1-2]", "c1,c2", "c3", "c[1-", "", "nosuch", "c[2,1]"]
PATTERN_FORMS = ["out.txt", "%j.out", "%x_%A_%a.out", "%%", "%N_%n_%t_%u", "\\%j", "sub/%j",
                 "/nonexistent/dir/x", "", "%q", "%5j", "none"]
USER_FORMS = ["root", "0", "nobody", "nosuchuser", "", "root,nobody"]
STRING_FORMS = ["x", "", "main", "a,b", "a b"]
PARTITION_FORMS = ["main", "nosuch", "", "main,main", "MAIN"]


def expand_word(word: str) -> list[str]:
    """The forms a documented word stands for: `q[uiet]` is `q` and `quiet`, `[no]multithread`
    both with and without `no`, `map_cpu:<list>` with a list, `####` a number."""
    word = word.replace("\\", "")
    if not re.fullmatch(r"[\w\[\]<>#%*:=@.,+-]+", word):
        return []
    word = re.sub(r"<[^>]*>", "0", word)
    word = word.replace("####", "1000000")
    m = re.fullmatch(r"\[(\w+)\](\w+)", word)
    if m:
        return [m.group(2), m.group(1) + m.group(2)]
    m = re.fullmatch(r"(\w+)\[(\w+)\](.*)", word)
    if m:
        return [m.group(1) + m.group(3), m.group(1) + m.group(2) + m.group(3)]
    return [word.strip("[]")]


def words_forms(words: list[str]) -> list[str]:
    forms: list[str] = []
    for w in words:
        forms += expand_word(w)
    forms = list(dict.fromkeys(f for f in forms if f))
    if not forms:
        return []
    out = forms + [f.upper() for f in forms if f.upper() != f][:4]
    if len(forms) >= 2:
        out.append(f"{forms[0]},{forms[1]}")
    return [*dict.fromkeys(out), "bogus", ""]


def format_forms(command: str) -> list[str]:
    """squeue's and sinfo's `-o` letters (their format tables take %a-%z and %A-%Z, each
    with a width, right-justified with `.` or left with `-`), and the bad ones."""
    out = []
    for letter in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
        out += [f"%{letter}", f"%.6{letter}", f"%-6{letter}"]
    return [*out, "%all", "", "%", "%%", "x%iy"]


def Format_forms(opt: ManOption) -> list[str]:
    out = []
    for w in opt.words:
        w = w.replace("\\f3", "").strip()
        if re.fullmatch(r"[A-Za-z][A-Za-z_]+", w) and w not in ("size", "suffix", "sufix"):
            out += [w, f"{w}:7"]
    return [*dict.fromkeys(out), "bogus", ""]


def kind_forms(command: str, opt: ManOption) -> tuple[list[str], bool]:
    """The values to try for `opt` of `command`, and whether its output is compared."""
    name, meta = opt.long, opt.metavar.lower()
    if name == "format" and command in ("squeue", "sinfo"):
        return format_forms(command), True
    if name == "Format":
        return Format_forms(opt), True
    if name in TIME_OPTS:
        return time_forms(), False
    if name in DATE_OPTS:
        return DATE_FORMS, False
    if name in SIZE_OPTS:
        return SIZE_FORMS, False
    if name == "nodes" and "minnodes" in meta:
        return NODES_FORMS, False
    if name == "signal":
        return SIGNAL_FORMS, False
    if name in NODELIST_OPTS or "node_name_list" in meta or "hostlist" in meta:
        return HOSTLIST_FORMS, False
    if "pattern" in meta:
        return PATTERN_FORMS, False
    if name in ("partition",):
        return PARTITION_FORMS, False
    if name in ("user", "users", "uid", "mail-user") or "user" in meta:
        return USER_FORMS, False
    if INT_META.match(meta) or name in ("immediate", "kill-command", "nice", "no-kill"):
        forms = INT_FORMS
        if opt.words:
            forms = words_forms(opt.words) + INT_FORMS
        return list(dict.fromkeys(forms)), False
    if opt.words:
        forms = words_forms(opt.words)
        if forms:
            return forms, False
    return STRING_FORMS, False


# -- the cases ------------------------------------------------------------------------------

def _prefixes(options: list[ManOption]) -> dict[str, str]:
    """The shortest unique prefix of each long name (getopt_long takes any unique prefix),
    where it is shorter than the name."""
    names = [o.long for o in options if o.long]
    out = {}
    for n in names:
        for i in range(2, len(n)):
            if sum(1 for m in names if m.startswith(n[:i])) == 1:
                out[n] = n[:i]
                break
    return out


# srun and salloc read their options with sbatch's code (slurm_opt.c): they get a sample of the
# forms sbatch gets in full (the first, the carries where there are any,
# the empty value and the invalid ones at the end), so the matrix stays within its minutes.
SHARED_SAMPLE = 7
CARRIES = ("0:600", "1:75:00", "0:90", "1:59:60")


def _sample(forms: list[str]) -> list[str]:
    if len(forms) <= SHARED_SAMPLE:
        return forms
    keep = [forms[0], *(f for f in forms if f in CARRIES), *forms[-(SHARED_SAMPLE - 1):]]
    return list(dict.fromkeys(keep))


def cases_for(command: str) -> list[Case]:
    options = read(command)
    shared = {o.long for o in read("sbatch")} if command in ("srun", "salloc") else set()
    before, after = FRAME[command]
    prefixes = _prefixes(options)
    out: list[Case] = []

    def add(opt: ManOption, form: str, words: list[str], compare: bool = False) -> None:
        compare = compare or command in OUTPUT_COMPARED
        out.append(Case(command, opt.long or opt.short, form, (command, *before, *words, *after),
                        compare))

    for opt in options:
        if (command, opt.long or opt.short) in EXCLUDED:
            continue
        long = f"--{opt.long}" if opt.long else ""
        short = f"-{opt.short}" if opt.short else ""
        if opt.arg == NO:
            for flag in (long, short):
                if flag:
                    add(opt, flag, [flag])
            if long:
                add(opt, f"{long}=1", [f"{long}=1"])
            if opt.long in prefixes:
                add(opt, f"--{prefixes[opt.long]}", [f"--{prefixes[opt.long]}"])
            continue
        forms, compare = kind_forms(command, opt)
        if shared or (command, opt.long) == ("sbatch", "time-min"):  # time-min: --time's parser
            forms = _sample(forms)
        if opt.arg == OPTIONAL:
            if long:
                add(opt, long, [long])
            if short:
                add(opt, short, [short])
        for value in forms:
            if long:
                add(opt, f"{long}={value}", [f"{long}={value}"], compare)
            elif short:
                add(opt, f"{short} {value}", [short, value], compare)
        first = next((v for v in forms if v), "")
        if opt.arg == REQUIRED and short and long:
            add(opt, f"{short} {first}", [short, first], compare)
            add(opt, f"{short}{first}", [f"{short}{first}"], compare)
            add(opt, short, [short])  # a required argument missing (or the next word taken)
        if opt.arg == REQUIRED and long:
            add(opt, f"{long} {first}", [long, first], compare)
        if opt.long in prefixes:
            p = prefixes[opt.long]
            add(opt, f"--{p}={first}" if opt.arg != NO else f"--{p}",
                [f"--{p}={first}" if opt.arg != NO else f"--{p}"], compare)
    # no option at all, an unknown one, and a word where an option is expected
    empty = ManOption("", "", NO, "")
    out.append(Case(command, "(none)", "(none)", (command, *before, *after)))
    add(empty, "--bogus-option", ["--bogus-option"])
    add(empty, "-Z", ["-Z"])
    return out


def selected() -> tuple[str, ...]:
    """The commands the matrix runs: all, or those RANCH_MATRIX_COMMANDS names (comma-separated,
    e.g. `squeue,sinfo`: one command's part while working on it)."""
    wanted = [c for c in os.environ.get("RANCH_MATRIX_COMMANDS", "").split(",") if c]
    unknown = sorted(set(wanted) - set(COMMANDS))
    if unknown:
        raise ValueError(f"RANCH_MATRIX_COMMANDS: no such command {', '.join(unknown)}")
    return tuple(c for c in COMMANDS if not wanted or c in wanted)


def all_cases() -> list[Case]:
    cases: list[Case] = []
    for command in selected():
        cases += cases_for(command)
    return cases


if __name__ == "__main__":
    import collections

    cases = all_cases()
    print(len(cases), collections.Counter(c.command for c in cases))
