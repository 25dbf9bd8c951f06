"""rrun (srun): run a command's tasks across a job's nodes, as a job step; outside a job, in an
allocation made for it (cli/allocation.py).

Inside an allocation (SLURM_JOB_ID, or --jobid) rrun asks rctld for a step, listens for the step's
nodes, and prints what their tasks write (cli/step_io.py); sizes it is not given come from the
allocation's SLURM_* variables, as srun takes them.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

from ranch.cli import quickargs
from ranch.cli.controller import (
    LAUNCHER_USAGE,
    CliError,
    Refused,
    find_target,
    request,
    run_main,
)
from ranch.cli.quickargs import SUPPRESS, Table
from ranch.cli.slurm_names import prog, version_text

TYPE_CHECKING = False  # typing and argparse stay off rrun's start
if TYPE_CHECKING:
    import argparse

RETRY_CODES = ("Requested nodes are busy", "Job is pending execution")
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


def _int_env(env: dict[str, str], *names: str) -> int:
    for name in names:
        text = env.get(name, "")
        head = text.split("(", 1)[0].split(",", 1)[0]
        if head.isdigit():
            return int(head)
    return 0


def _nodes(text: str | None) -> int:
    if text is None:
        return 0
    if text.isascii() and text.isdigit():
        return int(text)
    from ranch.cli.sbatch_options import node_count

    return node_count(text)[0]


def sizes(args: argparse.Namespace, env: dict[str, str]) -> dict[str, int]:
    """The step's sizes as srun resolves them: its options, else the allocation's variables
    (SLURM_NTASKS as -n, SLURM_NNODES as -N), with srun's warnings where they disagree."""
    allocated = _int_env(env, "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    nodes = _nodes(args.nodes) or allocated
    if allocated and nodes > allocated:
        raise CliError(f"Only allocated {allocated} nodes asked for {nodes}")
    ntasks = args.ntasks or _int_env(env, "SLURM_NTASKS", "SLURM_NPROCS")
    per_node = args.ntasks_per_node or _int_env(env, "SLURM_NTASKS_PER_NODE")
    # a per-node count that disagrees with the job's task count is dropped, with srun's
    # warning; beside an -n of its own it stays a most-per-node (srun says nothing then)
    if per_node and not args.ntasks and ntasks and nodes and per_node * nodes != ntasks:
        print(f"{prog('rrun')}: Warning: can't honor --ntasks-per-node set to {per_node} "
              f"which doesn't match the requested tasks {ntasks} with the number of requested "
              f"nodes {nodes}. Ignoring --ntasks-per-node.", file=sys.stderr)
        per_node = 0
    if ntasks and nodes and ntasks < nodes:
        print(f"{prog('rrun')}: Warning: can't run {ntasks} processes on {nodes} nodes, "
              f"setting nnodes to {ntasks}", file=sys.stderr)
    # srun 22.05 does not take the job's SLURM_CPUS_PER_TASK as its -c (measured: a -c 2 job's
    # srun -n4 runs four tasks on its four CPUs); SRUN_CPUS_PER_TASK is its variable for -c
    cpt = args.cpus_per_task or _int_env(env, "SRUN_CPUS_PER_TASK")
    return {"ntasks": ntasks, "nodes": nodes, "ntasks_per_node": per_node,
            "cpus_per_task": cpt, "gpus_per_task": args.gpus_per_task,
            "gpus_per_node": args.gpus_per_node}


def step_env(args: argparse.Namespace, env: dict[str, str],
             size: dict[str, int] | None = None) -> list[list[str]]:
    """--export: what of rrun's environment the tasks get, with the names srun itself sets
    before it launches (its distribution, -l, --ntasks-per-node, umask)."""
    how = args.export or "ALL"
    words = [w for w in how.split(",") if w]
    if words and words[0].upper() == "NONE":
        out = {k: v for k, v in env.items() if k.startswith("SLURM_")}
        words = words[1:]
    elif words and words[0].upper() == "ALL":
        out = dict(env)
        words = words[1:]
    else:
        out = dict(env)
    for word in words:
        name, eq, value = word.partition("=")
        if eq:
            out[name] = value
        elif name in env:
            out[name] = env[name]
    if size is not None:
        out.update(srun_names(args, env, size))
    return [[k, v] for k, v in out.items()]


def srun_names(args: argparse.Namespace, env: dict[str, str], size: dict[str, int]
               ) -> dict[str, str]:
    ntasks, nodes = size["ntasks"], size["nodes"]
    # srun 22.05: cyclic when the tasks do not outnumber the nodes, else block
    cyclic = not ntasks or (nodes and ntasks <= nodes)
    out = {"SLURM_DISTRIBUTION": "cyclic" if cyclic else "block"}
    if args.label:
        out["SLURM_LABELIO"] = "1"
    if args.job_name:
        out["SLURM_JOB_NAME"] = args.job_name
    if size["ntasks_per_node"]:
        out["SLURM_NTASKS_PER_NODE"] = str(size["ntasks_per_node"])
    mask = os.umask(0)
    os.umask(mask)
    out["SLURM_UMASK"] = f"{mask:04o}"
    if "SLURM_JOB_CPUS_PER_NODE" in env:
        out["SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0"] = env["SLURM_JOB_CPUS_PER_NODE"]
    return out


def _io_host(target) -> str:
    """The address of this host that the controller's side of the network reaches."""
    s = _socket.socket(_socket.AF_INET6 if ":" in target.host else _socket.AF_INET,
                       _socket.SOCK_DGRAM)
    try:
        s.connect((target.host, target.port))
        return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        s.close()


def listen_for_tasks(host: str, ports: tuple[int, int] | None) -> _socket.socket:
    """The listener the step's nodes connect to: on a port of SrunPortRange when the config
    gives one (a site's firewall opens that range on submit hosts, as for srun), else on any
    port the kernel gives (its ip_local_port_range)."""
    if ports is None:
        return _listener(host, 0)
    low, high = ports
    count = high - low + 1
    first = os.getpid() % count  # concurrent rruns start apart instead of all at LOW
    for i in range(count):
        port = low + (first + i) % count
        try:
            return _listener(host, port)
        except OSError as exc:
            import errno

            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    raise CliError(f"no free port in SrunPortRange={low}-{high} on {host} for the tasks' I/O")


def _listener(host: str, port: int) -> _socket.socket:
    """socket.create_server((host, port), backlog=128), from the C module: socket.py's enums
    and selectors cost rrun's start more than its whole step request."""
    sock = _socket.socket(_socket.AF_INET6 if ":" in host else _socket.AF_INET,
                          _socket.SOCK_STREAM)
    try:
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def run_step(target, args: argparse.Namespace, job_id: int, env: dict[str, str], *,
             own: bool = False) -> int:
    """One step in job `job_id`: ask for it, run its I/O, return srun's exit code. `own`: the
    job is rrun's own allocation, whose holder says it is alive while the step runs."""
    from ranch.cli import step_io

    host = _io_host(target)
    listener = listen_for_tasks(host, target.srun_ports)
    size = sizes(args, env)
    try:
        body = {
            "job_id": job_id, "argv": list(args.command),
            "cwd": os.path.abspath(args.chdir or os.getcwd()),
            "io_host": host, "io_port": listener.getsockname()[1],
            "env": step_env(args, env, size), "name": args.job_name,
            "nodelist": args.nodelist, "overlap": bool(args.overlap),
            "exclusive": bool(args.exclusive),
            "exact": bool(args.exact or args.exclusive or args.cpus_per_task),
            "stdout": args.output, "stderr": args.error,
            "input": args.input if args.input else "all", "unbuffered": bool(args.unbuffered),
            **size,
        }
        alive = None
        if own:
            from ranch.cli.alive import Alive

            alive = Alive(target, job_id)
            alive.first()
        granted = _ask_for_step(target, body, job_id, quiet=args.quiet)
        if args.verbose and not granted.get("waited"):
            print(f"{prog('rrun')}: Step created for StepId={job_id}.{granted['step_id']}",
                  file=sys.stderr)
        return step_io.run(listener, granted, args, alive=alive)
    finally:
        listener.close()


def _ask_for_step(target, body: dict, job_id: int, *, quiet: bool) -> dict:
    """StepRequest, retried while the job's CPUs are busy or it has not started (srun waits)."""
    said = False
    delay = 0.1
    while True:
        try:
            granted = request(target, "StepRequest", body, want="StepGranted")
            if said:
                print(f"{prog('rrun')}: Step created for job {job_id}", file=sys.stderr)
                granted = {**granted, "waited": True}
            return granted
        except Refused as exc:
            reason = next((r for r in RETRY_CODES if r in exc.message), None)
            if reason is None:
                raise CliError(exc.message) from None
            if not said and not quiet:
                print(f"{prog('rrun')}: Job {job_id} step creation temporarily disabled, "
                      f"retrying ({reason})", file=sys.stderr)
                said = True
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _check_values(args: argparse.Namespace) -> None:
    """The values srun's own parser (slurm_opt.c, sbatch's) refuses before it asks for
    anything, refused the same way here: rrun reads those with rbatch's readers."""
    # The readers load only for a value given: a step's everyday start pays for none of them.
    _nodes(args.nodes)  # slurm_opt.c reads -N with the other options, before the command
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
    env = dict(os.environ)
    job_id = args.jobid or _int_env(env, "SLURM_JOB_ID", "SLURM_JOBID")
    if job_id:
        return run_step(target, args, job_id, env)
    from ranch.cli.allocation import run_allocated  # outside a job: allocate, run, release

    return run_allocated(target, args, lambda jid, alloc_env: run_step(
        target, args, jid, {**env, **alloc_env}, own=True))


def main(argv: list[str] | None = None) -> int:
    return run_main("rrun", run, argv)


if __name__ == "__main__":
    sys.exit(main())
