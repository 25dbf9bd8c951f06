"""rbatch: submit a batch script (or --wrap "cmd") to rctld, like sbatch.

Options come from the command line and from `#SBATCH` / `#RANCH` lines at the top of the script
(read until the first line that is not a comment); the command line wins, as with sbatch.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import socket
import sys
import time

from cli.controller import CliError, find_target
from cli.rinfo import VERSION, UsageParser
from protocol.limits import MAX_FRAME_BYTES, MAX_SCRIPT_BYTES, MAX_TIME_LIMIT_MINUTES

DIRECTIVES = ("#SBATCH", "#RANCH")
NOT_A_SCRIPT = ("This does not look like a batch script. The first line must start with #! "
                "followed by the path to an interpreter. For instance: #!/bin/sh")
_SIZE = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)
_UNIT_MIB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}
FRAME_HEADROOM = 4096  # the frame's header and the message's own keys, beside the body


def build_parser(*, for_script: bool = False) -> argparse.ArgumentParser:
    p = UsageParser(prog="rbatch", add_help=False, description="Submit a batch job.")
    a = p.add_argument
    if not for_script:
        a("--help", action="help", help="show this help and exit")
        a("-V", "--version", action="version", version=f"rbatch {VERSION}")
        a("--server", metavar="HOST:PORT", help="controller address (or RANCH_SERVER)")
        a("--key-file", metavar="PATH", help="cluster key (or RANCH_KEY_FILE)")
        a("--conf", metavar="PATH", help="read controller address and key from this config")
        a("--wrap", metavar="COMMAND", help="run COMMAND in a /bin/sh script")
        a("--parsable", action="store_true", help="print only the job id")
    d = argparse.SUPPRESS  # unset options stay absent, so that the script's lines fill them
    a("-N", "--nodes", metavar="N[-M]", default=d, help="nodes (the minimum of a range)")
    a("-n", "--ntasks", metavar="N", default=d, type=_positive("--ntasks"), help="tasks")
    a("-c", "--cpus-per-task", metavar="N", default=d, type=_positive("--cpus-per-task"))
    a("--mem", metavar="SIZE", default=d, help="memory per node, e.g. 500M, 4G")
    a("--gpus", metavar="[TYPE:]N", default=d, help="GPUs per node")
    a("--gres", metavar="gpu[:TYPE]:N", default=d, help="generic resources per node")
    a("-p", "--partition", metavar="PART", default=d)
    a("-w", "--nodelist", metavar="HOSTLIST", default=d, help="nodes the job must use")
    a("-x", "--exclude", metavar="HOSTLIST", default=d, help="nodes the job must not use")
    a("-t", "--time", metavar="TIME", default=d, help="time limit, e.g. 30, 1:00:00, 2-0")
    a("-J", "--job-name", metavar="NAME", default=d)
    a("-o", "--output", metavar="FILE", default=d, help="stdout file (%%j %%x %%N %%A %%a)")
    a("-e", "--error", metavar="FILE", default=d, help="stderr file")
    a("-D", "--chdir", metavar="DIR", default=d, help="working directory")
    a("--requeue", dest="requeue", action="store_true", default=d)
    a("--no-requeue", dest="requeue", action="store_false", default=d)
    a("--exclusive", action="store_true", default=d)
    a("-a", "--array", metavar="SPEC", default=d, help="job array, e.g. 1-10")
    a("-H", "--hold", action="store_true", default=d, help="submit held")
    a("-b", "--begin", metavar="TIME", default=d,
      help="eligible from TIME: now+60, now+1hour, 16:00, 2026-11-23T16:00:00, tomorrow")
    if not for_script:
        a("script", nargs="?", metavar="SCRIPT")
        a("args", nargs=argparse.REMAINDER, metavar="ARGS")
    return p


def _positive(opt: str):
    def conv(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{opt}: {text!r} is not a number") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{opt}: must be 1 or more, got {value}")
        return value

    return conv


def mem_mib(text: str) -> int:
    """--mem: a number with an optional K/M/G/T suffix (M is the default), in MiB."""
    m = _SIZE.match(text.strip())
    if not m:
        raise CliError(f"--mem {text}: expected a size such as 500M or 4G", code=2)
    mib = int(m.group(1)) * _UNIT_MIB[m.group(2).upper()]
    return max(1, int(mib + 0.999)) if int(m.group(1)) else 0


def gpu_count(text: str, opt: str) -> int:
    """--gpus [type:]N, --gres gpu[:type]:N (comma lists: the gpu entry)."""
    for item in text.split(","):
        parts = item.strip().split(":")
        if opt == "--gres":
            if parts[0] != "gpu":
                raise CliError(f"--gres {text}: Ranch knows only gpu gres", code=2)
            parts = parts[1:] or ["1"]
        count = parts[-1]
        if not count.isdigit():
            raise CliError(f"{opt} {text}: expected a GPU count", code=2)
        return int(count)
    return 0


def time_seconds(text: str) -> int:
    """-t in seconds (already checked by parse_minutes): M, M:S, H:M:S, D-H[:M[:S]]."""
    days, _, rest = text.strip().rpartition("-") if "-" in text else ("", "", text.strip())
    parts = [int(x) for x in rest.split(":")]
    if days:
        parts += [0] * (3 - len(parts))
        h, mi, se = parts
        return ((int(days) * 24 + h) * 60 + mi) * 60 + se
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return (parts[0] * 60 + parts[1]) * 60 + parts[2]


def node_count(text: str) -> int:
    low = text.split("-", 1)[0].strip()
    if not low.isdigit() or int(low) < 1:
        raise CliError(f"--nodes {text}: expected a number of nodes such as 2 or 2-4", code=2)
    return int(low)


def begin(text: str) -> float:
    from cli.begin_time import BeginError, parse_begin

    try:
        return parse_begin(text, time.time())
    except BeginError as exc:
        raise CliError(str(exc), code=2) from None


def node_max(text: str) -> int | None:
    """The upper bound of `-N min-max` (None for a plain `-N N`: exactly N)."""
    low, dash, high = text.partition("-")
    if not dash:
        return None
    high = high.strip()
    if not high.isdigit() or int(high) < node_count(low):
        raise CliError(f"--nodes {text}: the maximum must be a number no smaller than the "
                       "minimum", code=2)
    return int(high)


def directives(script: str) -> list[str]:
    """The option words of the #SBATCH/#RANCH lines before the first command."""
    words: list[str] = []
    for n, line in enumerate(script.splitlines()):
        s = line.strip()
        if n == 0 and s.startswith("#!"):
            continue
        if not s:
            continue
        if not s.startswith("#"):
            break
        for tag in DIRECTIVES:
            if s.startswith(tag + " ") or s.startswith(tag + "\t"):
                text = s[len(tag):].split(" #", 1)[0]
                try:
                    words += shlex.split(text)
                except ValueError as exc:
                    raise CliError(f"script line {n + 1}: {exc}: {line}", code=2) from None
    return words


