"""The node registry's two doors for the job store (issue 29): `set_use` (what the jobs hold of a
node: CPUs and COMPLETING through the state table, memory and GPUs onto the record, the change
reported for the journal) and `push` (a message to a node's connection of now, held until the
next durable write; refused for a node with no connection)."""

from __future__ import annotations

from ranch.ctld.state.changelog import ChangeLog
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import make_config, register, state, wall


def cluster_with_outbox() -> tuple[Cluster, ChangeLog, list[str]]:
    woken: list[str] = []
    changes = ChangeLog(on_outbox=lambda: woken.append("outbox"))
    return Cluster(make_config(), wall=wall, changes=changes), changes, woken


async def test_set_use_goes_through_the_table_and_onto_the_record() -> None:
    c, changes, _ = cluster_with_outbox()
    register(c, "n1")
    changes.take()
    c.set_use("n1", cpus=2, mem=300, gpus=(1,), completing=False)
    node = c.nodes["n1"]
    assert state(c, "n1") == "MIXED"
    assert (node.alloc_mem, node.gpus_used) == (300, (1,))
    assert node.last_busy is not None
    assert "n1" in changes.take().nodes  # the journal gets it before a reply confirms it
    c.set_use("n1", cpus=9, mem=1000, gpus=(0, 1), completing=False)  # more than it has
    assert state(c, "n1") == "ALLOCATED" and node.state.cpus_alloc == 4
    c.set_use("n1", cpus=0, mem=0, gpus=(), completing=True)
    assert state(c, "n1") == "IDLE+COMPLETING"
    c.set_use("n1", cpus=0, mem=0, gpus=(), completing=False)
    assert state(c, "n1") == "IDLE" and (node.alloc_mem, node.gpus_used) == (0, ())
    c.set_use("gone", cpus=1, mem=1, gpus=(), completing=False)  # not a node: nothing happens


async def test_set_use_that_changes_nothing_reports_nothing() -> None:
    c, changes, _ = cluster_with_outbox()
    register(c, "n1")
    c.set_use("n1", cpus=1, mem=10, gpus=(), completing=False)
    changes.take()
    c.set_use("n1", cpus=1, mem=10, gpus=(), completing=False)
    assert not changes.pending()


async def test_push_waits_for_the_write_and_refuses_an_unconnected_node() -> None:
    c, changes, woken = cluster_with_outbox()
    _, conn = register(c, "n1")
    register(c, "n2")
    c.disconnected(c.nodes["n2"].conn)  # its connection ended
    kill = m.KillJob(job_id=7, signal=0, reason="", restarts=0, epoch=0)
    assert c.push("n1", kill)
    assert conn.pushed == [] and woken == ["outbox"]  # held until the next durable write
    assert not c.push("n2", kill) and not c.push("nowhere", kill)
    for fn, args in changes.take_outbox():  # what Durability does once the write is on disk
        fn(*args)
    assert conn.pushed == [kill]


async def test_push_goes_to_the_connection_it_was_asked_on() -> None:
    """A node that reconnects before the write does not get the old connection's push on the
    new one: it learns what it runs from its registration's reply."""
    c, changes, _ = cluster_with_outbox()
    _, old = register(c, "n1")
    kill = m.KillJob(job_id=7, signal=0, reason="", restarts=0, epoch=0)
    assert c.push("n1", kill)
    _, new = register(c, "n1")
    for fn, args in changes.take_outbox():
        fn(*args)
    assert old.pushed == [kill] and new.pushed == []
