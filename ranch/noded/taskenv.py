"""What a step's task gets on its node: srun's environment, its -o/-e/-i file names, its argv
(behind the shim that sets SLURM_TASK_PID), and slurmstepd's lines about it."""

from __future__ import annotations

import os
import re
import shutil
from typing import Any

from ranch.conf import hostlist
from ranch.conf.timefmt import slurm_timestamp
from ranch.protocol.messages import StepSpec

# Names rrun's environment may carry from the batch script that would lie about this step.
_DROPPED = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "SLURM_TASK_PID")  # set anew
_PATTERN = re.compile(r"%(\d*)([jJsStnNuxAa%])")
NOT_AN_ARRAY_TASK = "4294967294"  # %a outside an array (slurmstepd prints NO_VAL)


def expand(pattern: str, spec: StepSpec, node: str, task: int, job_name: str = "",
           array_job_id: int = 0, array_task_id: int | None = None) -> str:
    """srun's -o/-e/-i patterns: %j %J %s %t %n %N %u %x (the job's name) %%, and in an
    array task %A (the array's master job id) and %a (the task's index)."""
    values = {"j": str(spec.job_id), "J": f"{spec.job_id}.{spec.step_id}",
              "A": str(array_job_id or spec.job_id),
              "a": NOT_AN_ARRAY_TASK if array_task_id is None else str(array_task_id),
              "s": str(spec.step_id), "S": str(spec.step_id), "t": str(task),
              "n": str(spec.node_index), "N": node, "u": spec.user,
              "x": job_name or spec.name}

    def one(m: re.Match[str]) -> str:
        width, key = m.group(1), m.group(2)
        if key == "%":
            return "%"
        value = values[key]
        return value.zfill(min(int(width), 10)) if width and value.isdigit() else value

    return os.path.join(spec.cwd, _PATTERN.sub(one, pattern))


def task_environment(spec: StepSpec, node: str, local: int, task: int, cpus_on_node: int
                     ) -> dict[str, str]:
    """What srun gives each task: rrun's environment, then the step's SLURM_* variables."""
    env = {k: v for k, v in spec.env if k not in _DROPPED and "=" not in k and "\0" not in k + v}
    step = str(spec.step_id)
    nodes = str(len(hostlist.expand(spec.nodelist)) if spec.nodelist else 1)
    env.update({
        "SLURM_JOB_ID": str(spec.job_id), "SLURM_JOBID": str(spec.job_id),
        "SLURM_STEP_ID": step, "SLURM_STEPID": step,
        # SLURM_NODELIST stays the job's (srun 22.05 leaves it), SLURM_NNODES is the step's
        "SLURM_STEP_NODELIST": spec.nodelist,
        "SLURM_NODELIST": spec.job_nodelist or spec.nodelist,
        "SLURM_STEP_NUM_NODES": nodes, "SLURM_NNODES": nodes,
        "SLURM_STEP_NUM_TASKS": str(spec.ntasks), "SLURM_NTASKS": str(spec.ntasks),
        "SLURM_NPROCS": str(spec.ntasks),
        "SLURM_STEP_TASKS_PER_NODE": spec.tasks_per_node,
        "SLURM_TASKS_PER_NODE": spec.tasks_per_node,
        "SLURM_PROCID": str(task), "SLURM_LOCALID": str(local),
        "SLURM_NODEID": str(spec.node_index),
        "SLURM_GTIDS": ",".join(str(t) for t in spec.tasks),
        "SLURMD_NODENAME": node, "SLURM_TOPOLOGY_ADDR": node,
        "SLURM_CPUS_ON_NODE": str(cpus_on_node),
        "SLURM_LAUNCH_NODE_IPADDR": spec.io_host,
        "SLURM_SRUN_COMM_HOST": spec.io_host, "SLURM_SRUN_COMM_PORT": str(spec.io_port),
        "SLURM_STEP_LAUNCHER_PORT": str(spec.io_port),
    })
    env.setdefault("SLURM_DISTRIBUTION", "block")  # rrun sets srun's choice
    if spec.job_nodelist:
        env["SLURM_JOB_NODELIST"] = spec.job_nodelist
    if spec.cpus_per_task > 1:
        env["SLURM_CPUS_PER_TASK"] = str(spec.cpus_per_task)
    if spec.gpus:
        gpus = spec.gpus[local] if local < len(spec.gpus) else ()
        env["CUDA_VISIBLE_DEVICES"] = env["GPU_DEVICE_ORDINAL"] = ",".join(map(str, gpus))
    return env