def read_script(args: argparse.Namespace) -> tuple[str, str, list[str]]:
    """(script text, command path as given, its arguments)."""
    if args.wrap is not None:
        if args.script:
            raise CliError("give either --wrap or a script, not both", code=2)
        return f"#!/bin/sh\n# rbatch --wrap\n{args.wrap}\n", "", []
    if args.script is None or args.script == "-":
        if sys.stdin.isatty():
            raise CliError("no script given: rbatch SCRIPT [ARGS] or rbatch --wrap CMD "
                           "(or the script on stdin)", code=2)
        data = sys.stdin.buffer.read(MAX_SCRIPT_BYTES + 1)
        _check_script_size(len(data), 0)
        text, path = data.decode("utf-8", "surrogateescape"), ""
    else:
        path = args.script
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_SCRIPT_BYTES + 1)  # a huge file is refused, not read whole
                size = os.fstat(f.fileno()).st_size
        except OSError as exc:
            raise CliError(f"unable to open file {path}: {exc.strerror or exc}") from None
        _check_script_size(len(data), max(size, len(data)))
        text = data.decode("utf-8", "surrogateescape")
    if not text.startswith("#!"):
        raise CliError(NOT_A_SCRIPT)
    if "\0" in text:
        raise CliError("the batch script holds NUL bytes: is it a binary file?")
    return text, os.path.abspath(path) if path else "", list(args.args or ())


def _check_script_size(read: int, size: int) -> None:
    """Refuse a script over Slurm's max_script_size before anything is sent (`read`: the bytes
    read, at most one past the limit; `size`: the file's size when known, else 0)."""
    if read > MAX_SCRIPT_BYTES:
        what = f"{size:,} bytes" if size else f"more than {MAX_SCRIPT_BYTES:,} bytes"
        raise CliError(f"Batch job submission failed: the batch script is {what}; the limit is "
                       f"{MAX_SCRIPT_BYTES:,} (Slurm's max_script_size)")


