"""rqueue: squeue's view of the jobs rctld holds: columns, filters, -o formats and --json."""

from __future__ import annotations

import os
import sys
import time

from ranch.cli import quickargs
from ranch.cli.controller import CliError, find_target, no_gc, run_main
from ranch.cli.quickargs import SUPPRESS, Table
from ranch.cli.slurm_names import prog, version_text

OPTIONS: Table = (
    (("--help",), {"action": "help", "help": "show this help and exit"}),
    (("-h", "--noheader"), {"action": "store_true", "help": "print no header line"}),
    (("-l", "--long"), {"action": "store_true", "help": "long format, with a timestamp line"}),
    (("-u", "--user"), {"metavar": "USERS", "help": "only these users' jobs (comma list)"}),
    (("--me",), {"action": "store_true", "help": "only my jobs"}),
    (("-t", "--states"), {"metavar": "STATES", "help": "only these states (comma list, or all)"}),
    (("-j", "--jobs"), {"metavar": "JOBIDS", "help": "only these jobs (comma list)"}),
    (("-p", "--partition"), {"metavar": "PARTS", "help": "only these partitions (comma list)"}),
    (("-w", "--nodelist"), {"metavar": "HOSTLIST", "help": "only jobs on these nodes"}),
    (("-o", "--format"), {"metavar": "FORMAT", "help": "squeue -o format, e.g. '%%i %%t %%R'"}),
    (("-O", "--Format"), {"metavar": "FIELDS",
                          "help": "squeue -O fields, e.g. jobid:10,name,state"}),
    (("-n", "--name"), {"metavar": "NAMES", "help": "only jobs of these names (comma list)"}),
    (("-A", "--account"), {"metavar": "ACCOUNTS", "help": "only jobs of these accounts"}),
    (("-q", "--qos"), {"metavar": "QOS", "help": "only jobs of these QOS"}),
    (("-r", "--array"), {"action": "store_true",
                         "help": "one line per array task, pending ones too"}),
    (("-s", "--steps"), {"nargs": "?", "const": "", "metavar": "STEPS",
                         "help": "job steps (rrun's and each batch job's): all, or 12.0,12.1"}),
    (("-a", "--all"), {"action": "store_true", "help": "every partition (Ranch hides none)"}),
    (("-S", "--sort"), {"metavar": "KEYS",
                        "help": "sort by these -o letters, e.g. -p,i ('-': descending)"}),
    (("-P", "--priority"), {"action": "store_true", "help": "sort by priority, highest first"}),
    (("--start",), {"action": "store_true",
                    "help": "pending jobs with their expected start time (%%S)"}),
    (("--array-unique",), {"action": "store_true",
                           "help": "accepted: an array's pending tasks are one line per "
                           "reason already"}),
    (("-L", "--licenses"), {"metavar": "NAMES",
                            "help": "only jobs holding these licenses (Ranch has none)"}),
    (("-R", "--reservation"), {"metavar": "NAME",
                               "help": "only jobs in this reservation (no Ranch job runs in one)"}),
    (("-i", "--iterate"), {"metavar": "SECONDS", "help": "print again every SECONDS seconds"}),
    (("--usage",), {"action": "store_true", "help": "print a brief usage line and exit"}),
    (("-M", "--clusters"), {"metavar": "NAME",
                            "help": "accepted; Ranch answers for its own cluster"}),
    # federation and display switches that change nothing on one cluster (squeue takes them)
    (("--local",), {"action": "store_true", "help": SUPPRESS}),
    (("--federation",), {"action": "store_true", "help": SUPPRESS}),
    (("--sibling",), {"action": "store_true", "help": SUPPRESS}),
    (("--hide",), {"action": "store_true", "help": SUPPRESS}),
    (("--noconvert",), {"action": "store_true", "help": SUPPRESS}),
    (("-v", "--verbose"), {"action": "count", "default": 0, "help": SUPPRESS}),
    (("--json",), {"action": "store_true", "help": "squeue --json's document"}),
    (("--why",), {"metavar": "JOBID",
                  "help": "Ranch: why this job is not running, its estimated start and what "
                  "would start it sooner (each checked by the scheduler's planner); --json too"}),
    (("--server",), {"metavar": "HOST:PORT", "help": "controller address (or RANCH_SERVER)"}),
    (("--key-file",), {"metavar": "PATH", "help": "cluster key (or RANCH_KEY_FILE)"}),
    (("--conf",), {"metavar": "PATH", "help": "read controller address and key from this config"}),
    (("-V", "--version"), {"action": "version", "version": lambda: version_text("rqueue")}),
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import SimpleNamespace as Namespace


def build_parser():  # -> argparse.ArgumentParser
    return quickargs.build(OPTIONS, prog="rqueue", add_help=False,
                           description="View the job queue.")


def _state_set(text: str) -> frozenset[str] | None:
    """-t: compact or long names, case-insensitive; "all" = every state (None)."""
    from ranch.cli.squeue_fields import COMPACT, LONG

    wanted = set()
    for word in text.split(","):
        w = word.strip().upper()
        if not w:
            continue
        if w == "ALL":
            return None
        if w in LONG:
            wanted.add(LONG[w])
        elif w in COMPACT:
            wanted.add(w)
        else:
            raise CliError(f"-t {text}: invalid job state {word.strip()!r}; valid: "
                           + ", ".join(sorted(COMPACT)) + " or ALL")
    return frozenset(wanted)


def select(args: Namespace, jobs: list[dict]) -> list[dict]:
    from ranch.cli.squeue_fields import ACTIVE

    # -j keeps the default states: a job that ended is left out unless -t names its state.
    # --json: squeue 22.05's document holds every job whatever the filters; -j keeps its own
    # jobs here, in every state
    if args.states:
        states = _state_set(args.states)
    else:
        states = None if args.json and args.jobs else ACTIVE
    out = jobs if states is None else [j for j in jobs if j["state"] in states]
    if args.jobs:
        from ranch.cli.squeue_jobs import wanted_id

        out = [j for j in out if wanted_id(j, args.jobs)]
    users = set()
    if args.user:
        users = {u.strip() for u in args.user.split(",") if u.strip()}
    if args.me:
        from ranch.cli.credential import user_name

        users.add(user_name())
    if users:
        uids = {u for u in users if u.isdigit()}
        out = [j for j in out if j.get("user") in users or str(j.get("uid")) in uids]
    if args.partition:
        parts = {p.strip() for p in args.partition.split(",") if p.strip()}
        # a job waiting on several partitions (-p a,b) is listed under each
        out = [j for j in out if parts & set((j.get("partition") or "").split(","))]
    for opt, key, lower in (("name", "name", False), ("account", "account", True),
                            ("qos", "qos", False)):
        wanted_words = getattr(args, opt)
        if wanted_words:
            words = {w.strip().lower() if lower else w.strip()
                     for w in wanted_words.split(",") if w.strip()}
            out = [j for j in out if (j.get(key) or "") in words]
    if args.licenses or args.reservation:  # no Ranch job holds a license or a reservation
        out = [j for j in out if args.reservation and j.get("reservation") == args.reservation]
    if args.nodelist is not None:  # `-w ''` too: squeue's empty set, no job on it
        from ranch.conf.hostlist import expand

        try:
            wanted = set(expand(args.nodelist)) if args.nodelist.strip() else set()
        except ValueError as exc:
            raise CliError(f"-w {args.nodelist}: {exc}") from None
        out = [j for j in out if j.get("nodes") and wanted & set(expand(j["nodes"]))]
    from ranch.cli.squeue_fields import STATE_ORDER, priority

    # squeue sorts slurmctld's list (newest job first) stably: equal keys keep that order;
    # a held job's priority is 0. An array's pending tasks are one record there, expanded
    # in task order by -r: they keep the array's place, task 1 first.
    out.sort(key=_listed)
    if args.sort is not None:
        from ranch.cli.squeue_sort import sort_jobs

        return sort_jobs(out, args.sort, time.time())
    # squeue -P keeps this order too (it lists a job once per partition it asked for)
    out.sort(key=lambda j: (j.get("partition", ""), STATE_ORDER.get(j["state"], 9),
                            -priority(j)))
    return out


def _listed(job: dict) -> tuple[int, int]:
    if job.get("state") == "PENDING" and job.get("array_job_id"):
        return -job["array_job_id"], job.get("array_task_id") or 0
    return -job["job_id"], 0


def long_format(text: str, warn: bool = False):
    """squeue -O: `name[:[.]size][suffix]` comma list (size 20 when not given). A name Ranch
    has no field for is dropped, with squeue's warning when `warn` (squeue 22.05 says it and
    goes on)."""
    from ranch.cli.sinfo_format import Field, Format
    from ranch.cli.squeue_fields import FIELDS, LONG_FIELDS

    fields, names, getters = [], [], []
    for token in text.split(","):
        token = token.strip()
        if not token:
            continue
        name, colon, spec = token.partition(":")
        right = spec.startswith(".")
        digits = spec.lstrip(".")
        size = "".join(ch for ch in digits if ch.isdigit())
        if not digits.startswith(size):
            size = ""
        suffix = digits[len(size):]
        entry = LONG_FIELDS.get(name.lower())
        if entry is None:
            if warn:
                from ranch.cli.slurm_names import prog

                print(f"{prog('rqueue')}: error: Invalid job format specification: {name}",
                      file=sys.stderr)
            continue
        header, getter = FIELDS[entry] if isinstance(entry, str) else entry
        fields.append(Field(name.lower(), int(size) if size else 20 if not colon else 0,
                            right, suffix))
        names.append(header)
        getters.append(getter)
    return Format("", tuple(fields)), names, getters


def render(args: Namespace, jobs: list[dict], now: float) -> str:
    from ranch.cli.sinfo_format import parse_sinfo_format, render_table
    from ranch.cli.squeue_fields import ALL, COLUMNS, DEFAULT_FORMAT, FIELDS, LONG_FORMAT

    if args.steps is not None:  # squeue -s (cli/step_view.py)
        from ranch.cli.step_view import all_steps, queue_text, wanted_steps

        steps, only = all_steps(jobs), wanted_steps(args.steps)
        if only is not None:
            steps = [s for s in steps if s["id"].isdigit() and (s["job_id"], int(s["id"])) in only]
        text = queue_text(steps, now, fmt_text=args.format or os.environ.get("SQUEUE_FORMAT"),
                          long_text=args.Format or os.environ.get("SQUEUE_FORMAT2"),
                          header=not args.noheader, prog=prog("rqueue"))
        stamp = time.strftime("%a %b %d %H:%M:%S %Y\n", time.localtime(now))
        return stamp + text if _dated(args) else text
    long_text = args.Format if args.Format is not None else os.environ.get("SQUEUE_FORMAT2")
    fast = COLUMNS
    if long_text is not None and args.format is None:
        fmt, names, getters = long_format(long_text)
        fast = {}  # -O names, not letters
    else:
        text = args.format if args.format is not None else os.environ.get("SQUEUE_FORMAT") or (
            LONG_FORMAT if args.long else DEFAULT_FORMAT)
        if text.lower() == "%all":
            text = ALL
        fmt, _ = parse_sinfo_format(text, frozenset(FIELDS), "job")  # run() said its warnings
        getters = [FIELDS[f.letter][1] for f in fmt.fields]
        names = [FIELDS[f.letter][0] for f in fmt.fields]
    if not args.array and any(j.get("array_job_id") for j in jobs):
        from ranch.cli.squeue_jobs import collapse

        jobs = collapse(jobs)
    columns = [fast[f.letter](jobs, now) if f.letter in fast else [g(j, now) for j in jobs]
               for f, g in zip(fmt.fields, getters, strict=True)]
    # a format of no known field still prints its text once a job (squeue does)
    whole = _uncut(fmt, names, columns, jobs)
    rows = list(zip(*columns, strict=True)) if columns else [()] * len(jobs)
    lines = render_table(fmt, names, rows, header=not args.noheader, whole=whole)
    if _dated(args):
        lines.insert(0, time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now)))
    return "".join(line + "\n" for line in lines)  # padding kept, as squeue prints it


