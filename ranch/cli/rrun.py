"""rrun (srun): run a command's tasks across a job's nodes, as a job step; outside a job, in an
allocation made for it (cli/allocation.py).

Inside an allocation (SLURM_JOB_ID, or --jobid) rrun asks rctld for a step, listens for the step's
nodes, and prints what their tasks write (cli/step_launch.py, cli/step_io.py); sizes it is not
given come from the allocation's SLURM_* variables, as srun takes them. This module reads and
checks rrun's command line.
"""

from __future__ import annotations

import os
import sys
import time

from ranch.cli import quickargs
from ranch.cli.controller import LAUNCHER_USAGE, CliError, find_target, run_main
from ranch.cli.quickargs import SUPPRESS, Table
from ranch.cli.slurm_names import prog, version_text

TYPE_CHECKING = False  # typing and argparse stay off rrun's start
if TYPE_CHECKING:
    import argparse

# srun's --cpu-bind words (src/common/slurm_resource_info.c slurm_verify_cpu_bind), any case
BIND_WORDS = frozenset({"q", "quiet", "v", "verbose", "one_thread", "no", "none", "rank",
                        "rank_ldom", "socket", "sockets", "core", "cores", "thread", "threads",
                        "ldom", "ldoms", "help"})
# srun 22.05's --mpi words: Debian's slurm-wlm plugins (mpi_*.so) and `list`, case and all.
# Ranch wires none of them (its tasks start as with none): a tool's choice is taken, not acted on
MPI_TYPES = frozenset({"none", "pmi2", "pmix", "pmix_v4", "cray_shasta", "list"})
BIND_LISTS = ("map_cpu", "mapcpu", "mask_cpu", "maskcpu", "map_ldom", "mapldom", "mask_ldom",
              "maskldom")


def _is_value(text: str) -> bool:
    """slurm_resource_info.c _isvalue: a list item after a comma (a number, or hex digits up
    to the next comma), not the next bind word."""
    if text[:1].isdigit():
        return True
    i = 0
    while i < len(text) and text[i] in "0123456789abcdefABCDEF":
        i += 1
    return i == len(text) or text[i] == ","


def bind_problem(text: str) -> str | None:
    """srun's complaint about a --cpu-bind value, or None: every comma-separated word is
    checked (a comma before a list item belongs to the map/mask list)."""
    tokens, current = [], ""
    for i, ch in enumerate(text):
        if ch == "," and not _is_value(text[i + 1 :]):
            tokens.append(current)
            current = ""
        else:
            current += ch
    tokens.append(current)
    for tok in tokens:
        low = tok.lower()
        if low in BIND_WORDS:
            continue
        head = next((w for w in BIND_LISTS if low.startswith(w)), None)
        if head is None:
            return f'unrecognized --cpu-bind argument "{tok}"'
        parts = tok.replace("=", ":").split(":")
        if len(parts) < 2 or not parts[1]:
            return f'missing list for "--cpu-bind={head}:<list>"'
    return None


