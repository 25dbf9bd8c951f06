"""A node with a HealthCheckProgram checks its health before it registers (protocol v3)."""

from __future__ import annotations

import orjson

from ranch.protocol import messages as m
from ranch.protocol.codec import encode
from tests.ctld.harness import Harness as Cluster

from .helpers import FakeConn, hardware, make_config, state, wall

HC = "HealthCheckProgram=/usr/sbin/hc\nHealthCheckInterval=30"


def reg(cluster: Cluster, health: m.HealthReport | None, version: int = 3) -> m.RegisterReply:
    msg = m.Register("n1", hardware(), 1.0, "0.1.0", health=health)
    return cluster.register(msg, FakeConn(), version=version)


async def test_v3_register_without_health_is_asked_to_check_first() -> None:
    cluster = Cluster(make_config(extra=HC), wall=wall)
    before = (state(cluster, "n1"), cluster.changes.gen)
    reply = reg(cluster, None)
    assert not reply.accepted and reply.health_check_first
    assert reply.reason == "health check required before registration"
    assert reply.settings is not None and reply.settings.health_check_program == "/usr/sbin/hc"
    assert [f.name for f in reply.config_files] == ["t.conf"]
    assert reply.config_hash == cluster.config.config_hash
    assert (state(cluster, "n1"), cluster.changes.gen) == before == ("UNKNOWN", before[1])
    node = cluster.nodes["n1"]
    assert node.conn is None and node.last_registration is None


async def test_v3_register_with_health_registers_and_applies_verdict() -> None:
    cluster = Cluster(make_config(extra=HC), wall=wall)
    assert reg(cluster, None).health_check_first
    reply = reg(cluster, m.HealthReport("drain", "HC: disk full", ran_at=1.0))
    assert reply.accepted and not reply.health_check_first
    assert state(cluster, "n1") == reply.node_state == "IDLE+DRAIN"
    assert cluster.nodes["n1"].state.reason.text == "HC: disk full"


async def test_old_peers_and_configs_without_program_register_at_once() -> None:
    for version in (1, 2):
        cluster = Cluster(make_config(extra=HC), wall=wall)
        reply = reg(cluster, None, version=version)
        assert reply.accepted and not reply.health_check_first
        assert state(cluster, "n1") == "IDLE"
        # An old peer never sees the field it does not know.
        assert "health_check_first" not in orjson.loads(encode(reply, version=version))
    cluster = Cluster(make_config(), wall=wall)
    assert reg(cluster, None).accepted
