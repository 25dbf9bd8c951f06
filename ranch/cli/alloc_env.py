"""The SLURM_* environment salloc 22.05 gives what runs in an allocation (env_array_for_job and
salloc.c; checked against a real salloc by tests/conformance/test_alloc.py): ralloc's command and
rrun's step outside a job (cli/allocation.py) get it."""

from __future__ import annotations

import os

from ranch.conf.hostlist import compress_counts


def tasks_per_node(cpus: list[int], cpus_per_task: int, ntasks: int) -> list[int]:
    """Slurm's block layout over the nodes' CPUs (protocol/tasklayout.py)."""
    from ranch.protocol.tasklayout import block_layout

    return block_layout(ntasks, [max(0, c // max(1, cpus_per_task)) for c in cpus])


def environment(record: dict, values: dict[str, object], cluster: str, submit_dir: str
                ) -> dict[str, str]:
    """The variables salloc 22.05 sets for what runs in the allocation (env_array_for_job and
    salloc.c; checked against a real salloc by tests/conformance/test_alloc.py)."""
    job_id = str(record["job_id"])
    nodes = record.get("nodes") or ""
    count = int(record.get("node_count") or 1)
    cpus = [int(c) for c in record.get("node_cpus") or ()] or [
        max(1, int(record.get("cpus") or 1) // count)] * count
    cpt = int(record.get("cpus_per_task") or 1)
    asked = values.get("ntasks") is not None or values.get("ntasks-per-node") is not None
    ntasks = int(record.get("ntasks") or 1) if asked else sum(c // cpt for c in cpus)
    env = {
        "SLURM_SUBMIT_DIR": submit_dir,
        "SLURM_SUBMIT_HOST": os.uname().nodename,
        "SLURM_JOB_ID": job_id,
        "SLURM_JOB_NAME": record.get("name") or "",
        "SLURM_JOB_NUM_NODES": str(count),
        "SLURM_JOB_NODELIST": nodes,
        "SLURM_NODE_ALIASES": "(null)",
        "SLURM_JOB_PARTITION": record.get("partition") or "",
        "SLURM_JOB_CPUS_PER_NODE": compress_counts(cpus),
        "SLURM_JOBID": job_id,
        "SLURM_NNODES": str(count),
        "SLURM_NODELIST": nodes,
        "SLURM_TASKS_PER_NODE": compress_counts(tasks_per_node(cpus, cpt, ntasks)),
        "RANCH_JOB_ID": job_id,
    }
    if values.get("mem") is not None and record.get("mem_per_node"):
        env["SLURM_MEM_PER_NODE"] = str(record["mem_per_node"])
    elif record.get("mem_per_cpu"):
        env["SLURM_MEM_PER_CPU"] = str(record["mem_per_cpu"])
    for key, name in (("account", "SLURM_JOB_ACCOUNT"), ("qos", "SLURM_JOB_QOS")):
        if record.get(key):
            env[name] = str(record[key])
    if values.get("ntasks-per-node") is not None:
        env["SLURM_NTASKS_PER_NODE"] = str(values["ntasks-per-node"])
    if values.get("cpus-per-task") is not None:
        env["SLURM_CPUS_PER_TASK"] = str(cpt)
    if asked:
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(ntasks)
    if cluster:
        env["SLURM_CLUSTER_NAME"] = cluster
    return env