OPTIONS: Table = (
    (("--help", "-h"), {"action": "help", "help": "show this help and exit"}),
    (("-n", "--ntasks"), {"type": int, "default": 0, "metavar": "N", "help": "number of tasks"}),
    (("-N", "--nodes"), {"default": None, "metavar": "N[-M]", "help": "number of nodes"}),
    (("--ntasks-per-node",), {"type": int, "default": 0, "metavar": "N",
                              "help": "tasks on each node"}),
    (("-c", "--cpus-per-task"), {"type": int, "default": 0, "metavar": "N",
                                 "help": "CPUs of each task"}),
    (("--gpus-per-task",), {"type": int, "default": 0, "metavar": "N",
                            "help": "GPUs of each task"}),
    (("--gpus-per-node",), {"type": int, "default": 0, "metavar": "N",
                            "help": "GPUs on each node"}),
    (("-G", "--gpus"), {"type": int, "default": 0, "metavar": "N",
                        "help": "GPUs of the step (outside a job)"}),
    (("-w", "--nodelist"), {"default": "", "metavar": "HOSTLIST", "help": "run on these nodes"}),
    (("-x", "--exclude"), {"default": "", "metavar": "HOSTLIST",
                           "help": "not on these nodes (new jobs)"}),
    (("-l", "--label"), {"action": "store_true",
                         "help": "prefix each line with its task number"}),
    (("-u", "--unbuffered"), {"action": "store_true",
                              "help": "print output as it comes, not by line"}),
    (("-o", "--output"), {"default": "", "metavar": "PATTERN",
                          "help": "tasks' stdout to files (%%t %%j ...)"}),
    (("-e", "--error"), {"default": "", "metavar": "PATTERN", "help": "tasks' stderr to files"}),
    (("-i", "--input"), {"default": "", "metavar": "MODE",
                         "help": "stdin: all (default), none, a task id, or a file pattern"}),
    # srun's -K takes its optional value only attached (-K0, --kill-on-bad-exit=1): run()
    # turns those forms into --kill-on-bad-exit-value, so `-K sh` leaves sh to the command
    (("-K", "--kill-on-bad-exit"), {"action": "store_const", "const": 1, "default": 0,
                                    "help": "end the step when a task exits non-zero "
                                            "(-K0: do not)"}),
    (("--kill-on-bad-exit-value",), {"dest": "kill_on_bad_exit", "type": int,
                                     "help": SUPPRESS}),
    (("--cpu-bind",), {"default": None, "metavar": "TYPE",
                       "help": "accepted: none (Ranch binds nothing)"}),
    (("--exclusive",), {"action": "store_true",
                        "help": "CPUs no other step uses (implies --exact)"}),
    (("--exact",), {"action": "store_true", "help": "hold only the CPUs asked for (implied by "
                    "-c); without it a step holds every free CPU of the job on its nodes"}),
    (("--overlap",), {"action": "store_true", "help": "share CPUs with the job's other steps"}),
    (("-J", "--job-name"), {"default": "", "metavar": "NAME",
                            "help": "the step's (and new job's) name"}),
    (("--jobid",), {"type": int, "default": 0, "metavar": "JOBID",
                    "help": "run in this job's allocation"}),
    (("-p", "--partition"), {"default": "", "metavar": "PART", "help": "partition (new jobs)"}),
    (("-t", "--time"), {"default": "", "metavar": "TIME", "help": "time limit (new jobs)"}),
    (("--mem",), {"default": None, "metavar": "SIZE", "help": "memory per node (new jobs)"}),
    (("-D", "--chdir"), {"default": "", "metavar": "DIR",
                         "help": "the tasks' working directory"}),
    (("--mpi",), {"default": None, "metavar": "TYPE",
                  "help": "accepted: none, pmi2, pmix, pmix_v4, cray_shasta (Ranch wires "
                          "none of them)"}),
    (("--export",), {"default": "", "metavar": "VARS",
                     "help": "ALL (default), NONE, or NAME[=VALUE],..."}),
    (("-v", "--verbose"), {"action": "count", "default": 0, "help": "say more"}),
    (("-Q", "--quiet"), {"action": "store_true", "help": "say less"}),
    (("--server",), {"metavar": "HOST:PORT", "help": "controller address (or RANCH_SERVER)"}),
    (("--key-file",), {"metavar": "PATH", "help": "cluster key (or RANCH_KEY_FILE)"}),
    (("--conf",), {"metavar": "PATH", "help": "read controller address and key from this config"}),
    (("-V", "--version"), {"action": "version", "version": lambda: version_text("rrun")}),
    (("command",), {"nargs": "...", "metavar": "COMMAND [ARGS...]"}),  # argparse.REMAINDER
)


def build_parser():  # -> argparse.ArgumentParser
    from ranch.cli import srun_options

    p = quickargs.build(OPTIONS, prog="rrun", add_help=False,
                        description="Run a parallel job step: one command, many tasks.")
    srun_options.add_to(p)  # the rest of srun's options: read and set aside
    return p


def _check_values(args: argparse.Namespace) -> None:
    """The values srun's own parser (slurm_opt.c, sbatch's) refuses before it asks for
    anything, refused the same way here: rrun reads those with rbatch's readers."""
    # The readers load only for a value given: a step's everyday start pays for none of them.
    from ranch.cli.step_launch import nodes_of  # (the step's own module: run() runs it next)

    nodes_of(args.nodes)  # slurm_opt.c reads -N with the other options, before the command
    # The aside_* values exist only where argparse read the command line (srun_options).
    for name, value in (("time", args.time), ("time-min", getattr(args, "aside_time_min", None))):
        if value:
            from ranch.conf.timefmt import parse_minutes

            try:
                parse_minutes(value)
            except ValueError:
                raise CliError(f"Invalid --{name} specification", code=LAUNCHER_USAGE) from None
    for name, value in (("mem", args.mem),
                        ("mem-per-cpu", getattr(args, "aside_mem_per_cpu", None))):
        if value is not None:  # an empty one too: str_to_mbytes refuses it
            from ranch.cli.sbatch_request import size_mib

            size_mib(value, name)
    for name in ("mail_type", "open_mode", "hint", "signal"):
        value = getattr(args, "aside_" + name, None)
        if value is not None:
            from ranch.cli import sbatch_values as sv

            read = {"mail_type": sv.mail_types, "open_mode": sv.open_mode, "hint": sv.hint,
                    "signal": sv.parse_signal}[name]
            read(value)
    begin = getattr(args, "aside_begin", None)
    if begin is not None:
        from ranch.cli.begin_time import BeginError, parse_begin

        try:
            parse_begin(begin, time.time())
        except BeginError as exc:
            raise CliError(str(exc), code=LAUNCHER_USAGE) from None


