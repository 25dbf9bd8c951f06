"""racct: sacct's view of the jobs rctld holds and of its finished-job history: options,
default time window, fields, the `.batch` step lines, -p/-P and --json."""

from __future__ import annotations

import os
import sys
import time

from ranch.cli import quickargs
from ranch.cli.controller import CliError, find_target, no_gc, run_main
from ranch.cli.quickargs import SUPPRESS, Table
from ranch.cli.slurm_names import version_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import SimpleNamespace as Namespace

# sacct -s: its short and long state names
STATE_WORDS = {
    "BF": "BOOT_FAIL", "CA": "CANCELLED", "CD": "COMPLETED", "CF": "CONFIGURING",
    "CG": "COMPLETING", "DL": "DEADLINE", "F": "FAILED", "NF": "NODE_FAIL",
    "OOM": "OUT_OF_MEMORY", "PD": "PENDING", "PR": "PREEMPTED", "R": "RUNNING",
    "RQ": "REQUEUED", "RS": "RESIZING", "RV": "REVOKED", "S": "SUSPENDED", "TO": "TIMEOUT",
}


# sacct 22.05's options (src/sacct/options.c long_options and its getopt string), read as its
# getopt_long reads them (cli/getopt_words.py), then Ranch's own, taken only spelled in full
OPTIONS: Table = (
    (("--help", "-h"), {"action": "help", "help": "show this help and exit"}),
    (("-j", "--jobs"), {"action": "append", "default": [], "metavar": "JOBIDS",
                        "help": "only these jobs: 12, 12_3, 12.batch (comma list; repeatable)"}),
    (("-u", "--user", "--uid"), {"dest": "user", "metavar": "USERS",
                                 "help": "only these users (or uids); -1: every user"}),
    (("-a", "--allusers"), {"action": "store_true", "help": "every user's jobs"}),
    (("-g", "--gid", "--group"), {"dest": "gid", "metavar": "GROUPS",
                                  "help": "only jobs of these groups (or gids)"}),
    (("-s", "--state"), {"metavar": "STATES",
                         "help": "only jobs in these states (CD,F,CA,TO,R,PD...)"}),
    (("-S", "--starttime"), {"metavar": "TIME",
                             "help": "window start (default: midnight; see -j, -s)"}),
    (("-E", "--endtime"), {"metavar": "TIME", "help": "window end (default: now)"}),
    (("-T", "--truncate"), {"action": "store_true",
                            "help": "start and end times cut to the window"}),
    (("-o", "--format", "--fields"), {"action": "append", "default": [], "metavar": "FIELDS",
                                      "dest": "format",
                                      "help": "fields, e.g. JobID,JobName%%30,State"}),
    (("-p", "--parsable"), {"action": "store_true",
                            "help": "fields split by |, with a trailing |"}),
    (("-P", "--parsable2"), {"action": "store_true", "help": "fields split by |, no trailing |"}),
    (("--delimiter",), {"default": "|", "metavar": "CHARS",
                        "help": "the -p/-P separator (default |)"}),
    (("-X", "--allocations"), {"action": "store_true", "help": "job lines only, no step lines"}),
    (("-t",), {"action": "store_true", "dest": "allocations", "help": SUPPRESS}),
    (("-n", "--noheader"), {"action": "store_true", "help": "no header lines"}),
    (("-b", "--brief"), {"action": "store_true", "help": "JobID, State, ExitCode"}),
    (("-l", "--long"), {"action": "store_true", "help": "sacct's long field list"}),
    (("-e", "--helpformat", "--help-fields"), {"action": "store_true", "dest": "helpformat",
                                               "help": "list the fields -o takes"}),
    (("--name",), {"metavar": "NAMES", "help": "only jobs of these names"}),
    (("-r", "--partition"), {"metavar": "PARTS", "help": "only jobs of these partitions"}),
    (("-A", "--accounts"), {"metavar": "ACCOUNTS", "help": "only jobs of these accounts"}),
    (("-N", "--nodelist"), {"metavar": "HOSTLIST", "help": "only jobs that ran on these nodes"}),
    (("-i", "--nnodes"), {"metavar": "MIN[-MAX]", "help": "only jobs of this many nodes"}),
    (("-I", "--ncpus"), {"metavar": "MIN[-MAX]", "help": "only jobs of this many CPUs"}),
    (("-k", "--timelimit-min"), {"metavar": "TIME",
                                 "help": "only jobs whose time limit is at least this"}),
    (("-K", "--timelimit-max"), {"metavar": "TIME",
                                 "help": "only jobs whose time limit is at most this"}),
    (("-C", "--constraints"), {"metavar": "FEATURES",
                               "help": "only jobs that asked for these features"}),
    (("--reason",), {"metavar": "REASONS",  # sacct's getopt string has no R
                          "help": "only jobs whose reason is one of these"}),
    (("-q", "--qos"), {"metavar": "QOS", "help": "only jobs of these QOS"}),
    (("-W", "--wckeys"), {"metavar": "WCKEYS", "help": "only jobs of these wckeys"}),
    (("-x", "--associations"), {"metavar": "IDS", "help": "only jobs of these association ids "
                                "(Ranch keeps no associations: no job has one)"}),
    (("-F", "--flags"), {"metavar": "FLAGS", "help": "SchedSubmit, SchedMain, SchedBackfill, "
                         "StartRecieved or None: read, no filter (Ranch's records keep no "
                         "scheduling path)"}),
    (("-B", "--batch-script"), {"action": "store_true",
                                "help": "the batch script of the -j jobs"}),
    (("--env-vars",), {"action": "store_true", "help": "the environment of the -j jobs"}),
    (("-f", "--file"), {"metavar": "PATH", "help": "a job completion file: refused, Ranch "
                        "answers from its controller"}),
    (("--units",), {"metavar": "K|M|G|T|P", "help": "memory figures in this unit"}),
    (("--whole-hetjob",), {"nargs": "?", "const": "yes", "metavar": "yes|no",
                           "help": "accepted (Ranch has no heterogeneous jobs)"}),
    (("-c", "--completion"), {"action": "store_true", "help": "accepted (the same records)"}),
    (("-D", "--duplicates"), {"action": "store_true",
                              "help": "accepted (the latest run of each job)"}),
    (("-M", "--clusters", "--cluster"), {"metavar": "NAMES", "dest": "clusters",
                                         "help": "accepted; Ranch answers for its own cluster"}),
    (("-L", "--allclusters"), {"action": "store_true", "help": SUPPRESS}),
    (("--local",), {"action": "store_true", "help": SUPPRESS}),
    (("--federation",), {"action": "store_true", "help": SUPPRESS}),
    (("--use-local-uid",), {"action": "store_true", "help": SUPPRESS}),
    (("--noconvert",), {"action": "store_true", "help": SUPPRESS}),
    (("-U", "--usage"), {"action": "store_true", "help": "a line of usage"}),
    (("-v", "--verbose"), {"action": "count", "default": 0, "help": SUPPRESS}),
    (("--json",), {"action": "store_true", "help": "sacct --json's document"}),
    (("--yaml",), {"action": "store_true", "help": "refused: --json gives the document"}),
    (("--server",), {"metavar": "HOST:PORT", "help": "controller address (or RANCH_SERVER)"}),
    (("--key-file",), {"metavar": "PATH", "help": "cluster key (or RANCH_KEY_FILE)"}),
    (("--conf",), {"metavar": "PATH", "help": "read controller address and key from this config"}),
    (("-V", "--version"), {"action": "version", "version": lambda: version_text("racct")}),
)
OWN = ("--server", "--key-file", "--conf")
# the options sacct_filters.py filters on without checking them first, and those it checks and
# filters on (imported only when one is given)
NARROWED = ("name", "partition", "accounts", "nodelist")
CHECKED = ("gid", "user", "nnodes", "ncpus", "timelimit_min", "timelimit_max", "units",
           "whole_hetjob", "flags", "reason", "file", "yaml", "batch_script", "env_vars", "long",
           "constraints", "qos", "wckeys", "associations")


