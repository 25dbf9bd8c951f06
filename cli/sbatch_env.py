"""The environment rbatch submits with: the caller's, plus what sbatch 22.05 itself adds to it
before sending it (src/sbatch/): the job inherits these, and the node sets SLURM_NTASKS and
SLURM_CPUS_PER_TASK only for jobs whose submitter asked for tasks or CPUs a task."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping


def submit_env(environ: Mapping[str, str], get: Callable[[str], object],
               cwd: str) -> list[tuple[str, str]]:
    """`get` reads rbatch's parsed options (None when not given)."""
    env = dict(environ)
    env["SLURM_SUBMIT_DIR"] = cwd  # where sbatch ran, whatever -D says
    env["SLURM_SUBMIT_HOST"] = socket.gethostname()
    try:
        env["SLURM_PRIO_PROCESS"] = str(os.getpriority(os.PRIO_PROCESS, 0))
    except OSError:
        pass
    if get("ntasks") is not None:
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(get("ntasks"))
    if get("cpus_per_task") is not None:
        env["SLURM_CPUS_PER_TASK"] = str(get("cpus_per_task"))
    return sorted(env.items())