def _check(args: argparse.Namespace) -> None:
    if not args.command:
        raise CliError("No command given to execute.")
    if args.overlap and args.exclusive:
        raise CliError("--exclusive and --overlap are mutually exclusive", code=LAUNCHER_USAGE)
    if getattr(args, "aside_no_allocate", False) and not args.nodelist:  # srun's _opt_verify
        raise CliError("must specify a node list with -Z, --no-allocate.")
    problem = bind_problem(args.cpu_bind) if args.cpu_bind is not None else None
    if problem:  # srun's fatal(): exit 1
        print(f"{prog('rrun')}: error: {problem}", file=sys.stderr)
        raise CliError("Failed to parse --cpu-bind= values.")
    if args.mpi is not None and args.mpi not in MPI_TYPES:  # srun: exit 1, in two lines
        print(f"{prog('rrun')}: error: Couldn't find the specified plugin name for "
              f"mpi/{args.mpi} looking at all files", file=sys.stderr)
        raise CliError(f"Invalid MPI type '{args.mpi}', --mpi=list for acceptable types")
    for name in ("ntasks", "ntasks_per_node", "cpus_per_task", "gpus_per_task",
                 "gpus_per_node"):
        if getattr(args, name) < 0:
            raise CliError(f"invalid --{name.replace('_', '-')}: must be 0 or more",
                           code=LAUNCHER_USAGE)


def _parse(argv: list[str]):  # -> argparse.Namespace
    """rrun's options: the everyday forms by the quick reader (cli/quickargs.py), the rest (srun's
    options Ranch sets aside, integers to check as Slurm does, --help) by argparse."""
    if _everyday(argv):
        try:
            return quickargs.quick(OPTIONS, _attached_k(argv))
        except quickargs.Declined:
            pass
    from ranch.cli.srun_options import attach_optional, getopt_words

    argv = getopt_words(argv)  # prefixes, parse_int's refusals, optional values: srun's reading
    try:
        return quickargs.quick(OPTIONS, _attached_k(argv))
    except quickargs.Declined:
        pass
    parser = build_parser()
    takes = {s for a in parser._actions for s in a.option_strings if a.nargs != 0}
    return parser.parse_args(_attached_k(attach_optional(argv, takes), takes))


def _everyday(argv: list[str]) -> bool:
    """Whether srun's own reading (srun_options.getopt_words, two modules a step's start would
    load) cannot differ from the quick reader's: each option before the command is one of
    rrun's own written out in full without `=`, and each number a plain count above zero."""
    kinds = {n: kw for names, kw in OPTIONS for n in names if n.startswith("-")}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--" or not word.startswith("-") or word == "-":
            return True
        kw = kinds.get(word)
        if kw is not None and kw.get("action", "store") != "store":
            i += 1
            continue
        if kw is not None and i + 1 < len(argv):
            value = argv[i + 1]
            i += 1
        elif kw is None and not word.startswith("--") and (kw := kinds.get(word[:2])) and \
                kw.get("action", "store") == "store" and len(word) > 2:
            value = word[2:]
        else:
            return False
        if kw.get("type") is int and not (value.isascii() and value.isdigit() and int(value)):
            return False
        i += 1
    return True


def _attached_k(argv: list[str], takes: set[str] | None = None) -> list[str]:
    """-K0 / -K1 / --kill-on-bad-exit=N among rrun's own options (not the command's) as
    --kill-on-bad-exit-value=N. `takes`: the options that take a value (rrun's own table's by
    default)."""
    if takes is None:
        takes = {n for names, kw in OPTIONS if names[0].startswith("-")
                 and kw.get("action", "store") == "store" for n in names}
    out, i = [], 0
    while i < len(argv):
        word = argv[i]
        if word == "--" or not word.startswith("-") or word == "-":
            break
        value = _k_value(word)
        if value is not None:
            out.append(f"--kill-on-bad-exit-value={value}")
        else:
            out.append(word)
            if word in takes and i + 1 < len(argv):
                i += 1
                out.append(argv[i])
        i += 1
    return out + argv[i:]


def _k_value(word: str) -> str | None:
    """N of -KN or --kill-on-bad-exit=N (digits only), else None."""
    for head in ("-K", "--kill-on-bad-exit="):
        if word.startswith(head) and word[len(head):].isdigit() and word[len(head):].isascii():
            return word[len(head):]
    return None


def run(argv: list[str]) -> int:
    args = _parse(list(argv))
    _check_values(args)
    _check(args)
    target = find_target(args.server, args.key_file, args.conf)
    from ranch.cli.step_launch import int_env, run_step

    env = dict(os.environ)
    job_id = args.jobid or int_env(env, "SLURM_JOB_ID", "SLURM_JOBID")
    if job_id:
        return run_step(target, args, job_id, env)
    from ranch.cli.allocation import run_allocated  # outside a job: allocate, run, release

    return run_allocated(target, args, lambda jid, alloc_env: run_step(
        target, args, jid, {**env, **alloc_env}, own=True))


def main(argv: list[str] | None = None) -> int:
    return run_main("rrun", run, argv)


if __name__ == "__main__":
    sys.exit(main())
