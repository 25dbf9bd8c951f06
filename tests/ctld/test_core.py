"""Registration checks, admin requests, snapshots, reconfigure and restore of the core."""

from __future__ import annotations

import time

import orjson
import trio

from ranch.conf import hostlist
from ranch.conf.build import parse_config_text
from ranch.ctld.nodes.snapshot import CACHE_IDLE, EXPIRY_KEY, SNAPSHOT_STALENESS
from ranch.ctld.state import deferred
from ranch.protocol import messages as m
from ranch.protocol.codec import decode, encode
from ranch.statemachine.events import REASON_REQUIRED_MESSAGE as REASON_REQUIRED
from tests.ctld.harness import Harness as Cluster

from .helpers import BASE_CONF, FakeConn, beat, job, make_config, register, state, wall


async def test_unknown_node_is_refused_with_a_reason() -> None:
    cluster = Cluster(make_config(), wall=wall)
    reply, _ = register(cluster, "stranger")
    assert not reply.accepted
    assert reply.reason.startswith("node stranger is not in the config (")


async def test_registration_reply_carries_config_and_state() -> None:
    cluster = Cluster(make_config(), wall=wall)
    reply, _ = register(cluster, "n1")
    assert reply.accepted and reply.node_state == "IDLE"
    assert reply.config_hash == cluster.config.config_hash
    assert reply.settings.heartbeat_interval == 10 and reply.settings.slurmd_timeout == 60
    assert [f.name for f in reply.config_files] == ["t.conf"]


async def test_hardware_below_config_is_invalid() -> None:
    cluster = Cluster(make_config(), wall=wall)
    register(cluster, "n1", mem=900)
    st = cluster.nodes["n1"].state
    assert state(cluster, "n1") == "IDLE+DRAIN+INVALID_REG"
    assert st.reason.text == "Low RealMemory (reported:900 < 100% of configured:1000)"
    register(cluster, "n2", gpus=1)
    assert cluster.nodes["n2"].state.reason.text == "Low GPU count (reported:1 < configured:2)"
    register(cluster, "n3", cpus=2)
    assert cluster.nodes["n3"].state.reason.text.startswith("Low CPUs")
    register(cluster, "n4", tmp=1)
    assert cluster.nodes["n4"].state.reason.text.startswith("Low TmpDisk")
    # A later valid registration clears it.
    register(cluster, "n1")
    assert state(cluster, "n1") == "IDLE"


async def test_update_nodes_rules() -> None:
    cluster = Cluster(make_config(), wall=wall)
    for n in ("n1", "n2", "n3", "n4"):
        register(cluster, n)
    before = {n: state(cluster, n) for n in cluster.nodes}
    r = cluster.update_nodes(m.UpdateNodes("n[1-2],x[7-8]", "DRAIN", "fan", "alice"))
    assert not r.ok and len(r.errors) == 1 and r.errors[0].startswith("unknown node(s): ")
    assert hostlist.expand(r.errors[0].split(": ", 1)[1]) == ["x7", "x8"]
    assert {n: state(cluster, n) for n in cluster.nodes} == before  # nothing changed
    r = cluster.update_nodes(m.UpdateNodes("n1", "DRAIN", None, "alice"))
    assert r.errors == (REASON_REQUIRED,)
    r = cluster.update_nodes(m.UpdateNodes("n1", "bogus", "x", "alice"))
    assert not r.ok and "Valid states are" in r.errors[0]
    r = cluster.update_nodes(m.UpdateNodes("n[1-2]", "dra", "bad fan", "alice"))
    assert r.ok and r.changed == ("n1", "n2")
    reason = cluster.nodes["n1"].state.reason
    assert (reason.text, reason.user) == ("bad fan", "alice") and reason.time > 1.7e9
    # UNDRAIN of a drained and an undrained node: one changes, the other's refusal is reported.
    r = cluster.update_nodes(m.UpdateNodes("n[2-3]", "UNDRAIN", None, "bob"))
    assert not r.ok and r.changed == ("n2",)
    assert len(r.errors) == 1 and "n3" in r.errors[0]
    assert state(cluster, "n2") == "IDLE" and state(cluster, "n3") == "IDLE"
    r = cluster.update_nodes(m.UpdateNodes("ALL", "DOWN", "power work", "carol"))
    assert r.ok and all(state(cluster, n).startswith("DOWN") for n in cluster.nodes)


