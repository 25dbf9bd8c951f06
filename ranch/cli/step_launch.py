"""One step of rrun in a job: its sizes and environment as srun resolves them (its options, else
the allocation's SLURM_* variables), the listener the step's nodes connect to, the StepRequest
(retried while the job's CPUs are busy), then the step's I/O (cli/step_io.py)."""

from __future__ import annotations

import _socket
import os
import sys
import time

from ranch.cli.controller import CliError, Refused, request
from ranch.cli.slurm_names import prog

TYPE_CHECKING = False  # typing and argparse stay off rrun's start
if TYPE_CHECKING:
    import argparse

RETRY_CODES = ("Requested nodes are busy", "Job is pending execution")


def int_env(env: dict[str, str], *names: str) -> int:
    """The number that the first of the variables `names` to start with one starts with
    (`2(x3)`: 2; `4,2`: 4), else 0."""
    for name in names:
        text = env.get(name, "")
        head = text.split("(", 1)[0].split(",", 1)[0]
        if head.isdigit():
            return int(head)
    return 0


def nodes_of(text: str | None) -> int:
    """-N's minimum (0: not given), as Slurm reads it (sbatch_options.node_count)."""
    if text is None:
        return 0
    if text.isascii() and text.isdigit():
        return int(text)
    from ranch.cli.sbatch_options import node_count

    return node_count(text)[0]


def sizes(args: argparse.Namespace, env: dict[str, str]) -> dict[str, int]:
    """The step's sizes as srun resolves them: its options, else the allocation's variables
    (SLURM_NTASKS as -n, SLURM_NNODES as -N), with srun's warnings where they disagree."""
    allocated = int_env(env, "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    nodes = nodes_of(args.nodes) or allocated
    if allocated and nodes > allocated:
        raise CliError(f"Only allocated {allocated} nodes asked for {nodes}")
    ntasks = args.ntasks or int_env(env, "SLURM_NTASKS", "SLURM_NPROCS")
    per_node = args.ntasks_per_node or int_env(env, "SLURM_NTASKS_PER_NODE")
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
    cpt = args.cpus_per_task or int_env(env, "SRUN_CPUS_PER_TASK")
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
            "io_resume": True,  # rrun acknowledges its output (cli/step_io.py OutputAck)
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
