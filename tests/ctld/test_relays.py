"""Relays through rctld's front door (issue 47): a relay's RelayUp carries its nodes' own frames,
each checked with the node's key as if it came direct; replies and orders go back in RelayDown,
signed with the node's key; a relay that alters, invents, replays or smuggles a frame is refused
and logged; a relay's loss ends its nodes' sessions without a DOWN."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from ranch.ctld.compose.layers import rpc_server
from ranch.ctld.rpc.server import Server
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import FrameDecoder, encode_frame
from ranch.protocol.relaymessages import node_key
from tests.ctld.harness import Harness as Cluster
from tests.ctld.helpers import hardware, make_config, wall

KEY = b"k" * 32


def _server(state_dir: Path, cluster: Cluster, nursery: trio.Nursery) -> Server:
    async def reconfigure(who: str) -> m.ReconfigureResult:
        return m.ReconfigureResult(ok=True)

    server = rpc_server(cluster.controller, KEY, reconfigure=reconfigure,
                        state_dir=str(state_dir))
    server.spawn = nursery.start_soon  # where pushes and relayed sessions run (the daemon's)
    return server


class Peer:
    """One connection to the server holding the cluster key: a node straight, or a relay."""

    def __init__(self, server: Server, nursery: trio.Nursery) -> None:
        self.stream, server_end = trio.testing.memory_stream_pair()
        nursery.start_soon(server.handle, server_end)
        self.decoder = FrameDecoder(KEY)
        self.rid = 0

    async def send(self, msg: object) -> None:
        self.rid += 1
        await self.stream.send_all(encode_frame(msg, KEY, request_id=self.rid))

    async def ask(self, msg: object) -> Any:
        await self.send(msg)
        while True:
            for frame in self.decoder:
                if frame.request_id == self.rid:
                    return frame.msg
            data = await self.stream.receive_some(1 << 16)
            assert data, "connection closed before the reply"
            self.decoder.feed(data)

    async def down(self) -> m.RelayDown:
        """The next RelayDown rctld sends this relay."""
        with trio.fail_after(5):
            while True:
                for frame in self.decoder:
                    if isinstance(frame.msg, m.RelayDown):
                        return frame.msg
                data = await self.stream.receive_some(1 << 16)
                assert data, "relay connection closed"
                self.decoder.feed(data)


class Node:
    """A relayed node's end: frames signed, and replies checked, with its own key."""

    def __init__(self, name: str, credential: str) -> None:
        self.name = name
        self.key = node_key(credential)
        self.decoder = FrameDecoder(self.key)
        self.rid = 100

    def frame(self, msg: object) -> bytes:
        self.rid += 1
        return encode_frame(msg, self.key, request_id=self.rid)

    def read(self, down: m.RelayDown) -> list[Any]:
        for item in down.items:
            if item.node == self.name and item.frame:
                self.decoder.feed(item.frame)
        return [f.msg for f in self.decoder]


def _register(name: str, cred: str | None) -> m.Register:
    return m.Register(name, hardware(), 1.0, "0.1.0", node_credential=cred)


def _beat(name: str, seq: int) -> m.Heartbeat:
    metrics = m.Metrics(cpu_pct=5.0, load_1m=0.1, memory_used_mib=100, memory_total_mib=1000)
    return m.Heartbeat(name, seq, metrics)


async def _credentials(server: Server, nursery: trio.Nursery, *names: str) -> dict[str, str]:
    """Each node registers straight once, as a new rnoded does, and keeps its credential."""
    out = {}
    for name in names:
        direct = Peer(server, nursery)
        reply = await direct.ask(_register(name, ""))
        assert reply.accepted and reply.node_credential
        out[name] = reply.node_credential
        await direct.stream.aclose()
    await trio.testing.wait_all_tasks_blocked()
    return out