def build_parser():  # -> argparse.ArgumentParser
    return quickargs.build(OPTIONS, prog="racct", add_help=False, description="Accounting data "
                           "of jobs: those rctld holds and its history.")


def parse_job_words(words: list[str]) -> tuple[set[int], set[tuple[int, int]]]:
    """-j: `12`, `12_3`, `12.batch` (a step names its job), comma lists."""
    ids: set[int] = set()
    tasks: set[tuple[int, int]] = set()
    for group in words:
        for word in group.split(","):
            word = word.strip()
            if not word:
                continue
            base = word.split(".", 1)[0]
            head, _, task = base.partition("_")
            try:
                if task:
                    tasks.add((int(head), int(task)))
                else:
                    ids.add(int(head))
            except ValueError:
                raise CliError(f"Invalid job id: {word}", code=1) from None
    return ids, tasks


def parse_states(text: str) -> tuple[str, ...]:
    out = []
    for word in text.split(","):
        w = word.strip().upper()
        if not w:
            continue
        name = STATE_WORDS.get(w, w)
        if name not in STATE_WORDS.values():
            raise CliError(f"Invalid state: {word.strip()}", code=1)
        out.append(name)
    return tuple(out)


def parse_time(text: str, now: float, option: str) -> float:
    """sacct's time forms (HH:MM[:SS], MMDD[YY], MM/DD[/YY], YYYY-MM-DD[THH:MM[:SS]], today,
    midnight, fika, now[{+|-}N[units]]...), looking back as sacct does: a time of day is
    today's even when it has not come yet, a date without its year the latest one."""
    from ranch.cli.begin_time import _CLOCK, BeginError, parse_begin

    try:
        return parse_begin(text, now, past=True)
    except BeginError as exc:
        import re

        if re.fullmatch(_CLOCK, text.strip().lower()):  # 25:00: refused in sacct's words
            raise CliError(f"Invalid time specification (pos=0): {text}") from None
        raise CliError(f"{option} {text}: invalid time: {str(exc).split(': ', 1)[-1]}",
                       code=1) from None


