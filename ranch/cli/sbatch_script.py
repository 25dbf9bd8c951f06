"""What sbatch 22.05 reads from a batch script besides the commands: `#SBATCH` lines, `#PBS`
lines (translated to sbatch's options as src/sbatch/opt.c's _set_pbs_options and
_parse_pbs_resource_list map them), its refusal of DOS line breaks, and --array's index
syntax as slurmctld's _parse_array_tok reads it (job_mgr.c)."""

from __future__ import annotations

from ranch.cli.controller import CliError
from ranch.cli.sbatch_options import OptionError

DOS_BREAKS = ("Batch script contains DOS line breaks (\\r\\n)\n"
              "{prog}: error: instead of expected UNIX line breaks (\\n).")
INVALID_ARRAY = "Batch job submission failed: Invalid job array specification"
# getopt's string of _set_pbs_options: letters that take a value
PBS_WITH_VALUE = frozenset("aAcCejJklmMNopqrStuvW")
PBS_FLAGS = frozenset("hIVz")
# letters sbatch reads and then ignores (PBS options with no Slurm meaning)
PBS_IGNORED = frozenset("cCIjkrSuVz")
PBS_MAIL = {"a": "FAIL", "b": "BEGIN", "e": "END", "n": "NONE"}


def check_line_breaks(script: str, prog: str) -> None:
    """sbatch refuses a script holding \\r\\n anywhere (exit 1), with two error lines."""
    if "\r\n" in script:
        raise CliError(DOS_BREAKS.format(prog=prog))


def directive_lines(script: str, tag: str) -> list[tuple[int, str]]:
    """(line number, text after the tag) of each line that starts with `tag` exactly (no blank
    before it: ` #SBATCH` is a comment; `#SBATCH-J x` is an option), read until the first
    line that is neither blank nor a comment, as sbatch's _opt_batch_script reads them."""
    out: list[tuple[int, str]] = []
    for n, line in enumerate(script.split("\n")):
        if n == 0 and line.startswith("#!"):
            continue
        if line.startswith(tag):
            out.append((n + 1, line[len(tag):]))
            continue
        s = line.lstrip()
        if s and not s.startswith("#"):
            break
    return out


def directive_words(script: str, tags: tuple[str, ...]) -> list[tuple[int, list[str]]]:
    """(line number, words) of the option lines (`#SBATCH ...`) before the first command, as
    sbatch reads them (directive_lines: the tag at the line's start, `#` a comment)."""
    out: list[tuple[int, list[str]]] = []
    for tag in tags:
        for n, text in directive_lines(script, tag):
            try:
                out.append((n, split_words(text)))
            except ValueError as exc:
                raise OptionError(f"script line {n}: {exc}: {tag}{text}") from None
    return sorted(out, key=lambda item: item[0])


def split_words(text: str) -> list[str]:
    """A directive's words as sbatch's _get_argument splits them: blanks apart, quotes
    grouped, a `#` starting a word ends the line."""
    import shlex  # here: it imports re, which a script without options spares

    lex = shlex.shlex(text, posix=True, punctuation_chars=False)
    lex.whitespace_split = True
    lex.commenters = ""
    words = []
    for word in lex:
        if word.startswith("#"):
            break
        words.append(word)
    return words


def pbs_words(script: str) -> list[str]:
    """The sbatch options the script's `#PBS` lines stand for."""
    out: list[str] = []
    for line, text in directive_lines(script, "#PBS"):
        try:
            words = split_words(text)
        except ValueError as exc:
            raise CliError(f"script line {line}: {exc}: #PBS{text}") from None
        i = 0
        while i < len(words):
            word = words[i]
            i += 1
            if not word.startswith("-") or len(word) < 2:
                break  # getopt's "+": the first non-option ends the options
            for j, letter in enumerate(word[1:], 1):
                if letter in PBS_FLAGS:
                    if letter == "h":
                        out.append("--hold")
                    continue
                if letter not in PBS_WITH_VALUE:
                    raise CliError(f"script line {line}: invalid #PBS option -- '{letter}'")
                value = word[j + 1:]
                if not value:
                    if i >= len(words):
                        raise CliError(f"script line {line}: #PBS option -{letter} requires "
                                       "an argument")
                    value, i = words[i], i + 1
                out += _pbs_option(letter, value)
                break
    return out


def _pbs_option(letter: str, value: str) -> list[str]:
    simple = {"A": "--account", "e": "--error", "o": "--output", "N": "--job-name",
              "q": "--partition", "M": "--mail-user", "p": "--nice", "J": "--array",
              "t": "--array", "v": "--export", "a": "--begin"}
    if letter in simple:
        return [f"{simple[letter]}={value}"]
    if letter == "m":
        kinds = [PBS_MAIL[c] for c in value if c in PBS_MAIL]
        return [f"--mail-type={','.join(kinds)}"] if kinds else []
    if letter == "l":
        return _pbs_resources(value)
    if letter == "W":
        out = []
        for item in value.split(","):
            key, _, v = item.partition("=")
            if key.strip().lower() == "depend":
                out.append(f"--dependency={v}")
        return out
    return []  # PBS_IGNORED


