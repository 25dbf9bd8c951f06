"""-n without -N and --gpus-per-task (the user guide's `rrun -n8 --gpus-per-task=1`): the tasks
spread over as many nodes as their CPUs and GPUs need, as Slurm's cons_tres places them, where
before all eight tasks' GPUs were asked of one node and the job was refused."""

from __future__ import annotations

from ranch.cli.sbatch_request import resources
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, wall
from .test_jobs import job, launches, rec

# The demo's gpu partition: four nodes of 2 CPUs and 4 GPUs each (examples/slurm-like.conf;
# the fake hardware here reports 1000 MB).
GPU_CONF = """
ClusterName=test
SlurmctldHost=localhost
NodeName=gpu[01-04] CPUs=2 RealMemory=1000 Gres=gpu:4
PartitionName=gpu Nodes=gpu[01-04] Default=YES
"""


def gpu_cluster() -> tuple[Cluster, dict]:
    cluster = Cluster(make_config(text=GPU_CONF), wall=wall)
    conns = {n: register(cluster, n, cpus=2, gpus=4)[1]
             for n in ("gpu01", "gpu02", "gpu03", "gpu04")}
    return cluster, conns


def submit_as_rbatch(cluster: Cluster, *argv: str) -> m.SubmitReply | m.Error:
    """The request rbatch (and rrun, ralloc) make of these options, submitted."""
    opts: dict[str, object] = {}
    for arg in argv:
        key, _, value = arg.lstrip("-").partition("=")
        opts[key] = value
    return cluster.jobs.submit(job(**resources(opts)))


async def test_eight_tasks_of_one_gpu_spread_over_the_gpu_nodes() -> None:
    cluster, conns = gpu_cluster()
    reply = submit_as_rbatch(cluster, "--ntasks=8", "--gpus-per-task=1")
    assert isinstance(reply, m.SubmitReply), reply
    r = rec(cluster, reply.job_id)
    assert r["state"] == "RUNNING" and r["nodes"] == "gpu[01-04]" and r["cpus"] == 8
    shares = cluster.jobs.jobs[reply.job_id].shares
    assert {n: (s.cpus, len(s.gpus)) for n, s in shares.items()} == {
        n: (2, 2) for n in conns}  # two tasks a node, each with its own GPU
    [spec] = launches(conns["gpu01"])
    assert spec.ntasks == 8 and spec.num_nodes == 4


async def test_gpus_per_task_counts_against_each_nodes_gpus() -> None:
    cluster, _ = gpu_cluster()
    # 3 GPUs a task: one task a node (4 GPUs), so four tasks fit and five never do
    ok = submit_as_rbatch(cluster, "--ntasks=4", "--gpus-per-task=3")
    assert isinstance(ok, m.SubmitReply), ok
    assert {len(s.gpus) for s in cluster.jobs.jobs[ok.job_id].shares.values()} == {3}
    refused = submit_as_rbatch(cluster, "--ntasks=5", "--gpus-per-task=3")
    assert isinstance(refused, m.Error) and refused.field == "ntasks"
    assert refused.message.endswith("5 task(s) of 1 CPU(s) and 3 GPU(s) each; node(s) of "
                                    "partition gpu hold 4 such task(s) at most")
    # more GPUs a task than any node has: refused as before, naming the GPUs
    five = submit_as_rbatch(cluster, "--ntasks=1", "--gpus-per-task=5")
    assert isinstance(five, m.Error) and "Requested node configuration is not available" in (
        five.message)


async def test_with_nodes_given_the_gpus_per_node_stay_fixed() -> None:
    cluster, _ = gpu_cluster()
    reply = submit_as_rbatch(cluster, "--nodes=2", "--ntasks=4", "--gpus-per-task=1")
    assert isinstance(reply, m.SubmitReply), reply
    shares = cluster.jobs.jobs[reply.job_id].shares
    assert sorted(len(s.gpus) for s in shares.values()) == [2, 2]