def window(args: Namespace, now: float) -> tuple[float | None, float | None]:
    """sacct's DEFAULT TIME WINDOW: -S is midnight, epoch 0 with -j, now with -s alone; -E is
    now, or -S with -s."""
    start = parse_time(args.starttime, now, "-S") if args.starttime else None
    end = parse_time(args.endtime, now, "-E") if args.endtime else None
    if start is None:
        if args.jobs:
            start = None  # epoch 0: no lower bound
        elif args.state:
            start = now
        else:
            # today's local midnight (time.mktime: datetime's import costs a call 1 ms)
            start = time.mktime((*time.localtime(now)[:3], 0, 0, 0, 0, 0, -1))
    if end is None:
        end = (start if args.state and args.starttime else None) or now
    return start, end


def fields_of(args: Namespace) -> list[tuple[str, int]]:
    from ranch.cli.sacct_fields import (
        BRIEF_FORMAT,
        DEFAULT_FORMAT,
        LONG_FORMAT,
        FormatError,
        parse_format,
    )

    if args.format:
        text = ",".join(args.format)
    elif args.brief:
        text = BRIEF_FORMAT
    elif args.long:
        text = LONG_FORMAT
    else:
        text = os.environ.get("SACCT_FORMAT") or DEFAULT_FORMAT
    try:
        return parse_format(text)
    except FormatError as exc:
        raise CliError(str(exc), code=1) from None


def request_body(args: Namespace, now: float) -> dict:
    ids, tasks = parse_job_words(args.jobs)
    body: dict = {"job_ids": sorted(ids), "tasks": sorted(tasks)}
    if args.state:
        body["states"] = list(parse_states(args.state))
    start, end = window(args, now)
    body["start"], body["end"] = start, end
    if args.user == "-1":
        pass  # sacct -u -1: every user
    elif args.user:
        import pwd

        uids, users = [], []
        for word in args.user.split(","):
            word = word.strip()
            if word.isdigit():
                uids.append(int(word))
            elif word:
                users.append(word)
                try:
                    uids.append(pwd.getpwnam(word).pw_uid)
                except KeyError:
                    pass
        body["uids"], body["users"] = uids, users
    elif not args.allusers and os.getuid() != 0:
        body["uids"] = [os.getuid()]  # sacct: a user sees their own jobs unless -a/-u
    return body


def narrow(args: Namespace, records: list[dict]) -> list[dict]:
    """The filters the controller leaves to the command (cli/sacct_filters.py, loaded only when
    one is given)."""
    if not any(getattr(args, d) for d in NARROWED) and \
            not any(getattr(args, d) not in (None, False) for d in CHECKED):
        return records
    from ranch.cli.sacct_filters import narrow as sacct_narrow

    return sacct_narrow(args, records)


def render(args: Namespace, records: list[dict], now: float) -> str:
    from ranch.cli import sacct_fields as sf

    fields = fields_of(args)
    body = sf.rows(records, fields, now, steps=not args.allocations)
    if args.parsable or args.parsable2:
        return sf.parsable(fields, body, not args.noheader, trailing=not args.parsable2,
                           delimiter=args.delimiter)
    return sf.table(fields, body, not args.noheader)


