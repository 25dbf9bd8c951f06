"""rcontrol: scontrol's show, update, reconfigure and ping against the Ranch controller."""

from __future__ import annotations

import os
import sys

from ranch.cli import quickargs
from ranch.cli.controller import (
    CliError,
    Snapshot,
    Target,
    ask,
    fetch_snapshot,
    find_target,
    no_gc,
    run_main,
)
from ranch.cli.quickargs import SUPPRESS, Table
from ranch.cli.slurm_names import RANCH_VERSION as VERSION
from ranch.cli.slurm_names import prog, version_text
from ranch.conf.hostlist import expand, fold

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import SimpleNamespace as Namespace

COMMANDS = ("show", "update", "reconfigure", "ping", "takeover", "version",
            "approve", "reject", "delete", "events",  # membership: cli/events_view.py
            "requeue", "requeuehold", "hold", "uhold", "release", "top",  # cli/show_jobs.py
            "confirm", "reset",  # the controller's guards: cli/guards_view.py
            "help",  # scontrol's too: the same text as -h
            "reboot", "reboot_nodes", "cancel_reboot",  # cli/reboot_command.py
            "create")  # create reservation: cli/reservation_command.py
SHOW_ENTITIES = ("node", "nodes", "partition", "partitions", "config", "hostnames", "hostlist",
                 "hostlistsorted", "job", "jobs", "guards", "step", "steps", "reservation",
                 "reservations")


OPTIONS: Table = (
    (("-h", "--help"), {"action": "help", "help": "show this help and exit (or: rcontrol help)"}),
    (("-a", "--all"), {"action": "store_true", "help": "show hidden partitions too"}),
    (("-o", "--oneliner"), {"action": "store_true", "help": "one line per record"}),
    (("--json",), {"action": "store_true", "help": "records as JSON"}),
    # scontrol's switches that change nothing here: one cluster, no federation, every record
    # shown with what Ranch keeps of it
    (("-d", "--details"), {"action": "store_true", "help": SUPPRESS}),
    (("--local",), {"action": "store_true", "help": SUPPRESS}),
    (("--federation",), {"action": "store_true", "help": SUPPRESS}),
    (("--sibling",), {"action": "store_true", "help": SUPPRESS}),
    (("--hide",), {"action": "store_true", "help": SUPPRESS}),
    (("-Q", "--quiet"), {"action": "store_true", "help": SUPPRESS}),
    (("-F", "--future"), {"action": "store_true", "help": SUPPRESS}),  # Ranch has no FUTURE nodes
    (("-u", "--uid"), {"metavar": "USER", "help": "ask for job and node changes as this user "
                       "(a name or uid; root only)"}),
    (("-v", "--verbose"), {"action": "count", "default": 0, "help": SUPPRESS}),
    (("--server",), {"metavar": "HOST:PORT", "help": "controller address (or RANCH_SERVER)"}),
    (("--key-file",), {"metavar": "PATH", "help": "cluster key (or RANCH_KEY_FILE)"}),
    (("-f", "--conf"), {"metavar": "PATH",
                       "help": "read controller address and key from this config"}),
    (("-V", "--version"), {"action": "version", "version": lambda: version_text("rcontrol")}),
    (("words",), {"nargs": "...", "metavar": "COMMAND ..."}),
)

def build_parser():  # -> argparse.ArgumentParser
    return quickargs.build(
        OPTIONS,
        prog="rcontrol",
        add_help=False,
        description="Show and change the state of the cluster, like scontrol.",
        epilog="commands: show node|partition [NAME] | show config | show hostnames EXPR | "
        "show hostlist NAMES | update NodeName=HOSTLIST|ALL State=STATE [Reason=TEXT] | "
        "reconfigure | ping | takeover | approve|reject|delete NodeName=HOSTLIST [Reason=TEXT] | "
        "events [--follow] [--since TIME] [-n HOSTLIST] [--job ID] [--drains] [--json] | "
        "show job [ID] | requeue[hold]|[u]hold|release JOBID... | update JobId=ID KEY=VALUE... | "
        "show guards | confirm down|drain [NodeName=HOSTLIST] | reset guard [down|drain] | "
        "reboot [ASAP] [nextstate=RESUME|DOWN] [reason=TEXT] HOSTLIST|ALL | "
        "cancel_reboot HOSTLIST | create reservation K=V... | update ReservationName=X K=V... "
        "| delete ReservationName=X | show reservation [NAME] | reconfigure --dry-run [FILE]",
    )


