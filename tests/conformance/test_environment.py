"""The environment a batch script sees (`env -0` in the job) against Slurm 22.05's: every
SLURM_* name it sets (and ENVIRONMENT, HOSTNAME), with the same values once ids, paths and the
node the job landed on are normalised; and no SLURM_* name Slurm would not set."""

from __future__ import annotations

import pytest

from tests.conformance.compare import env_of, env_value, param
from tests.conformance.runner import Results
from tests.conformance.scenarios import ENVIRONMENT

# What a 22.05 batch script sees (src/common/env.c, src/sbatch/): SLURM_NTASKS, SLURM_NPROCS
# and SLURM_CPUS_PER_TASK only when -n / -c were given, SLURM_MEM_PER_NODE with --mem,
# SLURM_RESTART_COUNT only once the job was requeued (test_end_states' requeue scenario).
NAMES = ("ENVIRONMENT HOSTNAME SLURMD_NODENAME SLURM_CLUSTER_NAME SLURM_CPUS_ON_NODE "
         "SLURM_CPUS_PER_TASK SLURM_GTIDS SLURM_JOBID SLURM_JOB_CPUS_PER_NODE SLURM_JOB_GID "
         "SLURM_JOB_ID SLURM_JOB_NAME SLURM_JOB_NODELIST SLURM_JOB_NUM_NODES "
         "SLURM_JOB_PARTITION SLURM_JOB_UID SLURM_JOB_USER SLURM_LOCALID SLURM_MEM_PER_NODE "
         "SLURM_NNODES SLURM_NODEID SLURM_NODELIST SLURM_NODE_ALIASES SLURM_NPROCS "
         "SLURM_NTASKS SLURM_PRIO_PROCESS SLURM_PROCID SLURM_RESTART_COUNT SLURM_SUBMIT_DIR "
         "SLURM_SUBMIT_HOST SLURM_TASKS_PER_NODE SLURM_TASK_PID SLURM_TOPOLOGY_ADDR "
         "SLURM_TOPOLOGY_ADDR_PATTERN").split()
# Slurm's own plumbing, which Ranch deliberately does not imitate (tests/conformance/README.md)
NOT_COMPARED = frozenset({"SLURM_CONF", "SLURM_WORKING_CLUSTER"})


@pytest.mark.parametrize(("scenario", "field"),
                         [param(s.name, n) for s in ENVIRONMENT for n in NAMES])
def test_variable(results: Results, scenario: str, field: str) -> None:
    slurm, ranch = results.pair(scenario)
    want = env_value(slurm, field, results.workdirs["slurm"])
    got = env_value(ranch, field, results.workdirs["ranch"])
    assert got == want, f"{scenario}: ${field}: Slurm {want!r}, Ranch {got!r}"


@pytest.mark.parametrize("scenario", [s.name for s in ENVIRONMENT])
def test_no_other_slurm_names(results: Results, scenario: str) -> None:
    """Every SLURM_* name either system set is in NAMES (so compared above) or NOT_COMPARED."""
    slurm, ranch = results.pair(scenario)
    seen = {n for o in (slurm, ranch) for n in env_of(o) if n.startswith("SLURM")}
    assert seen - set(NAMES) - NOT_COMPARED == set()