def fetch(args: Namespace, now: float) -> tuple[float, list[dict], int]:
    from ranch.cli.controller import Refused, request

    target = find_target(args.server, args.key_file, args.conf)
    try:
        reply = request(target, "GetAcct", request_body(args, now), want="AcctList")
    except Refused as exc:
        if "unknown" in exc.message.lower() and "GetAcct" in exc.message:
            raise CliError(f"the controller at {target.address} keeps no job history "
                           "(it predates racct); rqueue -t all lists the jobs it holds") from None
        raise CliError(exc.message) from None
    if reply.get("history_error"):
        print(f"{prog()}: error: {reply['history_error']}; showing the jobs rctld holds",
              file=sys.stderr)
    return reply.get("generated_at") or now, list(reply.get("jobs") or ()), int(
        reply.get("left_out") or 0)


def prog() -> str:
    from ranch.cli.slurm_names import prog as named

    return named("racct")


def read_args(argv: list[str]) -> Namespace | None:
    """sacct's command line as its getopt_long reads it; None when it was --help, --usage or
    --version (answered here)."""
    try:
        args, words = quickargs.getopt(OPTIONS, argv, exact=OWN)
    except quickargs.GetoptError as exc:
        raise CliError(str(exc)) from None
    if args.help:
        sys.stdout.write(build_parser().format_help())
        return None
    if args.version:
        print(version_text("racct"))
        return None
    if args.usage:
        print(f"Usage: {prog()} [options]\n\tUse --help for help")
        return None
    if any(getattr(args, d) not in (None, False) for d in CHECKED):
        from ranch.cli.sacct_filters import check

        check(args)
    if not args.helpformat:
        fields_of(args)  # a bad -o is refused before the words left over, as sacct does
    if words:
        raise CliError("Unknown arguments: " + " ".join(words))
    return args


def run(argv: list[str]) -> int:
    args = read_args(argv)
    if args is None:
        return 0
    if args.helpformat:
        from ranch.cli.sacct_fields import help_format

        sys.stdout.write(help_format())
        return 0
    now = time.time()
    if args.state:
        parse_states(args.state)
    parse_job_words(args.jobs)
    start, end = window(args, now)
    # sacct's window takes in the second of its end when that is now or the start ([S, E+1))
    if (start is not None and end is not None and int(start) > int(end)
            + (not args.endtime or int(end) == int(start))):
        from ranch.conf.timefmt import slurm_timestamp

        raise CliError(f"Start time ({slurm_timestamp(start)}) requested is after end time "
                       f"({slurm_timestamp(end)}).")
    if args.qos:  # sacct resolves -q against the QOS table before it asks for jobs
        from ranch.cli.sacct_filters import known_qos, qos_names

        known = known_qos(find_target(args.server, args.key_file, args.conf))
        if known is not None:
            args.qos_matched = qos_names(args.qos, known)
    generated, records, left_out = fetch(args, now)
    records = narrow(args, records)
    if args.batch_script or args.env_vars:
        sys.stdout.write(scripts(args, records))
        return 0
    if args.truncate:
        from ranch.cli.sacct_filters import truncate

        truncate(records, start, end)
    if args.units:
        for rec in records:
            rec["_units"] = args.units[0].upper()
    if not args.allocations and any("." in w for w in args.jobs):
        from ranch.cli.sacct_steps import selected

        for jid, only in selected(args.jobs).items():  # -j 12.1: the step's line alone
            for rec in records:
                if rec["job_id"] == jid:
                    rec["_only_steps"] = only
    if args.json:
        from ranch.cli.sacct_json import document

        sys.stdout.write(document(records, generated, [prog(), *argv],
                                  steps=not args.allocations))
    else:
        sys.stdout.write(render(args, records, generated))
    if left_out:
        print(f"{prog()}: error: {left_out:,} more jobs matched than one answer holds; narrow "
              "the query with -S/-E, -j, -u or -s", file=sys.stderr)
        return 1
    return 0


def scripts(args: Namespace, records: list[dict]) -> str:
    """-B/--env-vars: sacct's block per job; Ranch's records keep neither the script nor the
    environment, so each says NONE, as sacct does for a record without one."""
    from ranch.cli.sacct_fields import job_id

    head = ("Batch Script for {}" if args.batch_script
            else "Environment used for {} (must be batch to display)")
    return "".join(f"{head.format(job_id(r))}\n{'-' * 80}\nNONE\n\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    with no_gc():
        return run_main("racct", run, argv)


if __name__ == "__main__":
    sys.exit(main())
