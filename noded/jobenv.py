"""A batch job's environment (Slurm's SLURM_* names and Ranch's) and its file names (sbatch's
-o/-e/-i patterns, expanded as slurmstepd expands them for a batch script)."""

from __future__ import annotations

import os
import re

from conf import hostlist
from protocol.messages import JobSpec

# Slurm prints this for %a of a job that is not part of an array (NO_VAL - 1).
NOT_AN_ARRAY_TASK = "4294967294"
_PATTERN = re.compile(r"%(%|\d*)([aAjJnNstux]?)")
MAX_WIDTH = 10  # slurmstepd caps a zero-pad width at 10
# Inherited values that would lie about this job's allocation: dropped before ours are set.
_DROPPED = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "SLURM_JOB_GPUS")


def node_index(spec: JobSpec, node: str) -> int:
    """SLURM_NODEID: this node's place in the allocation (0 when the list cannot tell)."""
    try:
        names = hostlist.expand(spec.nodelist) if spec.nodelist else []
    except ValueError:
        return 0
    return names.index(node) if node in names else 0


def job_environment(spec: JobSpec, node: str) -> dict[str, str]:
    env = {k: v for k, v in spec.env if k not in _DROPPED and "=" not in k and "\0" not in k + v}
    job_id = str(spec.job_id)
    nodelist = spec.nodelist or node
    ours = {
        "SLURM_JOB_ID": job_id,
        "SLURM_JOBID": job_id,
        "RANCH_JOB_ID": job_id,
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(spec.num_nodes),
        "SLURM_NNODES": str(spec.num_nodes),
        "SLURM_NTASKS": str(spec.ntasks),
        "SLURM_NPROCS": str(spec.ntasks),
        "SLURM_CPUS_PER_TASK": str(spec.cpus_per_task),
        "SLURM_CPUS_ON_NODE": str(spec.cpus),
        "SLURM_SUBMIT_DIR": spec.workdir,
        "SLURM_SUBMIT_HOST": spec.submit_host,
        "SLURM_JOB_PARTITION": spec.partition,
        "SLURM_JOB_USER": spec.user,
        "SLURM_JOB_UID": str(spec.uid),
        "SLURM_JOB_GID": str(spec.gid),
        "SLURM_NODEID": str(node_index(spec, node)),
        "SLURMD_NODENAME": node,
        "SLURM_RESTART_COUNT": str(spec.restarts),
        "RANCH_RESTART_COUNT": str(spec.restarts),
    }
    if spec.mem_mib:
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
    """sbatch's file name pattern for the batch script (slurmstepd's _create_batch_fname):
    %j and %J the job id, %A the array's job id (the job id outside arrays), %a the task id
    (4294967294 outside arrays), %x the job name, %u the user, %N this node, %n its node id
    (0: the batch script runs on the first node), %t the task (0), %s the step ("batch"), %%
    a %. A width zero-pads numbers (%5j, at most 10). Other letters stay as written; a name
    holding a backslash is taken literally, the backslashes removed (slurmstepd's escape)."""
    if "\\" in pattern:
        return re.sub(r"\\(.?)", r"\1", pattern, flags=re.DOTALL)

    def one(match: re.Match[str]) -> str:
        width, letter = match.groups()
        if width == "%":
            return "%" + letter
        if not letter:
            return match.group(0)
        if letter == "j" or letter == "J":
            value = str(spec.job_id)
        elif letter == "A":
            value = str(spec.array_job_id or spec.job_id)
        elif letter == "a":
            value = str(spec.array_task_id) if spec.array_task_id is not None \
                else NOT_AN_ARRAY_TASK
        elif letter == "n":
            value = str(node_index(spec, node))
        elif letter == "t":
            value = "0"
        elif letter == "s":
            return "batch"
        elif letter == "x":
            return spec.name
        elif letter == "u":
            return spec.user
        else:  # "N"
            return node
        return value.zfill(min(int(width), MAX_WIDTH)) if width else value

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