def _dated(args: Namespace) -> bool:
    """squeue prints the date first with -l, -i or -v, unless -h."""
    return not args.noheader and bool(args.long or args.iterate or args.verbose)


def _uncut(fmt, names: list[str], columns: list[list[str]], jobs: list[dict]) -> frozenset[int]:
    """The right-justified columns squeue pads without cutting (squeue_fields.UNCUT); the
    headers and cells in them that squeue does cut (%R's reasons, UNLIMITED) cut here."""
    from ranch.cli.squeue_fields import LONG_FIELDS, UNCUT, UNCUT_HEADER

    whole = set()
    for i, f in enumerate(fmt.fields):
        letter = LONG_FIELDS.get(f.letter, f.letter) if len(f.letter) > 1 else f.letter
        if not f.width or not f.right or not isinstance(letter, str) or letter not in UNCUT:
            continue
        whole.add(i)
        if letter not in UNCUT_HEADER:
            names[i] = names[i][:f.width]
        if letter == "R":
            columns[i] = [c[:f.width] if j["state"] == "PENDING" else c
                          for c, j in zip(columns[i], jobs, strict=True)]
        elif letter in "lL":
            columns[i] = [c if c[:1].isdigit() else c[:f.width] for c in columns[i]]
    return frozenset(whole)