async def test_a_relay_batches_its_nodes_frames_and_each_is_checked_with_its_own_key(
        tmp_path: Path) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        server = _server(tmp_path, cluster, nursery)
        creds = await _credentials(server, nursery, "n1", "n2", "n3")
        relay = Peer(server, nursery)
        nodes = [Node(n, c) for n, c in creds.items()]
        # one RelayUp carries three nodes' registrations, unchanged
        await relay.send(m.RelayUp("r1", tuple(m.RelayItem(n.name, n.frame(
            _register(n.name, None))) for n in nodes)))
        got: dict[str, list[Any]] = {n.name: [] for n in nodes}
        batches = 0
        while not all(got.values()):
            down = await relay.down()
            batches += 1
            for n in nodes:
                got[n.name] += n.read(down)
        assert batches < 3, "the replies of one pass share a RelayDown"
        for n in nodes:
            (reply,) = got[n.name]
            assert isinstance(reply, m.RegisterReply) and reply.accepted, reply
            assert not reply.node_credential, "no new credential: the key proved the name"
            conn = cluster.nodes[n.name].conn
            assert conn is not None and "relay r1" in conn.peer
        assert server.relays.counts() == {"relays": 1, "relayed": 3, "refused": 0}

        # heartbeats: answered to each, in one batch
        await relay.send(m.RelayUp("r1", tuple(m.RelayItem(n.name, n.frame(_beat(n.name, 1)))
                                               for n in nodes)))
        down = await relay.down()
        replies = {n.name: n.read(down) for n in nodes}
        assert all(isinstance(r[0], m.HeartbeatReply) for r in replies.values()), replies

        # an order (a push) to a relayed node goes down signed with that node's key
        assert cluster.nodes["n2"].conn.push(m.KillJob(7))
        down = await relay.down()
        assert [type(x) for x in nodes[1].read(down)] == [m.KillJob]
        cluster_key = FrameDecoder(KEY)  # what the relay holds: it could not have made it
        cluster_key.feed(down.items[0].frame)
        with pytest.raises(ProtocolError):
            cluster_key.next_frame()
        nursery.cancel_scope.cancel()