async def test_jobs_move_base_state() -> None:
    cluster = Cluster(make_config(), wall=wall)
    _, c1 = register(cluster, "n1")
    _, c2 = register(cluster, "n2")
    whole = cluster.jobs.submission.submit(job(nodelist="n1", cpus_per_task=4)).job_id
    one = cluster.jobs.submission.submit(job(nodelist="n2")).job_id
    assert (state(cluster, "n1"), state(cluster, "n2")) == ("ALLOCATED", "MIXED")
    assert cluster.nodes["n1"].last_busy is not None
    beat(cluster, "n1", c1, 1, jobs_ended=(m.JobEnd(whole, "COMPLETED"),))
    beat(cluster, "n2", c2, 1, jobs_ended=(m.JobEnd(one, "COMPLETED"),))
    assert (state(cluster, "n1"), state(cluster, "n2")) == ("IDLE", "IDLE")


async def test_snapshot_is_cached_per_generation(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    _, conn = register(cluster, "n1")
    s1 = cluster.snapshot()
    assert cluster.snapshot() is s1
    rec = s1.nodes[0]
    assert rec["name"] == "n1" and rec["compact"] == "idle" and rec["complete"] == "IDLE"
    assert rec["partitions"] == ["main"] and rec["gres"] == "gpu:2" and rec["gres_used"] == "gpu:0"
    assert rec["state"] == {"base": "IDLE", "flags": [], "reason": None}
    # Heartbeat-only data may be a second stale; a state change never is.
    beat(cluster, "n1", conn, 1)
    assert cluster.snapshot() is s1
    await trio.sleep(SNAPSHOT_STALENESS[False] + 0.1)
    s2 = cluster.snapshot()
    assert s2 is not s1 and s2.nodes[0]["cpu_load"] == 0.1
    cluster.update_nodes(m.UpdateNodes("n1", "DRAIN", "x", "a"))
    s3 = cluster.snapshot()
    assert s3.nodes[0]["compact"] == "drain"
    assert s3.nodes[0]["state"]["reason"]["user"] == "a"
    sm = cluster.snapshot(metrics=True)
    assert sm.nodes[0]["metrics"]["mem_total_mib"] == 1000
    assert decode("Snapshot", encode(sm)) == sm


async def test_snapshot_body_keeps_only_the_fields_asked_for(autojump_clock) -> None:

    cluster = Cluster(make_config(), wall=wall)
    register(cluster, "n1")
    full = orjson.loads(cluster.snapshot_body())
    assert "gres" in full["nodes"][0] and len(full["nodes"]) == 4
    body = cluster.snapshot_body(fields=("name", "compact", "no_such_key"))
    cut = orjson.loads(body)
    assert cut["nodes"][0] == {"name": "n1", "compact": "idle"}
    assert cut["partitions"] == full["partitions"] and cut["cluster_name"] == "test"
    # Cached per selection (order-insensitive) until the next change.
    assert cluster.snapshot_body(fields=("compact", "name", "no_such_key")) is body
    cluster.update_nodes(m.UpdateNodes("n1", "DRAIN", "x", "a"))
    assert orjson.loads(cluster.snapshot_body(fields=("compact",)))["nodes"][0] == {
        "compact": "drain"}


async def test_snapshot_caches_are_let_go_when_nobody_asks(autojump_clock) -> None:
    """Issue 47: the cached snapshot, its bodies and the nodes' records are held while asked
    for, and let go CACHE_IDLE after the last request (by the controller's deadline task)."""
    cluster = Cluster(make_config(), wall=wall)
    _, conn = register(cluster, "n1")
    views = cluster.controller.views

    seqs = iter(range(1, 1000))

    async def beating(seconds: float) -> None:  # n1 stays IDLE: its record is only patched
        for _ in range(int(seconds / 5)):
            await trio.sleep(5)
            beat(cluster, "n1", conn, next(seqs))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cluster.deadlines.run, cluster.on_deadlines)
        s1 = cluster.snapshot()
        body = orjson.loads(cluster.snapshot_body())
        assert EXPIRY_KEY in cluster.deadlines
        await beating(CACHE_IDLE / 2)
        cluster.snapshot_body()  # asked again: held CACHE_IDLE from now
        await beating(CACHE_IDLE * 0.75)
        assert views._snaps and views._bodies
        assert cluster.nodes["n1"].record is not None
        await beating(CACHE_IDLE / 2)
        assert not views._snaps and not views._bodies
        assert all(n.record is None for n in cluster.nodes.values())
        assert EXPIRY_KEY not in cluster.deadlines
        s2 = cluster.snapshot()  # built again, and the timer set again
        assert [r["name"] for r in s2.nodes] == [r["name"] for r in s1.nodes]
        assert s2.nodes[0]["compact"] == "idle" and s2.nodes[0]["last_heartbeat"] is not None
        assert orjson.loads(cluster.snapshot_body())["partitions"] == body["partitions"]
        assert EXPIRY_KEY in cluster.deadlines
        nursery.cancel_scope.cancel()