# The record keys the default view, the sort and the array lines read, and those that -l and
# the filters add: all rqueue asks for then (a record has ~70 keys; with 5,000 jobs decoding
# the rest was most of the time, and each key asked for and not read costs ~0.5 ms). "uid":
# rctld's PrivateData=jobs tells a record's owner by it (ctld/rpc/permissions.py).
READS = ("array_job_id", "array_task_id", "array_throttle", "end_time", "held", "job_id", "name",
         "node_count", "nodes", "partition", "priority", "reason", "start_time", "state", "uid",
         "user")


def reads(args: Namespace) -> tuple[str, ...]:
    """GetJobs.fields for `args`: READS and what -l and the filters read, else every key."""
    if args.json or args.format or args.Format or args.steps is not None or args.sort or any(
            os.environ.get(v) for v in ("SQUEUE_FORMAT", "SQUEUE_FORMAT2")):
        return ()
    extra = [key for key, wanted in (("time_limit", args.long), ("account", args.account),
                                     ("qos", args.qos)) if wanted]
    return READS + tuple(extra)


def read_args(argv: list[str]) -> Namespace | int:
    """The command line as squeue's getopt_long reads it (cli/squeue_options.py), or the exit
    status after --help, --usage, -V or a line squeue refuses."""
    from ranch.cli.squeue_options import USAGE, Refused, read

    name = prog("rqueue")
    try:
        args = read(argv, name)
    except Refused as exc:
        sys.stderr.write("".join(line + "\n" for line in exc.lines))
        if exc.usage:
            sys.stdout.write(USAGE.format(prog=name))
        return 1
    if args.help:
        build_parser().print_help()
    elif args.usage:
        sys.stdout.write(USAGE.format(prog=name))
    elif args.V:
        print(version_text("rqueue"))
    else:
        return args
    return 0


