"""A batch job's environment (Slurm's SLURM_* names and Ranch's) and its output file names
(sbatch's %j %J %x %N %n %t %s %u %A %a %% patterns).

What Slurm 22.05 sets, and when, is checked against a real Slurm by tests/conformance/."""

from __future__ import annotations

import os
import re

from ranch.conf import hostlist
from ranch.protocol.messages import JobSpec
from ranch.protocol.tasklayout import block_layout

# Slurm prints this for %a of a job that is not part of an array (NO_VAL - 1).
NOT_AN_ARRAY_TASK = "4294967294"
MAX_WIDTH = 10  # Slurm's widest zero padding (%12j pads to 10)
_PATTERN = re.compile(r"%(\d*)([jJxNnstuAa%])")
# Inherited values that would lie about this job's allocation: dropped before ours are set.
_DROPPED = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "SLURM_JOB_GPUS")


def node_index(spec: JobSpec, node: str) -> int:
    """SLURM_NODEID: this node's place in the allocation (0 when the list cannot tell)."""
    try:
        names = hostlist.expand(spec.nodelist) if spec.nodelist else []
    except ValueError:
        return 0
    return names.index(node) if node in names else 0


def _per_node(spec: JobSpec, env: dict[str, str]) -> dict[str, str]:
    """SLURM_JOB_CPUS_PER_NODE and SLURM_TASKS_PER_NODE. A current rctld sends every node's
    CPUs; an older one this node's only, so a job on several nodes then gets them only where
    every node must hold the same share (its CPUs, or its tasks, divide evenly); a value that
    might be wrong is left out."""
    nodes, cpus, per_task = max(1, spec.num_nodes), spec.cpus, max(1, spec.cpus_per_task)
    tasks_given = "SLURM_NTASKS" in env
    per_node: tuple[int, ...] = ()
    if len(spec.cpus_per_node) == nodes:
        per_node = spec.cpus_per_node
    elif nodes == 1 or cpus * nodes == spec.ntasks * per_task:
        per_node = (cpus,) * nodes
    out = {}
    if per_node:
        out["SLURM_JOB_CPUS_PER_NODE"] = hostlist.compress_counts(per_node)
        ntasks = spec.ntasks if tasks_given else sum(max(1, c // per_task) for c in per_node)
        out["SLURM_TASKS_PER_NODE"] = hostlist.compress_counts(
            block_layout(ntasks, [max(1, c // per_task) for c in per_node]))
    elif tasks_given and spec.ntasks % nodes == 0:
        out["SLURM_TASKS_PER_NODE"] = hostlist.compress_counts([spec.ntasks // nodes] * nodes)
    return out


def _job_variables(spec: JobSpec, node: str, env: dict[str, str]) -> dict[str, str]:
    """What slurmd sets in every batch job's environment (over what it was submitted with)."""
    job_id = str(spec.job_id)
    nodelist = spec.nodelist or node
    return {
        "ENVIRONMENT": "BATCH",
        "HOSTNAME": node,
        "SLURM_JOB_ID": job_id,
        "SLURM_JOBID": job_id,
        "RANCH_JOB_ID": job_id,
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(spec.num_nodes),
        "SLURM_NNODES": str(spec.num_nodes),
        "SLURM_CPUS_ON_NODE": str(spec.cpus),
        # the directory sbatch ran in (rbatch exports it); -D changes only the work dir
        "SLURM_SUBMIT_DIR": env.get("SLURM_SUBMIT_DIR") or spec.workdir,
        "SLURM_SUBMIT_HOST": spec.submit_host,
        "SLURM_JOB_PARTITION": spec.partition,
        **({"SLURM_CLUSTER_NAME": spec.cluster_name} if spec.cluster_name else {}),
        "SLURM_JOB_USER": spec.user,
        "SLURM_JOB_UID": str(spec.uid),
        "SLURM_JOB_GID": str(spec.gid),
        "SLURM_NODEID": str(node_index(spec, node)),
        "SLURMD_NODENAME": node,
        # the batch script is task 0 of the job's batch step
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_GTIDS": "0",
        "SLURM_TOPOLOGY_ADDR": node,  # no TopologyPlugin: the node alone
        "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
        "SLURM_NODE_ALIASES": "(null)",
        "RANCH_RESTART_COUNT": str(spec.restarts),
    }


def job_environment(spec: JobSpec, node: str) -> dict[str, str]:
    env = {k: v for k, v in spec.env if k not in _DROPPED and "=" not in k and "\0" not in k + v}
    # sbatch (and rbatch) export SLURM_NTASKS and SLURM_CPUS_PER_TASK only for -n and -c; more
    # than one task or CPU a task can only have been asked for
    if spec.ntasks != 1 or "SLURM_NTASKS" in env:
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(spec.ntasks)
    if spec.cpus_per_task != 1 or "SLURM_CPUS_PER_TASK" in env:
        env["SLURM_CPUS_PER_TASK"] = str(spec.cpus_per_task)
    ours = _job_variables(spec, node, env)
    ours.update(_per_node(spec, env))
    if spec.restarts:  # Slurm sets it only on a requeued run: scripts test it with -n
        ours["SLURM_RESTART_COUNT"] = str(spec.restarts)
    else:
        env.pop("SLURM_RESTART_COUNT", None)  # an outer job's, inherited
    # what the job asked (rbatch sets it for --mem): not what --mem-per-cpu or --exclusive
    # came to, as slurmd reads the job's pn_min_memory
    if spec.mem_mib and "SLURM_MEM_PER_NODE" in env:
        ours["SLURM_MEM_PER_NODE"] = str(spec.mem_mib)
    if spec.array_job_id:
        ours["SLURM_ARRAY_JOB_ID"] = str(spec.array_job_id)
        if spec.array_task_id is not None:
            ours["SLURM_ARRAY_TASK_ID"] = str(spec.array_task_id)
    if spec.gpus:
        ids = ",".join(str(i) for i in spec.gpus)
        ours.update(CUDA_VISIBLE_DEVICES=ids, SLURM_JOB_GPUS=ids, GPU_DEVICE_ORDINAL=ids)
    # the batch script is task 0 of the batch step, as slurmstepd tells it
    ours.update(SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_GTIDS="0", ENVIRONMENT="BATCH")
    env.update(ours)
    if env.get("SLURM_GET_USER_ENV") == "1":
        _login_basics(env, spec.uid)
    env.setdefault("PATH", os.defpath)
    return env


def _login_basics(env: dict[str, str], uid: int) -> None:
    """--get-user-env (and --export=NONE, which implies it): slurmd loads the user's login
    environment; Ranch fills in what a login sets from the password database."""
    import pwd

    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return
    for key, value in (("HOME", pw.pw_dir), ("USER", pw.pw_name), ("LOGNAME", pw.pw_name),
                       ("SHELL", pw.pw_shell or "/bin/sh")):
        env.setdefault(key, value)


def expand_pattern(pattern: str, spec: JobSpec, node: str) -> str:
    """sbatch's filename pattern for the batch script: %j %J (the job id: the batch step has no
    step number), %x, %N, %n (node index), %t (task 0), %s ("batch"), %u, %A, %a, %%, with an
    optional zero-pad width (%4j) for the numbers. Other letters are kept as written; a pattern
    with a backslash in it is taken literally, less its backslashes, as Slurm does."""
    if "\\" in pattern:
        return pattern.replace("\\", "")

    def one(match: re.Match[str]) -> str:
        width, letter = match.groups()
        if letter == "%":
            return "%"
        if letter in "jJ":
            value = str(spec.job_id)
        elif letter == "x":
            value = spec.name
        elif letter == "N":
            value = node
        elif letter == "n":
            value = str(node_index(spec, node))
        elif letter == "t":
            value = "0"
        elif letter == "s":
            return "batch"
        elif letter == "u":
            value = spec.user
        elif letter == "A":
            value = str(spec.array_job_id or spec.job_id)
        elif spec.array_task_id is not None:  # "a"
            value = str(spec.array_task_id)
        else:
            value = NOT_AN_ARRAY_TASK
        if width and letter in "jJnstAa":
            return value.zfill(min(int(width), MAX_WIDTH))
        return value

    return _PATTERN.sub(one, pattern)


def output_paths(spec: JobSpec, node: str) -> tuple[str, str]:
    """(stdout, stderr) as absolute paths; stderr equals stdout when not given."""
    out = os.path.join(spec.workdir, expand_pattern(spec.stdout or "slurm-%j.out", spec, node))
    err = out
    if spec.stderr:
        err = os.path.join(spec.workdir, expand_pattern(spec.stderr, spec, node))
    return out, err


def input_path(spec: JobSpec, node: str) -> str:
    """-i: the script's stdin, an absolute path ("" = /dev/null)."""
    if not spec.input or spec.input == "none":
        return ""
    return os.path.join(spec.workdir, expand_pattern(spec.input, spec, node))


def append_output(spec: JobSpec) -> bool:
    """--open-mode=append, or a requeued run without --open-mode=truncate (a requeue keeps
    the earlier runs' output; Slurm truncates unless JobFileAppend, Ranch chose to keep it)."""
    if spec.open_mode == "append":
        return True
    return spec.open_mode != "truncate" and spec.restarts > 0
