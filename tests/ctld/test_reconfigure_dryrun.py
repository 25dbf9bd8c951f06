"""`rcontrol reconfigure --dry-run` in an assembled controller (issue 44): the queue under a
candidate config (PriorityFavorSmall; a partition's PriorityTier) against the one in force, the
jobs it would start at once, a candidate that does not load answered with file:line:col, and
nothing of the live queue or config changed."""

from __future__ import annotations

from pathlib import Path

from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import job, make_config, register, wall

CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
HeartbeatInterval=1000
SlurmdTimeout=5000
SchedulerType=sched/builtin
{extra}
NodeName=n[1-4] CPUs=4 RealMemory=1000
PartitionName=main Nodes=n[1-4] Default=YES
PartitionName=high Nodes=n[1-2]{tier}
"""
SMALL = "PriorityType=priority/multifactor\nPriorityWeightJobSize=1000\nPriorityFavorSmall=YES"


def write(tmp_path: Path, name: str, extra: str = "", tier: str = "") -> str:
    path = tmp_path / name
    path.write_text(CONF.format(extra=extra, tier=tier))
    return str(path)


async def test_dry_run_shows_the_reorder_and_changes_nothing(tmp_path: Path,
                                                             autojump_clock) -> None:
    c = Cluster(make_config(text=CONF.format(extra="", tier="")), wall=wall)
    c.start()
    submit = c.jobs.submission.submit
    # no node is up: every job pends, in submission order under priority/basic
    big = submit(job(num_nodes=4)).job_id
    mid = submit(job(num_nodes=2)).job_id
    small = submit(job(num_nodes=1)).job_id
    urgent = submit(job(partition="high")).job_id
    before = [(j.id, j.priority) for j in c.jobs.store.pending]
    assert [i for i, _ in before] == [big, mid, small, urgent]
    config = c.jobs.settings.config

    reply = await c.jobs.dry_runs.answer(m.ReconfigureDryRun(write(tmp_path, "small.conf",
                                                                   SMALL)))
    assert reply.ok and reply.priority_now == "priority/basic"
    assert reply.priority_after == "priority/multifactor"
    # favour small: 1 node of 4 and 1 CPU of 16 left most; the 4-node job last
    assert [r.job_id for r in reply.rows] == [small, urgent, mid, big]
    row = {r.job_id: r for r in reply.rows}
    assert (row[big].position_now, row[big].position_after) == (1, 4)
    assert row[small].priority_now == dict(before)[small]
    assert row[small].priority_after == int(((4 - 1) / 4 + (16 - 1) / 16) / 2 * 1000)
    assert reply.starts == ()  # no node is up

    tiered = await c.jobs.dry_runs.answer(m.ReconfigureDryRun(write(
        tmp_path, "tier.conf", "PriorityType=priority/multifactor", " PriorityTier=2")))
    assert tiered.rows[0].job_id == urgent

    bad = tmp_path / "bad.conf"
    bad.write_text(CONF.format(extra="PriorityWeightAge=lots", tier=""))
    refused = await c.jobs.dry_runs.answer(m.ReconfigureDryRun(str(bad)))
    assert not refused.ok and refused.errors[0].startswith(f"{bad}:6:")
    # the live queue, its priorities and the config in force are as they were
    assert [(j.id, j.priority) for j in c.jobs.store.pending] == before
    assert c.jobs.settings.config is config
    assert not c.jobs.priorities.factors


async def test_dry_run_names_the_jobs_the_candidate_would_start(tmp_path: Path,
                                                               autojump_clock) -> None:
    own = write(tmp_path, "cluster.conf")
    c = Cluster(make_config(text=Path(own).read_text(), path=own), wall=wall)
    c.start()
    for name in ("n1", "n2", "n3", "n4"):
        register(c, name)
    first = c.jobs.submission.submit(job(num_nodes=3, exclusive=True)).job_id
    big = c.jobs.submission.submit(job(num_nodes=4, exclusive=True)).job_id
    small = c.jobs.submission.submit(job(num_nodes=1, exclusive=True)).job_id
    c.jobs.starts.run()
    # sched/builtin: the first job holds n[1-3]; the 4-node job waits on Resources and its
    # partition with it: the 1-node job waits behind it (Priority) though n4 is free
    assert c.jobs.store.jobs[first].state != "PENDING"
    assert [j.id for j in c.jobs.store.pending] == [big, small]
    # the cluster's own file: the same queue, nothing would start
    same = await c.jobs.dry_runs.answer(m.ReconfigureDryRun())
    assert same.ok and same.path == own
    assert [(r.job_id, r.position_now, r.position_after) for r in same.rows] == [
        (big, 1, 1), (small, 2, 2)]
    assert same.starts == ()
    # favouring small jobs puts the 1-node job first: it would start at once, on n1
    reply = await c.jobs.dry_runs.answer(m.ReconfigureDryRun(write(tmp_path, "small.conf",
                                                                   SMALL)))
    assert [r.job_id for r in reply.rows] == [small, big]
    assert reply.starts == (m.DryRunStart(small, "n4", "main"),)
    assert [j.id for j in c.jobs.store.pending] == [big, small]
    assert c.jobs.store.jobs[small].state == "PENDING"
