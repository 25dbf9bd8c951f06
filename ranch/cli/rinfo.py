"""rinfo: sinfo's views of nodes and partitions, asked from the controller in one request."""

from __future__ import annotations

import gc
import sys
import time

from ranch.cli import quickargs
from ranch.cli.controller import (
    CliError,
    Snapshot,
    Target,
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
    from collections.abc import Callable
    from types import SimpleNamespace as Namespace

__all__ = ["VERSION", "no_gc", "version_text"]  # the other commands take these

def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not value > 0:
        import argparse

        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds" if value is None
            else "the interval must be above 0 seconds")
    return value


OPTIONS: Table = (
    (("--help",), {"action": "help", "help": "show this help and exit"}),
    (("-a", "--all"), {"action": "store_true", "help": "show hidden partitions too"}),
    (("-d", "--dead"), {"action": "store_true", "help": "only non-responding nodes"}),
    (("-e", "--exact"), {"action": "store_true",
                         "help": "group only nodes of identical configuration"}),
    (("-F", "--future"), {"action": "store_true", "help": "show FUTURE nodes too"}),
    (("-h", "--noheader"), {"action": "store_true", "help": "print no header line"}),
    (("-i", "--iterate"), {"type": _seconds, "metavar": "SECONDS",
                           "help": "redraw every SECONDS"}),
    (("-l", "--long"), {"action": "store_true", "help": "long format, with a timestamp line"}),
    (("-n", "--nodes"), {"metavar": "HOSTLIST", "help": "only these nodes"}),
    (("-N", "--Node"), {"action": "store_true", "dest": "node", "help": "one line per node"}),
    (("-o", "--format"), {"metavar": "FORMAT", "help": "sinfo -o format, e.g. '%%P %%t %%N'"}),
    (("-O", "--Format"), {"metavar": "FIELDS",
                          "help": "sinfo -O fields, e.g. partition,nodes:5,statelong"}),
    (("-p", "--partition"), {"metavar": "PARTS", "help": "only these partitions (comma list)"}),
    (("-r", "--responding"), {"action": "store_true", "help": "only responding nodes"}),
    (("-R", "--list-reasons"), {"action": "store_true", "dest": "reasons",
                                "help": "why nodes are unusable"}),
    (("-s", "--summarize"), {"action": "store_true",
                             "help": "one line per partition, NODES(A/I/O/T)"}),
    (("-T", "--reservation"), {"action": "store_true",
                               "help": "only the reservations (name, state, window, nodes)"}),
    (("-t", "--states"), {"metavar": "STATES",
                          "help": "only nodes in these states (comma list)"}),
    (("-S", "--sort"), {"metavar": "KEYS",
                        "help": "sort the lines by these -o letters, e.g. -D,P ('-': descending)"}),
    (("--json",), {"action": "store_true", "help": "sinfo --json's document"}),
    (("--usage",), {"action": "store_true", "help": "print a brief usage line and exit"}),
    # federation and display switches that change nothing on one cluster (sinfo takes them)
    (("--local",), {"action": "store_true", "help": SUPPRESS}),
    (("--federation",), {"action": "store_true", "help": SUPPRESS}),
    (("--hide",), {"action": "store_true", "help": SUPPRESS}),
    (("--noconvert",), {"action": "store_true", "help": SUPPRESS}),
    (("-v", "--verbose"), {"action": "count", "default": 0, "help": SUPPRESS}),
    (("--metrics",), {"action": "store_true",
                      "help": "with -N: live CPU/memory/GPU/heartbeat columns"}),
    (("--server",), {"metavar": "HOST:PORT", "help": "controller address (or RANCH_SERVER)"}),
    (("--key-file",), {"metavar": "PATH", "help": "cluster key (or RANCH_KEY_FILE)"}),
    (("-f", "--conf"), {"metavar": "PATH",
                        "help": "read controller address and key from this config"}),
    (("-V", "--version"), {"action": "version", "version": lambda: version_text("rinfo")}),
)


def build_parser():  # -> argparse.ArgumentParser
    return quickargs.build(OPTIONS, prog="rinfo", add_help=False,
                           description="View nodes and partitions.")


def parse_args(argv: list[str]) -> Namespace:
    return quickargs.parse(OPTIONS, argv, build_parser)


def state_matcher(text: str) -> Callable[[dict], bool]:
    """-t STATES with the statemachine's rules (drain = drained + draining, `~` negates...)."""
    from ranch.statemachine import names

    try:
        wanted = names.parse_filter(text)
    except ValueError as exc:
        raise CliError(f"-t {text}: {exc}", code=1) from None  # sinfo exits 1 here too
    cache: dict[tuple, bool] = {}

    def match(node: dict) -> bool:
        st = node["state"]
        k = (st["base"], tuple(st["flags"]))
        hit = cache.get(k)
        if hit is None:
            # -t looks at base and flags only; the reason is not needed to match
            state = names.from_json({"base": st["base"], "flags": st["flags"]})
            hit = cache[k] = bool(wanted.matches(state))
        return hit

    return match


