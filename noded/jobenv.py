"""A batch job's environment (Slurm's SLURM_* names and Ranch's) and its output file names
(sbatch's %j %x %N %u %A %a %% patterns)."""

from __future__ import annotations

import os
import re

from conf import hostlist
from protocol.messages import JobSpec

# Slurm prints this for %a of a job that is not part of an array (NO_VAL - 1).
NOT_AN_ARRAY_TASK = "4294967294"
_PATTERN = re.compile(r"%(\d*)([jxNuAa%])")
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
    env.update(ours)
    env.setdefault("PATH", os.defpath)
    return env


def expand_pattern(pattern: str, spec: JobSpec, node: str) -> str:
    """sbatch's filename pattern: %j %x %N %u %A %a %%, with an optional zero-pad width (%4j).
    Other letters are kept as written."""

    def one(match: re.Match[str]) -> str:
        width, letter = match.groups()
        if letter == "%":
            return "%"
        if letter == "j":
            value = str(spec.job_id)
        elif letter == "x":
            value = spec.name
        elif letter == "N":
            value = node
        elif letter == "u":
            value = spec.user
        elif letter == "A":
            value = str(spec.array_job_id or spec.job_id)
        elif spec.array_task_id is not None:  # "a"
            value = str(spec.array_task_id)
        else:
            value = NOT_AN_ARRAY_TASK
        return value.zfill(int(width)) if width and letter in "jAa" else value

    return _PATTERN.sub(one, pattern)


def output_paths(spec: JobSpec, node: str) -> tuple[str, str]:
    """(stdout, stderr) as absolute paths; stderr equals stdout when not given."""
    out = os.path.join(spec.workdir, expand_pattern(spec.stdout or "slurm-%j.out", spec, node))
    err = out
    if spec.stderr:
        err = os.path.join(spec.workdir, expand_pattern(spec.stderr, spec, node))
    return out, err