async def test_a_relay_cannot_forge_alter_replay_or_smuggle(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        server = _server(tmp_path, cluster, nursery)
        creds = await _credentials(server, nursery, "n1", "n2")
        n1, n2 = Node("n1", creds["n1"]), Node("n2", creds["n2"])
        relay = Peer(server, nursery)
        before = cluster.nodes["n1"].boot_time

        # altered: one byte of n1's genuine Register changed in flight
        genuine = bytearray(n1.frame(_register("n1", None)))
        genuine[-40] ^= 1
        await relay.send(m.RelayUp("r1", (m.RelayItem("n1", bytes(genuine)),)))
        down = await relay.down()
        assert any(i.node == "n1" and i.gone for i in down.items), down
        assert cluster.nodes["n1"].conn is None and cluster.nodes["n1"].boot_time == before

        # invented: a frame the relay signs itself (it holds the cluster key, not n1's)
        forged = encode_frame(_register("n1", None), KEY, request_id=5)
        await relay.send(m.RelayUp("r1", (m.RelayItem("n1", forged),)))
        down = await relay.down()
        assert any(i.node == "n1" and i.gone for i in down.items), down
        assert cluster.nodes["n1"].conn is None

        # n2's key used to register n1
        other = n2.frame(_register("n1", None))
        await relay.send(m.RelayUp("r1", (m.RelayItem("n2", other),)))
        reply = n2.read(await relay.down())
        assert isinstance(reply[0], m.RegisterReply) and not reply[0].accepted
        assert "signed with node n2's key registers node n1" in reply[0].reason

        # smuggled: an admin's request inside a node's frame is not read at all
        admin = n2.frame(m.UpdateNodes("n1", "DOWN", "relay says so", "root"))
        await relay.send(m.RelayUp("r1", (m.RelayItem("n2", admin),)))
        down = await relay.down()
        assert any(i.node == "n2" and i.gone for i in down.items), down
        assert cluster.nodes["n1"].complete == "IDLE"

        # replayed: n1's genuine frame forwarded twice
        good = n1.frame(_register("n1", None))
        await relay.send(m.RelayUp("r1", (m.RelayItem("n1", good),)))
        assert n1.read(await relay.down())[0].accepted
        await relay.send(m.RelayUp("r1", (m.RelayItem("n1", good),)))
        down = await relay.down()
        assert [x.code for x in n1.read(down)] == ["replay"]
        nursery.cancel_scope.cancel()
    assert server.relays.refused == 1  # the smuggled type; the rest failed their checks
    text = caplog.text
    assert "relayed frame refused" in text and "UpdateNodes" in text
    assert "frame rejected" in text and "(relay r1)" in text
    assert "relayed registration refused" in text


async def test_a_node_without_a_credential_is_not_relayed(tmp_path: Path) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        server = _server(tmp_path, cluster, nursery)
        relay = Peer(server, nursery)
        stranger = Node("n3", "made-up")
        await relay.send(m.RelayUp("r1", (m.RelayItem("n3", stranger.frame(
            _register("n3", None))),)))
        down = await relay.down()
        assert down.items == (m.RelayItem("n3", gone=True),)
        assert cluster.nodes["n3"].conn is None
        nursery.cancel_scope.cancel()


async def test_only_the_cluster_key_relays(tmp_path: Path) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        server = _server(tmp_path, cluster, nursery)
        creds = await _credentials(server, nursery, "n1")
        relay = Peer(server, nursery)
        n1 = Node("n1", creds["n1"])
        # a relayed node cannot open a relay of its own inside its session
        inner = n1.frame(m.RelayUp("x", ()))
        await relay.send(m.RelayUp("r1", (m.RelayItem("n1", inner),)))
        down = await relay.down()
        assert any(i.node == "n1" and i.gone for i in down.items)
        nursery.cancel_scope.cancel()


async def test_losing_the_relay_ends_its_sessions_and_downs_nobody(tmp_path: Path) -> None:
    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        server = _server(tmp_path, cluster, nursery)
        creds = await _credentials(server, nursery, "n1", "n2")
        relay = Peer(server, nursery)
        nodes = [Node(n, c) for n, c in creds.items()]
        await relay.send(m.RelayUp("r1", tuple(m.RelayItem(n.name, n.frame(
            _register(n.name, None))) for n in nodes)))
        while not all(cluster.nodes[n.name].conn is not None for n in nodes):
            await relay.down()
        await relay.stream.aclose()  # the relay is gone
        with trio.fail_after(5):
            while any(cluster.nodes[n.name].conn is not None for n in nodes):
                await trio.sleep(0.01)
        assert server.relays.counts() == {"relays": 0, "relayed": 0, "refused": 0}
        for n in nodes:
            assert cluster.nodes[n.name].complete == "IDLE"
            kinds = [e["kind"] for e in cluster.eventlog.events if e["node"] == n.name]
            assert kinds[-1] == "left", kinds
        # straight back to rctld with its credential, at once
        back = await Peer(server, nursery).ask(_register("n1", creds["n1"]))
        assert back.accepted
        nursery.cancel_scope.cancel()


def test_the_relays_are_served_with_their_own_address_and_port() -> None:
    from ranch.conf.build import parse_config_text
    from ranch.ctld.nodes.registry import node_settings

    text = ("ClusterName=t\nSlurmctldHost=c1\nNodeName=r[1-2] NodeAddr=10.0.0.1 Port=7001\n"
            "NodeName=r3\nNodeName=n[1-9]\nPartitionName=p Nodes=ALL\n")
    assert node_settings(parse_config_text(text + "RelayNodes=r[1-3]\n")).relays == (
        "r1=10.0.0.1:7001", "r2=10.0.0.1:7001", "r3=r3:6818")
    assert node_settings(parse_config_text(text)).relays == ()  # without the key: none


async def test_a_batch_late_at_rctld_is_excused_a_frame_late_at_the_relay_is_not(
        tmp_path: Path) -> None:
    """As a direct frame's wait in rctld's socket is not held against it: the time since the
    relay sent its batch (RelayUp.sent) is rctld's backlog; the time before is the sender's."""
    import time

    cluster = Cluster(make_config(), wall=wall)
    async with trio.open_nursery() as nursery:
        server = _server(tmp_path, cluster, nursery)
        creds = await _credentials(server, nursery, "n1", "n2")
        server.replay_guard.not_before = 0.0  # a controller that has run longer than that
        relay = Peer(server, nursery)
        n1, n2 = Node("n1", creds["n1"]), Node("n2", creds["n2"])
        signed = time.time() - 15  # MessageTimeout is 10 s
        late_here = encode_frame(_register("n1", None), n1.key, request_id=1, now=signed)
        await relay.send(m.RelayUp("r1", (m.RelayItem("n1", late_here),), sent=signed + 1))
        assert n1.read(await relay.down())[0].accepted
        late_there = encode_frame(_register("n2", None), n2.key, request_id=1, now=signed)
        await relay.send(m.RelayUp("r1", (m.RelayItem("n2", late_there),),
                                   sent=time.time() - 1))
        assert [x.code for x in n2.read(await relay.down())] == ["stale"]
        nursery.cancel_scope.cancel()


async def test_a_large_fan_out_is_split_under_the_frame_limit() -> None:
    """A storm's RegisterReplies (each with the config files) leave in several RelayDowns."""
    from types import SimpleNamespace

    from ranch.ctld.rpc import relayhub

    sent: list[m.RelayDown] = []

    async def send(frame: bytes) -> bool:
        dec = FrameDecoder(KEY)
        dec.feed(frame)
        sent.append(dec.next_frame().msg)
        return True

    async with trio.open_nursery() as nursery:
        links = SimpleNamespace(spawn=lambda: nursery.start_soon,
                                encode=lambda msg, rid, version: encode_frame(msg, KEY,
                                                                              request_id=rid))
        conn = SimpleNamespace(links=links, closing=False, version=6, send=send)
        outlet = relayhub.Outlet(conn)  # type: ignore[arg-type]
        big = b"x" * (1 << 20)
        for i in range(10):
            outlet.send(m.RelayItem(f"n{i}", big))
        await trio.testing.wait_all_tasks_blocked()
    assert [len(d.items) for d in sent] == [4, 4, 2]
    assert [i.node for d in sent for i in d.items] == [f"n{i}" for i in range(10)]
