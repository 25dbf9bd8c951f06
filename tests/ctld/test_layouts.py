"""CPU counts per layout as Slurm 22.05 holds them (each measured on a real Slurm by
tests/conformance/test_combinations.py): tasks that do not divide evenly over -N nodes, a
spread job one node can hold, an --exclusive job's CPUs after it ended, srun's block step."""

from __future__ import annotations

from ranch.protocol.tasklayout import block_layout as block_counts
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, wall
from .test_jobs import Beats, end, job, rec

CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
NodeName=c[1-2] CPUs=2 RealMemory=1000
PartitionName=main Nodes=c[1-2] Default=YES
"""


def cluster() -> tuple[Cluster, dict]:
    c = Cluster(make_config(text=CONF), wall=wall)
    conns = {n: register(c, n, cpus=2, gpus=0)[1] for n in ("c1", "c2")}
    return c, conns


def cpus(c: Cluster, job_id: int) -> dict[str, int]:
    return {n: s.cpus for n, s in c.jobs.jobs[job_id].shares.items()}


async def test_three_tasks_on_two_nodes_hold_three_cpus() -> None:
    c, _ = cluster()
    j = c.jobs.submit(job(num_nodes=2, max_nodes=2, ntasks=3, ntasks_given=True)).job_id
    assert cpus(c, j) == {"c1": 2, "c2": 1} and rec(c, j)["cpus"] == 3
    # beside a 1-CPU job on c1 it takes what is left there and the rest of c2
    c, _ = cluster()
    c.jobs.submit(job(nodelist="c1", ntasks=1))
    j = c.jobs.submit(job(num_nodes=2, max_nodes=2, ntasks=3, ntasks_given=True)).job_id
    assert cpus(c, j) == {"c1": 1, "c2": 2}


async def test_a_spread_job_one_node_holds_runs_there_alone() -> None:
    c, _ = cluster()
    c.jobs.submit(job(nodelist="c1", ntasks=1))
    j = c.jobs.submit(job(ntasks=2, max_nodes=0, ntasks_given=True)).job_id
    assert cpus(c, j) == {"c2": 2}
    # none holds three: first fit over both
    k = cluster()[0]
    k.jobs.submit(job(nodelist="c1", ntasks=1))
    j = k.jobs.submit(job(ntasks=3, max_nodes=0, ntasks_given=True)).job_id
    assert cpus(k, j) == {"c1": 1, "c2": 2}


async def test_an_exclusive_job_shows_its_nodes_cpus_once_ended() -> None:
    c, conns = cluster()
    j = c.jobs.submit(job(ntasks=1, exclusive=True)).job_id
    assert rec(c, j)["cpus"] == 2
    node = c.jobs.jobs[j].nodes[0]
    Beats(c, conns)(node, jobs_ended=(end(j),))
    assert rec(c, j)["state"] == "COMPLETED" and rec(c, j)["cpus"] == 2


def test_srun_block_counts() -> None:
    assert block_counts(3, [2, 2]) == [2, 1]  # even rooms: the even split, remainder first
    assert block_counts(3, [1, 2]) == [1, 2]
    assert block_counts(5, [2, 2]) == [3, 2]  # past the CPUs: dealt round (then refused)
