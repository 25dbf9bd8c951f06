"""Ranch's man pages from the option tables the programs parse with: `python man/generate.py [DIR]`.

Our own rather than argparse-manpage: rbatch and ralloc read sbatch's getopt table, not argparse,
and every page needs SIGNALS, FILES and ENVIRONMENT sections of its own; rendering one page is
a few dozen lines of troff, less than a build dependency (and its setup hooks) would cost.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run as a script from anywhere: the repo's packages

Entry = tuple[str, str]  # (how it is written: "-f FILE, --file FILE", what it does)

DAEMON_SIGNALS = {
    "rctld": [
        ("SIGHUP", "Re-read the config file (as rcontrol reconfigure) and reopen the log file."),
        ("SIGUSR2", "Reopen the log file (logrotate's postrotate)."),
        ("SIGTERM, SIGINT", "Save the state and stop; the nodes and their jobs run on."),
        ("SIGUSR1, SIGPIPE", "Logged and ignored."),
    ],
    "rnoded": [
        ("SIGHUP", "Reopen the log file and register afresh: the controller's config is "
                   "served again."),
        ("SIGUSR2", "Reopen the log file (logrotate's postrotate)."),
        ("SIGTERM, SIGINT", "Stop the daemon, not the node (a restart, an upgrade): the jobs it "
                            "started run on, the node stays in service, and the next rnoded "
                            "adopts them. Nothing is said to the controller."),
        ("SIGUSR1", "The node leaves the cluster: the controller is told, sets it DOWN "
                    "(reason \"rnoded shut down\") and requeues its jobs; then rnoded stops."),
        ("SIGPIPE", "Logged and ignored."),
    ],
}

FILES = {
    "rctld": [
        ("/etc/ranch/cluster.conf", "The config read without -f (RANCH_CONF overrides)."),
        ("/var/lib/ranch", "StateSaveLocation's default: the state and job journal."),
        ("SlurmctldLogFile", "The log file, when set (else stderr; the journal under systemd)."),
    ],
    "rnoded": [
        ("/var/spool/ranch/NODENAME", "Spool as root: config cache, node credential, jobs."),
        ("SlurmdLogFile", "The log file the controller serves (%n: the node's name, %h: the "
                          "host's), unless --log-file is given."),
    ],
}

# the daemons' heap (ranch/protocol/heap.py): the one variable an admin sets to opt out
HEAP = ("PYTHONMALLOC", "When set (pymalloc: CPython's own allocator), kept as it is. Unset, the "
        "daemon re-executes itself once at start onto glibc's malloc with its heap on "
        "transparent huge pages, where glibc (2.35 or later) and the kernel allow it; what it "
        "starts inherits neither setting.")
ENVIRONMENT = {
    "rctld": [("RANCH_CONF", "The config file when -f is not given."),
              ("RANCH_KEY_FILE", "The cluster key when --key-file is not given."), HEAP],
    "rnoded": [("RANCH_KEY_FILE", "The cluster key when --key-file is not given."),
               ("RANCH_SPOOL_DIR", "Parent of the default spool directory."), HEAP],
}


def _argparse(target: str) -> Callable[[], tuple[str, list[Entry]]]:
    def read() -> tuple[str, list[Entry]]:
        module, _, attr = target.partition(":")
        parser: argparse.ArgumentParser = getattr(importlib.import_module(module), attr)()
        fmt = parser._get_formatter()  # argparse's own wording of each option
        entries = []
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:
                continue
            entries.append((fmt._format_action_invocation(action),
                            fmt._expand_help(action) if action.help else ""))
        text = " ".join(x for x in (parser.description, parser.epilog) if x)
        return text, entries
    return read


def _getopt(module: str, attr: str | None) -> Callable[[], tuple[str, list[Entry]]]:
    """rbatch and ralloc: sbatch's getopt table (cli/sbatch_options.py), the options they act
    on (the others are accepted and set aside, as their --help says)."""
    def read() -> tuple[str, list[Entry]]:
        so = importlib.import_module("ranch.cli.sbatch_options")
        table = (getattr(importlib.import_module(module), attr).table if attr
                 else (*so._TABLE, *so.RANCH_OPTS))
        entries = []
        for o in table:
            if not o.help:
                continue
            arg = {so.REQUIRED: f"={o.metavar or 'VALUE'}",
                   so.OPTIONAL: f"[={o.metavar or 'VALUE'}]"}.get(o.arg, "")
            forms = ([f"-{o.short}"] if o.short else []) + [f"--{o.long}{arg}"]
            entries.append((", ".join(forms), o.help))
        text = ("Every other sbatch 22.05 option is accepted and set aside; options also come "
                "from #SBATCH lines and SBATCH_* variables.")
        return text, entries
    return read


# name, section, summary, how its options are read
PROGRAMS: list[tuple[str, int, str, Callable[[], tuple[str, list[Entry]]]]] = [
    ("rctld", 8, "the Ranch controller daemon", _argparse("ranch.ctld.main:build_parser")),
    ("rnoded", 8, "the Ranch node daemon", _argparse("ranch.noded.main:parser")),
    ("ranch-healthcheck", 8, "a ready HealthCheckProgram for Ranch and Slurm nodes",
     _argparse("ranch.healthcheck.__main__:build_parser")),
    ("rinfo", 1, "view nodes and partitions (sinfo)", _argparse("ranch.cli.rinfo:build_parser")),
    ("rcontrol", 1, "show and change the cluster (scontrol)",
     _argparse("ranch.cli.rcontrol:build_parser")),
    ("rqueue", 1, "view the job queue (squeue)", _argparse("ranch.cli.rqueue:build_parser")),
    ("rcancel", 1, "cancel or signal jobs (scancel)", _argparse("ranch.cli.rcancel:build_parser")),
    ("racct", 1, "job accounting (sacct)", _argparse("ranch.cli.racct:build_parser")),
    ("rrun", 1, "run a job step (srun)", _argparse("ranch.cli.rrun:build_parser")),
    ("rbatch", 1, "submit a batch job (sbatch)", _getopt("ranch.cli.sbatch_options", None)),
    ("ralloc", 1, "get an allocation and run a command in it (salloc)",
     _getopt("ranch.cli.ralloc", "OPTIONS")),
    ("ranch-slurm-shims", 1, "run Ranch's commands under Slurm's names",
     _argparse("ranch.cli.shims:build_parser")),
]


def _esc(text: str) -> str:
    """troff: backslashes doubled, hyphens literal, no line taken for a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line[:1] in (".", "'") else line
                     for line in text.splitlines())


