"""The relay rnoded (issue 47) over real TCP on 127.0.0.1: nodes join it, their frames go up
unchanged in shared RelayUp batches, RelayDown's frames reach each node, and losing the link to
the controller closes every node's connection at once (they move on) and refuses new joins."""

from __future__ import annotations

import functools
import socket
from typing import Any

import trio

from ranch.noded import relayjoin
from ranch.noded.relay import RelayServer
from ranch.protocol import messages as m
from ranch.protocol.framing import FrameDecoder, encode_frame
from ranch.protocol.relaymessages import node_key, relay_order
from ranch.protocol.tcp import FramedStream, PeerClosed
from ranch.protocol.versions import CURRENT

KEY = b"k" * 32


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeController:
    """Takes the relay's connection and records every RelayUp."""

    def __init__(self) -> None:
        self.ups: list[m.RelayUp] = []
        self.conn: FramedStream | None = None
        self.changed = trio.Event()

    async def handle(self, stream: trio.SocketStream) -> None:
        fs = self.conn = FramedStream(stream, KEY)
        try:
            while True:
                frame = await fs.receive()
                self.ups.append(frame.msg)
                self.changed.set()
                self.changed = trio.Event()
        except PeerClosed:
            return

    def frames(self) -> list[tuple[str, bytes]]:
        return [(i.node, i.frame) for up in self.ups for i in up.items if i.frame]


async def _wait(pred: Any, what: str) -> None:
    with trio.fail_after(5):
        while not pred():
            await trio.sleep(0.01)


async def test_frames_go_up_unchanged_and_batched_and_come_down_to_their_node() -> None:
    ctl = FakeController()
    cport, rport = _port(), _port()
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(trio.serve_tcp, ctl.handle, cport, host="127.0.0.1"))
        relay = RelayServer("r1", KEY, lambda: (("127.0.0.1", cport),), lambda: 3.0)
        await nursery.start(relay.run, "127.0.0.1", rport)
        await _wait(lambda: relay.up is not None and ctl.ups, "the relay's link")
        assert ctl.ups[0] == m.RelayUp("r1")  # it says who it is at once

        creds = {f"n{i}": f"credential-{i}" for i in range(1, 4)}
        nodes = {}
        for name, cred in creds.items():
            fs = FramedStream(await trio.open_tcp_stream("127.0.0.1", rport), KEY)
            assert await relayjoin.join(fs, name, cred, CURRENT, 3.0) is None
            nodes[name] = fs
        await _wait(lambda: len(relay.nodes) == 3, "three nodes joined")
        sent = {}
        async with trio.open_nursery() as beats:
            for name, fs in nodes.items():
                sent[name] = m.Heartbeat(name, 1, m.Metrics(1.0, 0.1, 1, 2))
                beats.start_soon(fs.send, sent[name], 7)
        await _wait(lambda: len(ctl.frames()) == 3, "three frames up")
        batches = [up for up in ctl.ups if up.items]
        assert len(batches) <= 2, "the frames of one moment share a RelayUp"
        for name, frame in ctl.frames():
            dec = FrameDecoder(node_key(creds[name]))  # signed by the node, whole
            dec.feed(frame)
            got = dec.next_frame()
            assert got is not None and got.msg == sent[name] and got.request_id == 7

        # down: rctld's frames for n2 reach n2 only, as they were
        reply = encode_frame(m.KillJob(5), node_key(creds["n2"]), request_id=0)
        assert ctl.conn is not None
        await ctl.conn.send(m.RelayDown((m.RelayItem("n2", reply), m.RelayItem("n9", reply))), 0)
        with trio.fail_after(5):
            frame = await nodes["n2"].receive()
        assert frame.msg == m.KillJob(5)

        # the controller's link goes: every node's connection is closed, joins refused
        await ctl.conn.aclose()
        for fs in nodes.values():
            with trio.fail_after(5):
                try:
                    while True:
                        await fs.receive()
                except PeerClosed:
                    pass
        fs = FramedStream(await trio.open_tcp_stream("127.0.0.1", rport), KEY)
        why = await relayjoin.join(fs, "n1", creds["n1"], CURRENT, 3.0)
        assert why is not None and "not connected to the controller" in why
        nursery.cancel_scope.cancel()


async def test_a_node_leaving_the_relay_is_told_upward() -> None:
    ctl = FakeController()
    cport, rport = _port(), _port()
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(trio.serve_tcp, ctl.handle, cport, host="127.0.0.1"))
        relay = RelayServer("r1", KEY, lambda: (("127.0.0.1", cport),), lambda: 3.0)
        await nursery.start(relay.run, "127.0.0.1", rport)
        await _wait(lambda: relay.up is not None, "the relay's link")
        fs = FramedStream(await trio.open_tcp_stream("127.0.0.1", rport), KEY)
        assert await relayjoin.join(fs, "n1", "c", CURRENT, 3.0) is None
        await fs.aclose()
        await _wait(lambda: any(i.gone and i.node == "n1" for up in ctl.ups for i in up.items),
                    "the node's leaving told")
        nursery.cancel_scope.cancel()


def test_relay_order_spreads_nodes_and_keeps_every_relay_as_a_fallback() -> None:
    relays = tuple(f"r{i}=10.0.0.{i}:6818" for i in range(4))
    firsts = [relay_order(f"n{i:05d}", relays)[0] for i in range(4000)]
    counts = {r: firsts.count(r) for r in relays}
    assert all(800 < c < 1200 for c in counts.values()), counts
    order = relay_order("n00001", relays)
    assert sorted(order) == sorted(relays)  # the others after its own
    assert relay_order("r2", relays) == ()  # a relay goes straight to the controllers
    targets = relayjoin.targets("n1", m.NodeSettings("c", 1, 1, 1, None, 0, 1, ("ANY",),
                                                     relays=relays), "cred",
                                (("ctl", 6817),))
    assert [t[2] for t in targets][-1] is None and len(targets) == 5
    assert relayjoin.targets("n1", m.NodeSettings("c", 1, 1, 1, None, 0, 1, ("ANY",),
                                                  relays=relays), "", (("ctl", 6817),)) == \
        (("ctl", 6817, None),), "no credential yet: straight to the controller"
