"""SLURM_TASKS_PER_NODE and SLURM_MEM_PER_NODE of a batch job (noded/jobenv.py), as slurmstepd
22.05 sets them; compared with a real Slurm in tests/conformance/test_combinations.py."""

from __future__ import annotations

import pytest

from ranch.noded.jobenv import job_environment
from ranch.protocol.messages import JobSpec
from ranch.protocol.tasklayout import block_layout


@pytest.mark.parametrize(("ntasks", "room", "want"), [
    (3, [2, 1], [2, 1]), (3, [2, 2], [2, 1]), (5, [4, 4], [3, 2]), (5, [2, 2], [3, 2]),
    (4, [1, 1, 1], [2, 1, 1]), (2, [2], [2])])
def test_block_layout(ntasks: int, room: list[int], want: list[int]) -> None:
    assert block_layout(ntasks, room) == want


def spec(**kw) -> JobSpec:
    return JobSpec(job_id=7, name="j", user="ann", uid=1000, gid=1000, script="", workdir="/w",
                   stdout="", **kw)


def test_uneven_layout_has_its_tasks_per_node() -> None:
    env = job_environment(spec(nodelist="c[1-2]", num_nodes=2, ntasks=3, cpus=2,
                               cpus_per_node=(2, 1), env=(("SLURM_NTASKS", "3"),)), "c1")
    assert env["SLURM_TASKS_PER_NODE"] == "2,1" and env["SLURM_JOB_CPUS_PER_NODE"] == "2,1"
    env = job_environment(spec(nodelist="c[1-3]", num_nodes=3, ntasks=5, cpus=2,
                               cpus_per_node=(2, 2, 1), env=(("SLURM_NTASKS", "5"),)), "c1")
    assert env["SLURM_TASKS_PER_NODE"] == "2(x2),1"


def test_memory_per_node_only_when_asked() -> None:
    asked = (("SLURM_MEM_PER_NODE", "100"),)
    assert job_environment(spec(mem_mib=100, env=asked), "c1")["SLURM_MEM_PER_NODE"] == "100"
    # --mem-per-cpu and --exclusive give the job memory; only --mem names it per node
    per_cpu = (("SLURM_MEM_PER_CPU", "50"),)
    assert "SLURM_MEM_PER_NODE" not in job_environment(spec(mem_mib=100, env=per_cpu), "c1")
    assert "SLURM_MEM_PER_NODE" not in job_environment(spec(mem_mib=1000), "c1")