def _section(title: str, rows: list[tuple[str, str]]) -> Iterator[str]:
    if rows:
        yield f".SH {title}"
        for head, body in rows:
            yield from (".TP", f".B {_esc(head)}", _esc(body))


def page(name: str) -> tuple[int, str]:
    """(section, troff text) of program `name`."""
    from ranch.protocol.release import version_text

    by_name = {p[0]: p for p in PROGRAMS}
    prog, section, summary, read = by_name[name]
    text, entries = read()
    lines = [f'.TH {prog.upper()} {section} "" "{version_text()}" "Ranch"',
             ".SH NAME", f"{_esc(prog)} \\- {_esc(summary)}",
             ".SH SYNOPSIS", f".B {_esc(prog)}", "[\\fIOPTIONS\\fR]"]
    if text:
        lines += [".SH DESCRIPTION", _esc(text)]
    lines += _section("OPTIONS", [(form, help_ or "") for form, help_ in entries])
    lines += _section("SIGNALS", DAEMON_SIGNALS.get(prog, []))
    lines += _section("FILES", FILES.get(prog, []))
    lines += _section("ENVIRONMENT", ENVIRONMENT.get(prog, []))
    others = [f"\\fB{_esc(p)}\\fR({s})" for p, s, _, _ in PROGRAMS if p != prog]
    lines += [".SH SEE ALSO", ", ".join(others) + ", docs/daemons.md"]
    return section, "\n".join(lines) + "\n"


def write_all(directory: Path) -> list[Path]:
    written = []
    for prog, *_ in PROGRAMS:
        section, text = page(prog)
        path = directory / f"man{section}" / f"{prog}.{section}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    for written in write_all(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(written)