def _pick(word: str, choices: tuple[str, ...], what: str) -> str:
    """scontrol's case-insensitive, unambiguous-prefix command words."""
    w = word.lower()
    if w in choices:
        return w
    hits = [c for c in choices if c.startswith(w)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1 and all(h.startswith(hits[0]) for h in hits):
        return hits[0]  # "node" for "no": node/nodes are one entity
    raise CliError(f"invalid {what} {word!r}; valid: {', '.join(choices)}")


class Session:
    """One rcontrol invocation: finds the controller only when a command needs it."""

    def __init__(self, args: Namespace) -> None:
        self.args = args
        self._target: Target | None = None

    @property
    def target(self) -> Target:
        if self._target is None:
            a = self.args
            self._target = find_target(a.server, a.key_file, a.conf)
        return self._target

    def acting(self) -> tuple[str, int]:
        """(user name, uid) the changes are asked for as: -u/--uid's, else the caller's."""
        import getpass

        if self.args.uid is None:
            return getpass.getuser(), os.getuid()
        return as_user(self.args.uid)

    def snapshot(self, fields: tuple[str, ...] = ()) -> Snapshot:
        return fetch_snapshot(self.target, fields)


def show(s: Session, words: list[str]) -> int:
    if not words:
        raise CliError("show needs what to show: node, partition, config, hostnames, hostlist")
    entity = _pick(words[0], SHOW_ENTITIES, "show entity")
    rest = words[1:]
    if entity == "hostnames" and not rest:
        # scontrol 22.05 reads SLURM_NODELIST (in a job: the job's nodes); without it, an
        # error line and exit 0
        import os

        rest = [os.environ.get("SLURM_NODELIST", "")]
        if not rest[0]:
            print(f"{prog('rcontrol')}: error: host list is empty", file=sys.stderr)
            return 0
    if entity in ("hostnames", "hostlist", "hostlistsorted"):
        if len(rest) != 1:
            raise CliError(f"show {entity} takes one host list expression")
        try:
            names = expand(rest[0])
        except ValueError as exc:
            raise CliError(f"{rest[0]}: {exc}") from None
        if entity == "hostnames":
            sys.stdout.write("".join(n + "\n" for n in names))
        else:
            sys.stdout.write(fold(names, sort=entity == "hostlistsorted") + "\n")
        return 0
    if entity == "config":
        return show_config(s)
    if entity.startswith("reservation"):
        from ranch.cli import reservation_command

        if len(rest) > 1:
            raise CliError("show reservation takes at most one name", code=2)
        return reservation_command.show(s.target, rest[0] if rest else None,
                                        s.args.oneliner, s.args.json, _json_doc)
    if entity == "guards":
        from ranch.cli.guards_view import show_guards

        if rest:
            raise CliError("show guards takes no name")
        return show_guards(s.target, one_line=s.args.oneliner, as_json=s.args.json)
    if len(rest) > 1:
        raise CliError(f"show {entity} takes at most one name")
    if entity.startswith("job"):
        from ranch.cli.show_jobs import show_jobs

        return show_jobs(s.target, rest[0] if rest else None, one_line=s.args.oneliner,
                         as_json=s.args.json, json_doc=_json_doc)
    if entity.startswith("step"):
        from ranch.cli.step_view import show_steps

        return show_steps(s.target, rest[0] if rest else None, one_line=s.args.oneliner,
                          as_json=s.args.json, json_doc=_json_doc)
    if entity.startswith("node"):
        return show_nodes(s, rest[0] if rest else None)
    return show_partitions(s, rest[0] if rest else None)


def _json_doc(key: str, items: list, cluster: str) -> str:
    import getpass

    import orjson

    from ranch.protocol.records import show_doc

    doc = show_doc(key, items, cluster, version=VERSION, user=getpass.getuser(),
                   command=["rcontrol", *sys.argv[1:]])
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"


def show_nodes(s: Session, expr: str | None) -> int:
    from ranch.cli import show_records

    snap = s.snapshot(() if s.args.json else show_records.NODE_READS)
    nodes = list(snap.nodes)
    if expr is not None and expr.upper() != "ALL":
        try:
            wanted = expand(expr)
        except ValueError as exc:
            raise CliError(f"{expr}: {exc}") from None
        by_name = {n["name"]: n for n in nodes}
        missing = [w for w in wanted if w not in by_name]
        if missing:
            raise CliError(f"Node {fold(missing, sort=False)} not found")
        nodes = [by_name[w] for w in dict.fromkeys(wanted)]
    if s.args.json:
        docs = [show_records.node_json(n) for n in nodes]
        sys.stdout.write(_json_doc("nodes", docs, snap.cluster_name))
        return 0
    records = [show_records.node_lines(n) for n in nodes]
    sys.stdout.write(show_records.records_text(records, one_line=s.args.oneliner))
    return 0


def show_partitions(s: Session, name: str | None) -> int:
    from ranch.cli import show_records

    snap = s.snapshot(show_records.PARTITION_READS)
    parts = list(snap.partitions)
    if name is not None:
        parts = [p for p in parts if p["name"] == name]
        if not parts:
            raise CliError(f"Partition {name} not found")
    elif not s.args.all:
        parts = [p for p in parts if not p.get("hidden")]
    by_name = {n["name"]: n for n in snap.nodes}
    if s.args.json:
        docs = [show_records.partition_json(p, by_name, fold, snap.cluster_name) for p in parts]
        sys.stdout.write(_json_doc("partitions", docs, snap.cluster_name))
        return 0
    records = [show_records.partition_lines(p, by_name, fold) for p in parts]
    sys.stdout.write(show_records.records_text(records, one_line=s.args.oneliner))
    return 0


def show_config(s: Session) -> int:
    dump = ask(s.target, "GetConfig", want="ConfigDump")
    from ranch.conf.timefmt import slurm_timestamp

    stamp = slurm_timestamp()
    lines = [f"Configuration data as of {stamp}"]
    ignored = set(dump.get("ignored") or ())  # never shown as if in force
    items = dump.get("items") or ()
    lines += [f"{k:<23} = {v}" for k, v in items if k not in ignored]
    if ignored:
        lines += ["", "Kept as written, not acted on by Ranch:"]
        lines += [f"{k:<23} = {v}" for k, v in items if k in ignored]
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


# Options scontrol also takes after the command (`show node n1 -o`).
_TRAILING_FLAGS = {"-o": "oneliner", "--oneliner": "oneliner", "-a": "all", "--all": "all",
                   "--json": "json"}


def as_user(text: str) -> tuple[str, int]:
    """scontrol -u: uid_from_string's user (a name, or the number of one this host knows);
    only root may act as somebody else."""
    import pwd

    from ranch.cli.credential import user_name

    if text and text in (user_name(), str(os.getuid())):
        return user_name(), os.getuid()  # the caller itself (credential.known_user)
    try:
        pw = pwd.getpwuid(int(text)) if text.isdigit() else pwd.getpwnam(text)
    except (KeyError, OverflowError):
        raise CliError(f'--uid="{text}" invalid') from None
    if os.getuid() not in (0, pw.pw_uid):
        raise CliError(f"--uid={text}: only root may act as another user")
    return pw.pw_name, pw.pw_uid


def run(args: Namespace) -> int:
    if args.uid is not None and not _uid_given_well(args.uid):
        return 0
    words = _command_words(args)
    command = _pick(words[0], COMMANDS, "command")
    if command == "help":
        build_parser().print_help()
        return 0
    s = Session(args)
    if command == "show":
        return show(s, words[1:])
    if command in ("create", "update", "delete") and _is_reservation(words[1:]):
        from ranch.cli import reservation_command

        return reservation_command.command(s.target, command, words[1:])
    if command == "create":
        raise CliError("create takes `reservation K=V...`", code=2)
    if command == "update":
        return update(s, words[1:])
    done = _in_views(s, command, words[1:])
    if done is not None:
        return done
    if len(words) > 1:
        raise CliError(f"{command} takes no arguments")
    if command == "version":
        from ranch.cli.slurm_names import active

        print(version_text("rcontrol") if active() else f"ranch {VERSION}")
        return 0
    from ranch.cli import controller_commands

    if command == "reconfigure":
        return controller_commands.reconfigure(s.target)
    if command == "takeover":
        return controller_commands.takeover(s.target)
    return controller_commands.ping(s.target)


def _uid_given_well(text: str) -> bool:
    """-u/--uid: False when it names no user (scontrol says so and exits with its exit code so
    far: 0, scontrol.c case 'u'); any other refusal is an error."""
    try:
        as_user(text)
    except CliError as exc:
        if not exc.message.endswith(" invalid"):
            raise
        print(f"{prog('rcontrol')}: error: {exc.message}", file=sys.stderr)
        return False
    return True


def _command_words(args: Namespace) -> list[str]:
    """The command and its words; scontrol's flags among them (`show node n1 -o`) set."""
    words = []
    for word in args.words:
        flag = _TRAILING_FLAGS.get(word)
        if flag is None:
            words.append(word)
        else:
            setattr(args, flag, True)
    if not words:
        raise CliError("no command given; try: show, update, reconfigure, ping")
    return words


def _in_views(s: Session, command: str, rest: list[str]) -> int | None:
    """The commands whose modules are their own (membership and events, guards, reboots, job
    actions); None for the others."""
    if command == "reconfigure" and rest:  # --dry-run [FILE] (cli/dryrun_view.py)
        from ranch.cli import dryrun_view
        return dryrun_view.command(s.target, rest, s.args.json)
    if command in ("approve", "reject", "delete", "events"):
        from ranch.cli import events_view

        if command == "events":
            return events_view.events_command(s.target, rest, s.args.json)
        return events_view.membership_command(s.target, command, rest)
    if command in ("confirm", "reset"):
        from ranch.cli import guards_view

        if command == "confirm":
            return guards_view.confirm(s.target, rest)
        return guards_view.reset(s.target, rest)
    if command in ("reboot", "reboot_nodes", "cancel_reboot"):
        from ranch.cli import reboot_command

        if command == "cancel_reboot":
            return reboot_command.cancel_reboot(s.target, rest)
        return reboot_command.reboot(s.target, rest)
    if command in ("requeue", "requeuehold", "hold", "uhold", "release", "top"):
        from ranch.cli.show_jobs import job_action

        return job_action(s.target, command, rest, s.acting())
    return None


def update(s: Session, words: list[str]) -> int:
    if any(w.lower().startswith("jobid=") for w in words):  # a job's fields (cli/job_update.py)
        from ranch.cli.job_update import update_job

        return update_job(s.target, words, s.acting())
    from ranch.cli.node_update import parse_update, update_nodes  # nodes: cli/node_update.py

    node_expr, state, reason = parse_update(words)
    user, uid = s.acting()
    return update_nodes(s.target, node_expr, state, reason, user, uid)


def _is_reservation(words: list[str]) -> bool:
    return bool(words) and words[0].lower().partition("=")[0] in ("reservation",
                                                                 "reservationname")


def main(argv: list[str] | None = None) -> int:
    with no_gc():
        return run_main("rcontrol", lambda words: run(parse_args(words)), argv)


def parse_args(argv: list[str]) -> Namespace:
    return quickargs.parse(OPTIONS, argv, build_parser)


if __name__ == "__main__":
    sys.exit(main())
