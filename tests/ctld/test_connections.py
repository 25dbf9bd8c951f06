"""rctld's connection handling: replies written inline, pushes bounded per peer, slow readers cut
off after MessageTimeout, and a closed connection found without scanning every node."""

from __future__ import annotations

import orjson
import trio
import trio.testing

from ranch.ctld.rpc.connection import SEND_QUEUE
from ranch.ctld.rpc.server import Server
from ranch.protocol import messages as m
from ranch.protocol.framing import FrameDecoder, encode_frame
from ranch.protocol.rawframe import PREFIX, open_frame
from tests.ctld.harness import Harness as Cluster
from tests.ctld.helpers import FakeConn, hardware, make_config, register, wall

KEY = b"k" * 32


def _cluster() -> Cluster:
    return Cluster(make_config(), wall=wall)


def _server(cluster: Cluster) -> Server:
    async def reconfigure(who: str) -> m.ReconfigureResult:
        return m.ReconfigureResult(ok=True)

    return Server(cluster, KEY, reconfigure=reconfigure)


def _frame(msg: object, request_id: int, version: int = 3) -> bytes:
    return encode_frame(msg, KEY, request_id=request_id, version=version)


def _register(name: str = "n1") -> m.Register:
    return m.Register(name, hardware(), 1.0, "0.1.0")


def _beat(name: str, seq: int) -> m.Heartbeat:
    metrics = m.Metrics(cpu_pct=5.0, load_1m=0.1, memory_used_mib=100, memory_total_mib=1000)
    return m.Heartbeat(name, seq, metrics)


async def _read_frames(stream: trio.abc.ReceiveStream, count: int) -> list:
    decoder = FrameDecoder(KEY)
    frames: list = []
    while len(frames) < count:
        data = await stream.receive_some(1 << 16)
        assert data, f"connection closed after {len(frames)} of {count} frames"
        decoder.feed(data)
        frames.extend(decoder)
    return frames


# -- the core: which node a closed connection belonged to -------------------------------------


async def test_closing_a_connection_frees_its_node() -> None:
    cluster = _cluster()
    _, conn = register(cluster, "n1")
    assert cluster.nodes["n1"].conn is conn
    cluster.disconnected(conn)
    assert cluster.nodes["n1"].conn is None
    cluster.disconnected(conn)  # twice is harmless
    cluster.disconnected(FakeConn())  # a connection that never registered
    assert cluster.nodes["n1"].conn is None


async def test_old_connection_closing_after_a_reconnect_leaves_the_new_one() -> None:
    cluster = _cluster()
    _, old = register(cluster, "n1")
    _, new = register(cluster, "n1", FakeConn("127.0.0.1:6000"))
    assert old.closed, "the superseded connection is asked to close"
    cluster.disconnected(old)
    assert cluster.nodes["n1"].conn is new
    cluster.disconnected(new)
    assert cluster.nodes["n1"].conn is None


async def test_second_name_on_one_connection_releases_the_first() -> None:
    cluster = _cluster()
    _, conn = register(cluster, "n1")
    register(cluster, "n2", conn)
    assert cluster.nodes["n1"].conn is None
    assert cluster.nodes["n2"].conn is conn
    cluster.disconnected(conn)
    assert cluster.nodes["n2"].conn is None


# -- the server over an in-memory stream ------------------------------------------------------


async def test_replies_come_back_in_order_with_their_request_ids(autojump_clock) -> None:
    cluster = _cluster()
    server = _server(cluster)
    client, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.handle, server_end)
        await client.send_all(_frame(_register(), 1))
        for seq in range(3):
            await client.send_all(_frame(_beat("n1", seq), 10 + seq))
        frames = await _read_frames(client, 4)
        assert [f.request_id for f in frames] == [1, 10, 11, 12]
        assert isinstance(frames[0].msg, m.RegisterReply) and frames[0].msg.accepted
        for f in frames[1:]:
            assert f.msg == m.HeartbeatReply(node_state="IDLE",
                                             config_hash=cluster.config.config_hash)
        assert len(server._reply_bodies) == 1, "one encoded body serves every identical reply"
        await client.aclose()
    assert server.connections == set()
    assert cluster.nodes["n1"].conn is None


async def test_cached_reply_bodies_follow_the_peer_version(autojump_clock) -> None:
    cluster = _cluster()
    server = _server(cluster)
    client, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.handle, server_end)
        await client.send_all(_frame(_register(), 1, version=2))
        await client.send_all(_frame(_beat("n1", 0), 2, version=2))
        await _read_frames(client, 1)  # the RegisterReply
        data = b""
        while True:  # the raw HeartbeatReply frame: a v2 body has no config_hash
            data += await client.receive_some(1 << 16)
            if len(data) >= PREFIX.size and len(data) >= PREFIX.size + PREFIX.unpack_from(data)[0]:
                break
        raw = open_frame(data[PREFIX.size:], KEY)
        assert (raw.version, raw.type) == (2, "HeartbeatReply")
        assert orjson.loads(bytes(raw.body)) == {"node_state": "IDLE"}
        await client.aclose()