def _pbs_resources(text: str) -> list[str]:
    """-l's comma list: walltime/cput (time), nodes=N[:ppn=K], procs/mppwidth (tasks),
    ncpus (CPUs a node at least), mem (per node), pmem (per CPU), naccesspolicy=singlejob
    (exclusive), select (nodes)."""
    out: list[str] = []
    for item in text.split(","):
        key, _, value = item.partition("=")
        key = key.strip().lower()
        if key in ("walltime", "cput"):
            out.append(f"--time={value}")
        elif key == "nodes":
            parts = value.split(":")
            if parts[0].isdigit():
                out.append(f"--nodes={parts[0]}")
            for part in parts[1:]:
                k, _, v = part.partition("=")
                if k.lower() == "ppn" and v.isdigit():
                    out.append(f"--ntasks-per-node={v}")
        elif key in ("procs", "mppwidth"):
            out.append(f"--ntasks={value}")
        elif key == "mppnppn":
            out.append(f"--ntasks-per-node={value}")
        elif key == "mppdepth":
            out.append(f"--cpus-per-task={value}")
        elif key == "ncpus":
            out.append(f"--mincpus={value}")
        elif key == "select":
            out.append(f"--nodes={value.split(':')[0]}")
        elif key in ("mem", "pmem"):
            size = _pbs_size(value)
            if size:
                out.append(f"--{'mem' if key == 'mem' else 'mem-per-cpu'}={size}")
        elif key == "naccesspolicy" and value.lower() == "singlejob":
            out.append("--exclusive")
    return out


def _pbs_size(text: str) -> str:
    """PBS's size (NUMBER[b|kb|mb|gb|tb], bytes by default) in sbatch's words."""
    t = text.strip().lower()
    digits = t.rstrip("bkmgt")
    unit = t[len(digits):].rstrip("b")
    if not digits.isdigit():
        return ""
    n = int(digits)
    if unit == "":
        return f"{max(1, -(-n // 1024))}K" if n else ""
    return f"{n}{unit.upper()}"


def array_spec(text: str) -> str:
    """--array as slurmctld reads it: comma-separated FIRST[-LAST[:STEP]] (an element may sit
    in brackets, empty elements are skipped), an optional %LIMIT; refused with slurmctld's
    words, exit 1. Returned written plainly (`[1-3]` is `1-3`) for the controller."""
    spec, pct, limit = text.partition("%")
    parts = [_array_token(tok) for tok in spec.split(",") if tok]
    if not parts:
        raise CliError(INVALID_ARRAY)
    return ",".join(parts) + (pct + limit)


def _array_token(tok: str) -> str:
    if tok.startswith("["):
        tok = tok[1:]
    first, rest = _strtol(tok)
    rest = rest[1:] if rest.startswith("]") else rest
    if first < 0:
        raise CliError(INVALID_ARRAY)
    if not rest:
        return str(first)
    if not rest.startswith("-"):
        raise CliError(INVALID_ARRAY)
    last, rest = _strtol(rest[1:])
    rest = rest[1:] if rest.startswith("]") else rest
    step = 1
    if rest.startswith(":"):
        n, rest = _strtol(rest[1:])
        rest = rest[1:] if rest.startswith("]") else rest
        step = n
        if rest or step <= 0:
            raise CliError(INVALID_ARRAY)
    elif rest:
        raise CliError(INVALID_ARRAY)
    if last < first:
        raise CliError(INVALID_ARRAY)
    return f"{first}-{last}" + (f":{step}" if step != 1 else "")


def _strtol(text: str) -> tuple[int, str]:
    """strtol(text, &end, 10): the number and what follows it (0 and all of it: no digits)."""
    i = len(text) - len(text.lstrip(" \t\n\v\f\r"))
    j = i + (1 if text[i:i + 1] in ("+", "-") else 0)
    k = j
    while k < len(text) and text[k].isdigit():
        k += 1
    if k == j:
        return 0, text
    return int(text[i:k]), text[k:]


def array_env(spec: str) -> dict[str, str]:
    """SLURM_ARRAY_TASK_COUNT/_MIN/_MAX/_STEP of an array (`spec` as array_spec wrote it):
    every task sees them; the step is the first element's `:STEP` (measured: `1-5:2` has 2,
    `2,6,10` has 1)."""
    ids: set[int] = set()
    step = 0
    for tok in spec.partition("%")[0].split(","):
        rng, _, by = tok.partition(":")
        first, _, last = rng.partition("-")
        ids.update(range(int(first), int(last or first) + 1, int(by or 1)))
        if by and not step:
            step = int(by)
    return {"SLURM_ARRAY_TASK_COUNT": str(len(ids)), "SLURM_ARRAY_TASK_MIN": str(min(ids)),
            "SLURM_ARRAY_TASK_MAX": str(max(ids)), "SLURM_ARRAY_TASK_STEP": str(step or 1)}