def _check_request_size(body: dict) -> None:
    """Refuse a submission whose frame rctld would refuse (the environment counts too)."""
    import json

    size = len(json.dumps(body, separators=(",", ":")))
    if size + FRAME_HEADROOM > MAX_FRAME_BYTES:
        env = len(json.dumps(body.get("env", ())))
        script = len(json.dumps(body.get("script", "")))
        raise CliError(f"Batch job submission failed: the request is {size:,} bytes (script "
                       f"{script:,}, environment {env:,}, JSON-escaped); the limit is "
                       f"{MAX_FRAME_BYTES - FRAME_HEADROOM:,}")


def submission(args: argparse.Namespace, script: str, command: str, argv: list[str]) -> dict:
    """The SubmitJob body (the codec's shape) for these options."""
    from conf.timefmt import parse_minutes

    get = args.__dict__.get
    limit = seconds = None
    if get("time") is not None:
        try:
            limit = parse_minutes(args.time)
        except ValueError as exc:
            raise CliError(f"--time: {exc}", code=2) from None
        if limit is not None and limit > MAX_TIME_LIMIT_MINUTES:
            raise CliError(f"--time {args.time}: {limit:,} minutes is above the largest time "
                           f"limit, {MAX_TIME_LIMIT_MINUTES:,} minutes", code=2)
        seconds = time_seconds(args.time) if limit is not None else None
        if not seconds:  # 0: no limit, as sbatch reads it
            limit = seconds = None
    cwd = os.getcwd()
    workdir = os.path.abspath(os.path.join(cwd, get("chdir"))) if get("chdir") else cwd
    gpus = 0
    if get("gpus") is not None:
        gpus = gpu_count(args.gpus, "--gpus")
    elif get("gres") is not None:
        gpus = gpu_count(args.gres, "--gres")
    body = {
        "script": script,
        "user": _user(),
        "uid": os.getuid(),
        "gid": os.getgid(),
        "workdir": workdir,
        "name": get("job_name") or "",
        "argv": argv,
        "env": sorted(os.environ.items()),
        "stdout": get("output") or "",
        "stderr": get("error") or "",
        "num_nodes": node_count(args.nodes) if get("nodes") else 1,
        "max_nodes": node_max(args.nodes) if get("nodes") else 0,  # 0: as the tasks need
        "begin_time": begin(args.begin) if get("begin") else None,
        "ntasks": get("ntasks") or 1,
        "cpus_per_task": get("cpus_per_task") or 1,
        "mem_mib": mem_mib(args.mem) if get("mem") else 0,
        "gpus": gpus,
        "partition": get("partition") or "",
        "nodelist": get("nodelist") or "",
        "exclude": get("exclude") or "",
        "time_limit": limit,
        "time_limit_s": seconds,
        "requeue": True if get("requeue") is None else bool(args.requeue),
        "exclusive": bool(get("exclusive")),
        "array": get("array") or "",
        "hold": bool(get("hold")),
        "submit_host": socket.gethostname(),
        "command": command,
    }
    if get("time") is None:
        del body["time_limit"]  # the partition's DefaultTime
        del body["time_limit_s"]
    return body


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()  # LOGNAME/USER first, then the password database
    except (KeyError, OSError):
        return str(os.getuid())


def run(argv: list[str]) -> int:
    from cli.job_requests import Refused, request

    args = build_parser().parse_args(argv)
    script, command, script_args = read_script(args)
    words = directives(script)
    if words:
        try:
            ns = build_parser(for_script=True).parse_args(words)
        except SystemExit:
            raise CliError("invalid #SBATCH/#RANCH option in the script (see above)",
                           code=2) from None
        for key, value in vars(ns).items():
            args.__dict__.setdefault(key, value)  # the command line wins
    body = submission(args, script, command, script_args)
    _check_request_size(body)
    target = find_target(args.server, args.key_file, args.conf)
    try:
        reply = request(target, "SubmitJob", body, want="SubmitReply")
    except Refused as exc:
        where = f" ({exc.field})" if exc.field else ""
        raise CliError(f"Batch job submission failed: {exc.message}{where}") from None
    job_id = reply.get("job_id")
    print(job_id if args.parsable else f"Submitted batch job {job_id}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from cli.controller import run_main

    return run_main("rbatch", run, argv)


if __name__ == "__main__":
    sys.exit(main())