def selection(args: Namespace):
    from ranch.cli.sinfo_view import Selection, down_drain_fail

    match = state_matcher(args.states) if args.states else None
    if match is None and args.reasons:
        match = down_drain_fail
    node_names = None
    if args.nodes:
        try:
            node_names = frozenset(expand(args.nodes))
        except ValueError as exc:
            raise CliError(f"-n {args.nodes}: {exc}") from None
    parts = tuple(p for p in (args.partition or "").split(",") if p)
    return Selection(
        partitions=parts,
        state_match=match,
        node_names=node_names,
        responding=args.responding,
        dead=args.dead,
        future=args.future,
        all_partitions=args.all,
    )


def view_format(args: Namespace):
    """(parsed format, field table) of the text view `args` ask for."""
    from ranch.cli import sinfo_view as sv

    fields = sv.FIELDS
    text = sv.pick_format(
        node=args.node or args.metrics,
        long=args.long,
        summary=args.summarize,
        reasons=args.reasons,
        fmt=args.format,
    )
    if args.metrics:
        from ranch.cli.metrics_fields import ALL_FIELDS

        fields = ALL_FIELDS
    try:
        if args.Format is not None and args.format is None and not args.metrics:
            from ranch.cli.sinfo_format import parse_long_format

            fmt, warnings = parse_long_format(args.Format, frozenset(fields))
            for line in warnings:
                print(f"{prog('rinfo')}: error: {line}", file=sys.stderr)
        else:
            fmt = sv.parse(text, fields)
    except ValueError as exc:
        raise CliError(f"-o: {exc}") from None
    if args.metrics:
        from ranch.cli.metrics_fields import METRIC_COLUMNS

        fmt = sv.with_fields(fmt, METRIC_COLUMNS)
    return fmt, fields


def reads(args: Namespace) -> tuple[str, ...]:
    """The node-record keys the view `args` asks for reads (GetSnapshot.fields)."""
    if args.json:
        from ranch.cli.sinfo_json import READS

        return READS
    from ranch.cli.sinfo_view import reads_of

    fmt, fields = view_format(args)
    sorted_by = tuple(k for c in args.sort or "" if c in fields for k in fields[c].reads)
    return tuple(dict.fromkeys((*reads_of(fmt, fields), *sorted_by)))


def table_lines(snapshot, args: Namespace) -> list[str]:
    """The text view of `snapshot` for the options in `args`."""
    from ranch.cli import sinfo_view as sv

    fmt, fields = view_format(args)
    sel = selection(args)
    parts, nodes = sv.select(snapshot.nodes, snapshot.partitions, sel)
    groups = sv.build_groups(
        nodes,
        parts,
        fmt,
        node_mode=args.node or args.metrics,
        exact=args.exact,
        show_empty=not sel.filters_nodes,
        fields=fields,
    )
    if args.sort is not None:
        groups = sv.sort_groups(groups, args.sort, fold, fields)
    return sv.render(fmt, groups, fold, header=not args.noheader, fields=fields)


def json_text(snapshot, args: Namespace, argv: list[str]) -> str:
    import getpass

    import orjson

    from ranch.cli import sinfo_json
    from ranch.cli.sinfo_view import select

    parts, nodes = select(snapshot.nodes, snapshot.partitions, selection(args))
    doc = sinfo_json.build(
        nodes,
        parts,
        fold,
        cluster=snapshot.cluster_name,
        version=VERSION,
        argv=["rinfo", *argv],
        user=getpass.getuser(),
    )
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()


def once(target: Target, args: Namespace, argv: list[str], stamp: bool) -> str:
    if args.reservation:
        from ranch.cli import reservation_command

        if args.json:
            import orjson

            items = reservation_command.fetch(target)
            return orjson.dumps({"reservations": items}, option=orjson.OPT_INDENT_2).decode() \
                + "\n"
        return reservation_command.sinfo_t(target, args.noheader)
    snap: Snapshot = fetch_snapshot(target, reads(args), metrics=args.metrics)
    if args.json:
        return json_text(snap, args, argv) + "\n"
    lines = table_lines(snap, args)
    if stamp:
        lines.insert(0, time.ctime())
    return "".join(line + "\n" for line in lines)


def main(argv: list[str] | None = None) -> int:
    with no_gc():
        return run_main("rinfo", _main, argv)


USAGE = """\
Usage: {prog} [-abdelNRrsTv] [-i seconds] [-t states] [-p partition] [-n nodes]
             [-S fields] [-o format] [-O Format] [--federation] [--local]
"""


def _main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.usage:
        sys.stdout.write(USAGE.format(prog=prog("rinfo")))
        return 0
    target = find_target(args.server, args.key_file, args.conf)
    if args.iterate is None:
        sys.stdout.write(once(target, args, argv, stamp=args.long))
        sys.stdout.flush()
        return 0
    try:
        while True:
            sys.stdout.write(once(target, args, argv, stamp=not args.json) + "\n")
            sys.stdout.flush()
            gc.collect()  # with the GC off, collect between redraws
            time.sleep(args.iterate)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