async def test_restore_keeps_drains_and_reasons(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    register(cluster, "n1")
    cluster.update_nodes(m.UpdateNodes("n1", "DRAIN", "bad fan", "alice"))
    cluster.update_nodes(m.UpdateNodes("n2", "FAIL", "psu", "bob"))
    doc = orjson.loads(deferred.dumps(cluster.save_doc()))  # as the state file holds it
    # The config lost n4 and gained n5.
    text = BASE_CONF.format(rts=1, extra="").replace("n[1-4]", "n[1-3],n5")
    again = Cluster(parse_config_text(text, path="/t.conf"), wall=wall)
    again.restore(doc)
    st = again.nodes["n1"].state
    assert again.nodes["n1"].complete == "IDLE+DRAIN"
    assert (st.reason.text, st.reason.user) == ("bad fan", "alice")
    assert again.nodes["n2"].state.reason.text == "psu"
    assert orjson.loads(again.nodes["n1"].hardware.json())["real_memory_mib"] == 1000
    assert "n4" not in again.nodes and state(again, "n5") == "UNKNOWN"


async def test_reconfigure_adds_removes_and_pushes(autojump_clock) -> None:
    cluster = Cluster(make_config(), wall=wall)
    _, conn = register(cluster, "n1")
    text = BASE_CONF.format(rts=1, extra="HealthCheckInterval=30").replace("n[1-4]", "n[1-2],n9")
    new = parse_config_text(text, path="/t.conf")
    result = cluster.apply_config(new)
    assert result.ok and result.config_hash == new.config_hash
    assert sorted(cluster.nodes) == ["n1", "n2", "n9"]
    assert len(conn.pushed) == 1 and conn.pushed[0].settings.health_check_interval == 30
    assert cluster.snapshot().nodes[-1]["name"] == "n9"
    assert beat(cluster, "n1", conn, 1).config_hash == new.config_hash


async def test_config_dump_units_and_order() -> None:
    cluster = Cluster(make_config(), wall=wall)
    items = dict(cluster.config_dump.items)
    assert items["SlurmdTimeout"] == "60 sec" and items["HeartbeatInterval"] == "10 sec"
    assert items["SuspendTime"] == "NONE" and items["ClusterName"] == "test"
    keys = [k for k, _ in cluster.config_dump.items]
    assert keys == sorted(keys, key=str.lower)


async def test_update_of_1000_nodes_is_fast() -> None:
    text = BASE_CONF.format(rts=1, extra="").replace("n[1-4]", "n[0001-1000]")
    cluster = Cluster(parse_config_text(text, path="/t.conf"), wall=wall)
    conns = [FakeConn() for _ in range(1000)]
    for i, name in enumerate(cluster.nodes):
        register(cluster, name, conns[i])
    t0 = time.perf_counter()
    r = cluster.update_nodes(m.UpdateNodes("n[0001-1000]", "DRAIN", "rack move", "alice"))
    dt = time.perf_counter() - t0
    assert r.ok and len(r.changed) == 1000
    t0 = time.perf_counter()
    snap = cluster.snapshot()
    body = encode(snap)
    dt_snap = time.perf_counter() - t0
    print(f"update 1000 nodes: {dt * 1000:.1f} ms; snapshot+encode: {dt_snap * 1000:.1f} ms, "
          f"{len(body)} bytes")
    assert sorted(r.changed) == sorted(cluster.nodes)


async def test_a_health_checks_huge_message_is_kept_bounded() -> None:
    """A node's health report becomes a drain reason shown everywhere (state, events,
    /metrics labels): it is cut to the same 1,024 characters an admin's Reason= may have."""
    from ranch.protocol.limits import MAX_REASON_CHARS

    cluster = Cluster(make_config(), wall=lambda: 1.7e9)
    _, conn = register(cluster, "n1")
    report = m.HealthReport(verdict="drain", message="HC: " + "x" * (1 << 20))
    beat(cluster, "n1", conn, 1, health=report)
    reason = cluster.nodes["n1"].state.reason
    assert reason is not None and len(reason.text) == MAX_REASON_CHARS
