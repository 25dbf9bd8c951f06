"""What sbatch 22.05 itself adds to the job's environment before sending it (src/sbatch/),
whatever --export keeps: the job inherits these, and the node sets SLURM_NTASKS and
SLURM_CPUS_PER_TASK only for jobs whose submitter asked for tasks or CPUs a task (checked
against a real Slurm by tests/conformance/)."""

from __future__ import annotations

import os


def added(v: dict[str, object]) -> dict[str, str]:
    """`v`: rbatch's option values by long name."""
    env = {"SLURM_SUBMIT_DIR": os.getcwd(),  # where sbatch ran, whatever -D says
           "SLURM_SUBMIT_HOST": os.uname().nodename}
    try:
        env["SLURM_PRIO_PROCESS"] = str(os.getpriority(os.PRIO_PROCESS, 0))
    except OSError:
        pass
    if v.get("ntasks") is not None:
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(v["ntasks"])
    if v.get("cpus-per-task") is not None:
        env["SLURM_CPUS_PER_TASK"] = str(v["cpus-per-task"])
    return env
