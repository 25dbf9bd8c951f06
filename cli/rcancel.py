"""rcancel: cancel or signal jobs, like scancel (`rcancel 12 13_2`, `rcancel -u alice`,
`rcancel --signal=USR1 12`)."""

from __future__ import annotations

import argparse
import os
import signal as signals
import sys

from cli.controller import CliError, find_target, run_main
from cli.rinfo import VERSION, UsageParser


def build_parser() -> argparse.ArgumentParser:
    p = UsageParser(prog="rcancel", add_help=False, description="Cancel or signal jobs.")
    a = p.add_argument
    a("--help", action="help", help="show this help and exit")
    a("-u", "--user", metavar="USER", help="only (or all) jobs of this user")
    a("-s", "--signal", metavar="SIGNAL", help="send SIGNAL instead of ending the jobs")
    a("-q", "--quiet", action="store_true", help="no error for jobs already finished")
    a("-v", "--verbose", action="store_true", help="say what was cancelled")
    a("--server", metavar="HOST:PORT", help="controller address (or RANCH_SERVER)")
    a("--key-file", metavar="PATH", help="cluster key (or RANCH_KEY_FILE)")
    a("--conf", metavar="PATH", help="read controller address and key from this config")
    a("-V", "--version", action="version", version=f"rcancel {VERSION}")
    a("job_ids", nargs="*", metavar="JOBID")
    return p


def parse_signal(text: str) -> int:
    """A signal by number or name, with or without SIG (scancel --signal)."""
    t = text.strip().upper()
    if t.isdigit():
        num = int(t)
        if 0 < num < signals.NSIG:
            return num
    else:
        name = t if t.startswith("SIG") else "SIG" + t
        sig = getattr(signals, name, None)
        if isinstance(sig, signals.Signals):
            return int(sig)
    raise CliError(f"--signal {text}: unknown signal", code=2)


def run(argv: list[str]) -> int:
    import getpass

    from cli.controller import request
    from cli.job_requests import fetch_jobs, parse_job_ids

    args = build_parser().parse_args(argv)
    if not args.job_ids and not args.user:
        raise CliError("no job identification provided: give JOBID... or -u USER", code=2)
    sig = parse_signal(args.signal) if args.signal else 0
    target = find_target(args.server, args.key_file, args.conf)
    jobs = None
    if any("_" in w for w in args.job_ids):
        _, jobs = fetch_jobs(target)
    # Every id is tried, as scancel does: one that names no job (an array task here, a plain
    # id in rctld's answer) gets its own error line, and the others are still cancelled.
    ids: list[int] = []
    errors: list[str] = []
    for word in args.job_ids:
        for part in word.split(","):
            try:
                ids += parse_job_ids([part], jobs)
            except CliError as exc:
                if exc.code != 1 or "_" not in part:
                    raise
                errors.append(str(exc))
    if ids or not args.job_ids:
        body = {"job_ids": ids, "user": getpass.getuser(), "uid": os.getuid(),
                "signal": sig, "only_user": args.user or ""}
        result = request(target, "CancelJobs", body, want="JobResult", timeout=30.0)
    else:
        result = {}
    failed = False
    for err in [*(result.get("errors") or ()), *errors]:
        if args.quiet and "already completing or completed" in err:
            continue
        failed = True
        print(f"rcancel: error: {err}", file=sys.stderr)
    if args.verbose:
        for jid in result.get("job_ids") or ():
            print(f"rcancel: {'Signal' if sig else 'Terminating'} job {jid}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    return run_main("rcancel", run, argv)


if __name__ == "__main__":
    sys.exit(main())
