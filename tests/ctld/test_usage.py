"""Fair-share usage in an assembled controller (issue 43), under trio's MockClock: running jobs
accrue billable CPU-seconds every PriorityCalcPeriod into their association and its ancestors,
old usage decays by Slurm's factor, rshare's rows come over ShareRequest, and usage with its last
decay time survives a restore from the saved record."""

from __future__ import annotations

import pytest
import trio

from ranch.assoc import ops, serial
from ranch.assoc.db import AcctDb
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import job, make_config, register, wall

ACCT = ("AccountingStorageType=accounting_storage/slurmdbd\nPriorityCalcPeriod=1\n"
        "HeartbeatInterval=1000\nSlurmdTimeout=5000\n")


def tree() -> AcctDb:
    db = AcctDb.fresh().add_cluster("test")
    db = ops.add_accounts(db, ("physics",)).db
    return ops.add_users(db, ("alice",), ("physics",), default_account="physics").db


def cluster(half_life: str) -> Cluster:
    c = Cluster(make_config(extra=ACCT + f"PriorityDecayHalfLife={half_life}\n"), wall=wall)
    c.controller.accounts.restore(serial.to_json(tree()))
    c.start()
    for n in ("n1", "n2"):
        register(c, n)
    return c


def rows(c: Cluster) -> dict[tuple[str, str], m.ShareLine]:
    reply = c.controller.accounts.shares_reply()
    assert reply.enabled and reply.cluster == "test"
    return {(r.account, r.user): r for r in reply.lines}


async def test_running_jobs_accrue_each_period_without_decay(autojump_clock) -> None:
    c = cluster("0\nPriorityUsageResetPeriod=MONTHLY")
    got = c.jobs.submission.submit(job(cpus_per_task=2, time_limit=60))
    assert c.jobs.store.jobs[got.job_id].state == "RUNNING"
    start = c.jobs.store.jobs[got.job_id].start_time
    async with trio.open_nursery() as nursery:
        nursery.start_soon(c.controller.accounts.run_usage)
        await trio.sleep(0.5)
        first = c.controller.accounts.usage.last_decay
        assert first == 1.7e9  # the loop's first pass only marks the time
        await trio.sleep(60 * 3)  # three calc periods of a minute
        r = rows(c)
        nursery.cancel_scope.cancel()
    last = c.controller.accounts.usage.last_decay
    assert last == first + 180
    want = 2 * (last - max(first, start))  # 2 CPUs, no decay
    assert r[("physics", "alice")].raw_usage == pytest.approx(want)
    assert r[("physics", "")].raw_usage == r[("root", "")].raw_usage == pytest.approx(want)
    assert r[("physics", "alice")].effective_usage == 1.0
    assert r[("physics", "alice")].level_fs == pytest.approx(1.0)  # 1 share of 1, all usage
    assert r[("root", "root")].level_fs is None  # no usage: infinity
    # 2 CPUs x the minutes left of its hour
    assert r[("physics", "alice")].tres_run_mins.startswith(
        f"cpu={int(2 * (start + 3600 - wall()) / 60)},")


async def test_usage_decays_and_survives_a_restore(autojump_clock) -> None:
    c = cluster("0:10:00")  # a ten-minute half-life
    assert isinstance(c.jobs.submission.submit(job(time_limit=60)), m.SubmitReply)
    accounts = c.controller.accounts
    async with trio.open_nursery() as nursery:
        nursery.start_soon(accounts.run_usage)
        await trio.sleep(60 * 5 + 1)
        nursery.cancel_scope.cancel()
    before = accounts.usage
    doc = accounts.save_doc()
    assert doc is not None and doc["usage"]["last_decay"] == before.last_decay
    # each period journaled the tree with its usage (the change log's accounts record)
    assert c.controller.changes.take().accounts == doc
    d = 1 - 0.693 / 600
    # with decay each period's usage is below its run time x CPUs
    alice = tree().find_assoc("test", "physics", "alice", "")
    assert alice is not None
    assert 0 < before.assocs[alice.id] < 300
    # ... and equals the per-period sum of Slurm's formula
    want = 0.0
    for _ in range(5):
        want = want * d ** 60 + 60 * d ** 60
    assert before.assocs[alice.id] == pytest.approx(want, rel=1e-3)
    again = Cluster(make_config(extra=ACCT + "PriorityDecayHalfLife=0:10:00\n"), wall=wall)
    again.controller.accounts.restore(doc)
    assert again.controller.accounts.usage == before


async def test_a_first_start_seeds_usage_from_the_job_history(autojump_clock, tmp_path) -> None:
    from ranch.ctld.jobs.history import FileHistory

    from .test_history import write

    h = FileHistory(str(tmp_path / "hist"))
    end = wall()
    # alice ran 4 CPUs on one node for 600 s, ending now (a ten-minute-old start)
    write(h, {"job_id": 1, "restarts": 0, "state": "COMPLETED", "array_job_id": 0,
              "submit_time": end - 700, "start_time": end - 600, "end_time": end,
              "user": "alice", "account": "", "qos": "", "partition": "main", "cpus": 4,
              "node_count": 1, "mem_per_node": 0, "gpus_per_node": 0})
    c = Cluster(make_config(extra=ACCT + "PriorityDecayHalfLife=0\n"
                            "PriorityUsageResetPeriod=MONTHLY\n"), wall=wall, history=h)
    c.controller.accounts.restore(serial.to_json(tree()))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(c.controller.accounts.run_usage)
        await trio.sleep(0.5)
        nursery.cancel_scope.cancel()
    assert rows(c)[("physics", "alice")].raw_usage == 2400.0  # 600 s x 4 CPUs, no decay