async def test_peer_that_stops_reading_is_cut_off_after_message_timeout(autojump_clock) -> None:
    cluster = _cluster()
    server = _server(cluster)
    client, server_end = trio.testing.lockstep_stream_pair()  # a send waits for the reader
    with trio.fail_after(3600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.handle, server_end)
            await client.send_all(_frame(_register(), 1))
            started = trio.current_time()
            # never read the RegisterReply: the server's send cannot finish
            while server.connections:
                await trio.sleep(0.5)
            waited = trio.current_time() - started
    timeout = cluster.config.timeouts.message_timeout
    assert timeout <= waited <= timeout + 1.0
    assert cluster.nodes["n1"].conn is None


async def test_pushes_to_a_peer_that_does_not_read_are_bounded(autojump_clock) -> None:
    cluster = _cluster()
    server = _server(cluster)
    client, server_end = trio.testing.lockstep_stream_pair()
    async with trio.open_nursery() as nursery:
        server.spawn = nursery.start_soon
        nursery.start_soon(server.handle, server_end)
        nursery.start_soon(client.send_all, _frame(_register(), 1))
        [reply] = await _read_frames(client, 1)
        assert reply.msg.accepted
        conn = next(iter(server.connections))
        push = m.ConfigPush(settings=cluster.settings, config_files=(),
                            config_hash=cluster.config.config_hash)
        # The first push blocks on the socket; SEND_QUEUE may wait; the next one cuts it off.
        results = [conn.push(push) for _ in range(SEND_QUEUE + 1)]
        assert results == [True] * SEND_QUEUE + [False]
        assert conn.closing
        await trio.testing.wait_all_tasks_blocked()
    assert server.connections == set()
    assert conn.push(push) is False, "a closed connection takes no more pushes"


async def test_a_push_reaches_a_reading_peer(autojump_clock) -> None:
    cluster = _cluster()
    server = _server(cluster)
    client, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        server.spawn = nursery.start_soon
        nursery.start_soon(server.handle, server_end)
        await client.send_all(_frame(_register(), 1))
        await _read_frames(client, 1)
        conn = next(iter(server.connections))
        push = m.ConfigPush(settings=cluster.settings, config_files=(), config_hash="abc")
        assert conn.push(push)
        [frame] = await _read_frames(client, 1)
        assert frame.msg == push and frame.request_id == 0
        assert conn.pending == 0
        await client.aclose()


# -- event followers ------------------------------------------------------------------------


async def test_followers_are_capped_and_a_stalled_one_is_ended(autojump_clock) -> None:
    from ranch.ctld.rpc import eventstream

    cluster = _cluster()
    server = _server(cluster)

    def follow() -> bytes:
        return _frame(m.GetEvents(follow=True), 5, version=4)

    clients = []
    async with trio.open_nursery() as nursery:
        for i in range(eventstream.MAX_FOLLOWERS):
            # the first one's sends wait for it to read (it will stop reading)
            pair = trio.testing.lockstep_stream_pair if i == 0 else trio.testing.memory_stream_pair
            client, server_end = pair()
            nursery.start_soon(server.handle, server_end)
            nursery.start_soon(client.send_all, follow())
            [first] = await _read_frames(client, 1)
            assert isinstance(first.msg, m.Events)
            clients.append(client)
        assert len(cluster.eventlog.followers) == eventstream.MAX_FOLLOWERS
        extra, server_end = trio.testing.memory_stream_pair()
        nursery.start_soon(server.handle, server_end)
        await extra.send_all(follow())
        [refused] = await _read_frames(extra, 1)
        assert isinstance(refused.msg, m.Error) and refused.msg.code == "busy"
        await trio.sleep(3600)  # a quiet hour ends nobody
        assert len(cluster.eventlog.followers) == eventstream.MAX_FOLLOWERS
        for client in clients[1:]:
            await client.aclose()
        started = trio.current_time()
        while cluster.eventlog.followers:  # events come; the first client reads nothing
            cluster.eventlog.add("note", "n1", text="x" * 1000)
            await trio.sleep(1)
            if len(cluster.eventlog.followers) > 1:
                assert trio.current_time() - started < 5  # the closed ones go at once
        waited = trio.current_time() - started
        assert eventstream.STALL_LIMIT <= waited <= eventstream.STALL_LIMIT + 2
        await trio.testing.wait_all_tasks_blocked()
        assert server.connections == set()  # the stalled one's connection is closed too
        await extra.aclose()
        await clients[0].aclose()