def start_defaults(args: Namespace) -> None:
    """squeue --start's format, sort and states, where the line sets none of its own."""
    if args.start and args.steps is None:
        if args.format is None and args.Format is None:
            args.format = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
        args.sort = "S" if args.sort is None else args.sort
        args.states = args.states or "PD"


def run(argv: list[str]) -> int:
    args = read_args(argv)
    if isinstance(args, int):
        return args
    start_defaults(args)
    if args.states:
        _state_set(args.states)  # a usage error before any request
    if args.Format and args.steps is None:
        long_format(args.Format, warn=True)  # its warnings before any request
    if args.format and args.steps is None:
        # squeue 22.05: a letter it does not know is printed as written, with a warning
        from ranch.cli.sinfo_format import parse_sinfo_format
        from ranch.cli.squeue_fields import ALL, FIELDS

        text = ALL if args.format.lower() == "%all" else args.format
        for line in parse_sinfo_format(text, frozenset(FIELDS), "job")[1]:
            print(f"{prog('rqueue')}: error: {line}", file=sys.stderr)
    target = find_target(args.server, args.key_file, args.conf)
    if args.why is not None:
        from ranch.cli import why_view

        return why_view.run(target, args.why, args.json)
    if args.nodelist:
        from ranch.cli.squeue_jobs import known_nodes

        args.nodelist = known_nodes(target, args.nodelist)
    while True:
        code = _show(args, argv, target)
        if not args.iterate:
            return code
        sys.stdout.write("\n")
        sys.stdout.flush()
        time.sleep(args.iterate)  # squeue -i: again every N seconds until interrupted


def _show(args: Namespace, argv: list[str], target) -> int:
    from ranch.cli.job_requests import fetch_jobs

    generated, jobs = fetch_jobs(target, fields=reads(args), shown=True)
    if args.jobs:  # (imported only then: rqueue's everyday import budget)
        from ranch.cli.squeue_jobs import unknown

        if unknown(args, jobs):
            print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
            return 1
    now = generated or time.time()
    if args.steps is not None:
        args.states = None  # squeue -s lists the running jobs' steps whatever -t says
    shown = select(args, jobs)
    if args.Format and "cluster" in {t.partition(":")[0].strip().lower()
                                     for t in args.Format.split(",")}:
        from ranch.cli.controller import request  # squeue -O cluster: the controller's name

        name = str(request(target, "Ping", {}, want="Pong").get("cluster_name") or "")
        shown = [{**j, "cluster": j.get("cluster") or name} for j in shown]
    if args.json:
        from ranch.cli.squeue_json import document

        sys.stdout.write(document(shown, now, ["rqueue", *argv]))
    else:
        sys.stdout.write(render(args, shown, now))
    return 0


def main(argv: list[str] | None = None) -> int:
    with no_gc():
        return run_main("rqueue", run, argv)


if __name__ == "__main__":
    sys.exit(main())
