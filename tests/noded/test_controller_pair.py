"""rnoded with a controller pair (issue 32), on real TCP: it goes through `--server h1,h2` past
a controller that stands by (ctld/pair/standby.py itself answers) to the one that serves, and it
refuses orders from an older controller seat than one it has seen."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import trio

from ranch.conf.model import AccessSettings
from ranch.ctld.pair import standby
from ranch.noded.gpus import FakeGpus
from ranch.noded.options import NodeOptions
from ranch.noded.session import NodeDaemon
from ranch.protocol import messages as m
from tests.deadline import scaled
from tests.noded.test_session_jobs import KEY, JobController, job, wait_for


async def test_a_standby_sends_the_node_on_to_the_leader(nursery: trio.Nursery,
                                                          tmp_path: Path) -> None:
    ctl = JobController()
    await ctl.start(nursery)
    listeners = await nursery.start(functools.partial(
        standby.serve, "127.0.0.1", 0, KEY, lambda: "c2", "test", "0", AccessSettings()))
    standby_port = listeners[0].socket.getsockname()[1]
    opts = NodeOptions(server=("127.0.0.1", standby_port), name="n1", key=KEY,
                       spool_dir=str(tmp_path / "spool"),
                       servers=(("127.0.0.1", standby_port), ("127.0.0.1", ctl.port)))
    daemon = NodeDaemon(opts, FakeGpus(0, "n1", seed=1), rng=random.Random(0))
    nursery.start_soon(daemon.run)
    with trio.fail_after(scaled(5)):  # at once: no backoff between the two
        await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 1)


async def test_orders_of_an_older_seat_are_refused(nursery: trio.Nursery, tmp_path: Path
                                                   ) -> None:
    ctl = JobController()
    await ctl.start(nursery)
    opts = NodeOptions(server=("127.0.0.1", ctl.port), name="n1", key=KEY,
                       spool_dir=str(tmp_path / "spool"))
    daemon = NodeDaemon(opts, FakeGpus(0, "n1", seed=1), rng=random.Random(0))
    nursery.start_soon(daemon.run)
    await wait_for(lambda: len(ctl.of(m.Heartbeat)) >= 1)
    script = "sleep 300\n"
    assert await ctl.push(m.LaunchJob(job(tmp_path, 1, script), epoch=9)) == m.Ack()
    old = await ctl.push(m.LaunchJob(job(tmp_path, 2, script), epoch=5))
    assert isinstance(old, m.Error) and old.code == "stale_epoch"
    assert daemon.jobs.job_ids() == (1,)  # the deposed controller's launch never ran
    old = await ctl.push(m.KillJob(1, 0, "cancelled", epoch=5))
    assert isinstance(old, m.Error) and old.code == "stale_epoch"
    assert daemon.jobs.job_ids() == (1,)  # nor did its kill
    assert await ctl.push(m.KillJob(1, 0, "cancelled", epoch=9)) == m.Ack()
    await wait_for(lambda: any(e.job_id == 1 for e in ctl.ended()))