# SLURM_TASK_PID is the task's own pid, known only once it was forked: a shell sets it and
# execs the program in its place (same pid, same process group)
_PID_SHIM = 'SLURM_TASK_PID=$$; export SLURM_TASK_PID; exec "$0" "$@"'


def task_argv(spec: StepSpec, env: dict[str, str]) -> list[str]:
    """The task's argv behind the pid shim; the program is looked up first (as execvp would,
    on the task's PATH), so that one that is missing fails with execve's own words."""
    argv = list(spec.argv)
    if not argv:
        raise FileNotFoundError(2, "No such file or directory")
    prog = argv[0]
    path: str | None
    if "/" in prog:
        path = prog if os.path.isabs(prog) else os.path.join(spec.cwd, prog)
        if not os.path.exists(path):
            raise FileNotFoundError(2, "No such file or directory", prog)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(13, "Permission denied", prog)
    else:
        # no PATH (--export=NONE): slurmstepd finds nothing either
        path = shutil.which(prog, path=env["PATH"]) if env.get("PATH") else None
        if path is None:
            raise FileNotFoundError(2, "No such file or directory", prog)
    return ["/bin/sh", "-c", _PID_SHIM, path, *argv[1:]]


def cancelled_line(spec: StepSpec, node: str) -> str:
    """slurmstepd's line when srun aborts the step (SIGTERM, Ctrl-C twice)."""
    when = slurm_timestamp()
    return (f"slurmstepd-{node}: error: *** STEP {spec.job_id}.{spec.step_id} ON {node} "
            f"CANCELLED AT {when} ***\n")


_PER_NODE = re.compile(r"%\d*[tnN]")  # a name no other node's task writes


def open_out(path: str, pattern: str, opened: set[str]) -> Any:
    """A task's -o/-e file, truncated as srun's are the first time this step opens it here
    (a name every node shares: see truncate_shared), then opened to append, so that the tasks
    sharing it each add their own lines."""
    if path not in opened:
        opened.add(path)
        if _PER_NODE.search(pattern):
            open(path, "wb").close()
    return open(path, "ab")


def truncate_shared(spec: StepSpec, node: str, job_name: str, opened: set[str],
                    array_job_id: int = 0, array_task_id: int | None = None) -> None:
    """The step's first node truncates the -o/-e files every node's tasks share, before it
    even reaches rrun (its tasks and the others' start after that, by a connection and a fork
    at least)."""
    if spec.node_index != 0:
        return
    for pattern in (spec.stdout, spec.stderr):
        if pattern and not _PER_NODE.search(pattern):
            path = expand(pattern, spec, node, 0, job_name, array_job_id, array_task_id)
            if path not in opened:
                opened.add(path)
                try:
                    open(path, "wb").close()
                except OSError:
                    pass  # the task's own open says why


class OpenError(OSError):
    """A task's -o/-e/-i file that could not be opened (slurmstepd: `Could not open stdout
    file PATH: why`, the task exits 1 and its program never starts)."""

    def __init__(self, which: str, path: str, exc: OSError) -> None:
        super().__init__(exc.errno, exc.strerror)
        self.line = f"Could not open {which} file {path}: {exc.strerror or exc}"


def exec_error(spec: StepSpec, exc: BaseException, node: str) -> str:
    """What slurmstepd says when a task's program cannot be started."""
    cmd = spec.argv[0] if spec.argv else ""
    if isinstance(exc, OpenError):
        return f"slurmstepd-{node}: error: {exc.line}\n"
    if isinstance(exc, FileNotFoundError):
        why = "No such file or directory"
    elif isinstance(exc, PermissionError):
        why = "Permission denied"
    else:
        why = str(exc)
    return f"slurmstepd-{node}: error: execve(): {cmd}: {why}\n"
