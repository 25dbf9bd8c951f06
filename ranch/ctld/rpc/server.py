"""rctld's TCP side: a task per connection while it has frames, the core's replies and pushes out.

A registered node between frames has no task: it is parked with the idle poller
(ctld/rpc/idlenodes.py), which answers a plain heartbeat itself and starts a task for the rest.
Nor has a command whose one request is in when it is accepted: the accept loop answers it, and
sends the batch's replies that wait for the journal after one write, itself with the file
journal, from one task with etcd's (ctld/rpc/readnow.py).

A peer's faults stay on its own connection: each frame must arrive whole within MessageTimeout
of its first byte (a total deadline: bytes dribbled in do not extend it), a send that does not
finish within MessageTimeout (a reader that stopped reading) disconnects it, at most SEND_QUEUE
pushes wait for one peer (ctld/rpc/connection.py), and any frame that fails authentication or
decoding is answered with an Error, logged and the connection closed.

Nothing unauthenticated costs more than a little (docs/limits.md): a connection that has not yet
proven the key must deliver a whole frame within MessageTimeout of connecting, is read in
UNPROVEN_CHUNK pieces, and may not send a frame over UNPROVEN_MAX bytes unless its header MAC
(protocol version 5) checks out first; connections are capped in all, per source address and
while unproven, below the descriptor limit (ctld/rpc/admission.py); a frame signed before this run
started is refused, so a frame captured before a restart cannot be replayed
(ctld/rpc/replaymark.py).
An over-size frame is answered with an Error naming its size and the limit, and the rest of it
is read and dropped until its deadline, so that the sender reads that Error rather than a reset.

Replies are written by the reading task itself (ctld/rpc/fastio.py): a memory channel and a writer
task per connection cost about a fifth of the controller's CPU per heartbeat and kilobytes per
node (docs/benchmarks.md, hot spots 3 and 4). Pushes, which are rare, each get a short task in
the daemon's nursery, so the core never waits on a socket; a send lock, made only when two
writes meet, keeps frames whole (ctld/rpc/connection.py).
"""

from __future__ import annotations

import _socket
import errno
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from ranch.ctld import logs
from ranch.ctld.kept import kept
from ranch.ctld.nodes.stalls import backlog_cover
from ranch.ctld.rpc import eventstream, readnow, userauth
from ranch.ctld.rpc.admission import READY, Admission, Caps, caps_for, fd_limit, source_of
from ranch.ctld.rpc.capacity import CapacityRefusals, is_register
from ranch.ctld.rpc.connection import Connection, Links
from ranch.ctld.rpc.dispatch import Dispatcher
from ranch.ctld.rpc.fastio import RawStream, unread_bytes
from ranch.ctld.rpc.idlenodes import IdleNodes
from ranch.ctld.rpc.nodecredentials import NodeCredentials
from ranch.ctld.rpc.reading import FrameReader
from ranch.ctld.rpc.readparts import Decoding, Steps
from ranch.ctld.rpc.relayhub import RelayHub
from ranch.ctld.rpc.replaymark import ReplayMark
from ranch.ctld.rpc.routes import (
    AcctmgrAnswer,
    Route,
    accounting_routes,
    admin_routes,
    job_routes,
    node_routes,
    read_routes,
)
from ranch.ctld.rpc.rpcports import (
    ChangeCounts,
    EventFeed,
    JobServices,
    NodeAdmin,
    Reads,
    Traffic,
    Watching,
)
from ranch.ctld.rpc.wire import Prebuilt, encode_body_frame
from ranch.protocol import codec
from ranch.protocol import messages as m
from ranch.protocol.framing import MAX_SIZE, UNPROVEN_MAX, ReplayGuard, encode_frame

if TYPE_CHECKING:
    from ranch.conf.model import ClusterConfig
    from ranch.ctld.nodes.node import NodeRecord

ACCEPT_BATCH = 256  # connections accepted per wake-up of a listener
ROOM_POLL = 0.1  # how often a full unproven pool is looked at again for an idle member
_ACCEPT_EXHAUSTED = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
REPLY_BODY_CACHE = 256  # encoded HeartbeatReply bodies: (version, state, hash) -> bytes

Reconfigurer = Callable[[str], Awaitable[m.ReconfigureResult]]
# a submission accepted now; its reply Journaled (ctld/state/durability.py): it leaves once on disk
Submitter = Callable[[m.SubmitJob], Any]


class Server:
    def __init__(
        self,
        key: bytes,
        *,
        config: Callable[[], ClusterConfig],
        nodes: Mapping[str, NodeRecord],
        traffic: Traffic,
        admin: NodeAdmin,
        reads: Reads,
        jobs: JobServices,
        eventlog: EventFeed,
        liveness: Watching,
        changes: ChangeCounts,
        reconfigure: Reconfigurer,
        max_size: int = MAX_SIZE, unproven_max: int = UNPROVEN_MAX,
        submit: Submitter | None = None, state_dir: str | None = None, caps: Caps | None = None,
        mirror: Callable[[str, bytes], Awaitable[None]] | None = None,
        takeover: Callable[[str], Any] | None = None,
        sync: Callable[[], Awaitable[None]] | None = None,
        spawn: Callable[..., Any] | None = None, settle_here: bool = False,
        acctmgr: AcctmgrAnswer | None = None, shares: Callable[[str], m.ShareReply] | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """The controller's ports (ctld/rpc/rpcports.py; built from its owners in
        ctld/compose/layers.py): `config` the one in force, `nodes` read (how many, who is
        connected), `traffic` what nodes send, `admin` rcontrol's changes on nodes, `reads`
        the read-only answers, `jobs` the job store's services, `eventlog`, `liveness` told
        what the connections saw, `changes` whether a request changed something, `acctmgr`
        racctmgr's answers and `shares` rshare's rows (ctld/accounts/; None: tests of the core,
        no such route); `wall` the clock frames' timestamps are judged on (tests: trio's);
        `settle_here`: `sync`'s write never waits on the network (the file journal), so the
        accept loop and the idle poller wait for it rather than hand the replies to tasks."""
        self.config = config
        self.settle_here = settle_here
        self.traffic = traffic
        self.key = key
        self.max_size, self.unproven_max = max_size, unproven_max
        self.wall = wall
        self._door(state_dir, caps or caps_for(fd_limit(), len(nodes)), liveness)
        # each node's own (nodeident.py); `mirror`: a replicated store's copy (issue 32)
        self.node_credentials = book = NodeCredentials(state_dir, mirror=mirror)
        self.connections: set[Connection] = set()
        # registered nodes between frames, with no task each (ctld/rpc/idlenodes.py)
        self.idle = IdleNodes(self.connection_ended, readnow.settle_nodes if settle_here else None)
        self._reply_bodies: dict[tuple[int, str, str], bytes] = {}
        # Where pushes are written from (the daemon's nursery): a push is rare, and a nursery per
        # connection to hold it would cost every connection its memory.
        self.spawn = spawn
        routes: dict[type, Route] = {
            **node_routes(traffic, book, nodes, eventlog),
            **admin_routes(admin, book, eventlog, reconfigure, takeover or _no_standby),
            **read_routes(reads, eventlog),
            **job_routes(jobs, config, submit),
            **(accounting_routes(acctmgr, shares) if acctmgr is not None else {}),
        }
        self.dispatcher = Dispatcher(routes, config=config, changes=changes)
        self.links, self.steps = self._parts(liveness, eventlog, sync)
        self.relays = self._relay_hub(book)
        _log_limits(self.admission.caps, self.admission.pool_cap(), unproven_max, max_size,
                    len(nodes))

    def _relay_hub(self, book: NodeCredentials) -> RelayHub:
        """Relayed nodes' sessions, each checked with the node's own key (issue 47)."""
        hub = RelayHub(self.links, self.steps, book.hashes.get, self.traffic.disconnected)
        self.dispatcher.add_route(m.RelayUp, Route(hub.up, changes=False))
        return hub

    def _door(self, state_dir: str | None, caps: Caps, liveness: Watching) -> None:
        """The guards at the door: the replay mark and guard, the caps, the refusals past them."""
        # Frames signed before this run started are refused (state_dir keeps the mark that
        # covers peers whose clocks run ahead; without one, the start alone is the bound).
        self.replay_mark = ReplayMark(state_dir, self.message_timeout)
        # nonces are kept longer than the window: a frame that waited in our backlog may be
        # that much older when it is read (ctld/nodes/stalls.py, StallWatch.queued)
        self.replay_guard = ReplayGuard(window=self.message_timeout
                                        + backlog_cover(self.message_timeout),
                                        not_before=self.replay_mark.floor)
        self.admission = Admission(caps)
        self.capacity = CapacityRefusals(
            self.admission, self.key, self.replay_guard,
            message_timeout=lambda: self.message_timeout,
            late_allowance=lambda: liveness.stalls.late_allowance(),
            heard=liveness.refused_for_capacity, encode=self.encode,
            admit=self._admit, unproven_max=self.unproven_max)

    def _parts(self, liveness: Watching, eventlog: EventFeed,
               sync: Callable[[], Awaitable[None]] | None) -> tuple[Links, Steps]:
        """What each connection and each connection's reader use of this server, built once."""
        def timeout() -> float:
            return self.message_timeout

        # spawn is asked at each push: it is set once the daemon's nursery is open
        links = Links(spawn=lambda: self.spawn, connections=self.connections,
                      idle=self.idle, message_timeout=timeout, encode=self.encode)
        decoding = Decoding(self.key, self.max_size, self.unproven_max, self.replay_guard,
                            liveness.stalls, timeout, self.wall)
        steps = Steps(
            decoding, self.admission, self.idle, self.replay_mark, self.capacity,
            dispatcher=self.dispatcher, ended=self.connection_ended,
            # Durability.durable (ctld/state/durability.py): every change a reply confirms
            # is on disk before it leaves. None (tests of the core alone): nothing is persisted.
            sync=sync,
            follow=partial(eventstream.follow, self.config, eventlog, self.encode),
            sign_in=partial(userauth.accept, self.config, self.admission.log))
        return links, steps

    @property
    def message_timeout(self) -> float:
        return float(self.config().timeouts.message_timeout)

    def encode(self, msg: Any, request_id: int, version: int, key: bytes | None = None) -> bytes:
        """`key`: a user's session key (ctld/rpc/userauth.py); the cluster key when None."""
        if key is not None:
            return _encode_with(msg, key, request_id, version)
        if isinstance(msg, Prebuilt):
            return encode_body_frame(msg.type_name, msg.body, self.key, request_id=request_id,
                                     version=version)
        # the same few bodies, a thousand times a second (a kill list makes one unique)
        if type(msg) is m.HeartbeatReply and not msg.kill_job_ids:
            cache_key = (version, msg.node_state, msg.config_hash)
            body = self._reply_bodies.get(cache_key)
            if body is None:
                if len(self._reply_bodies) >= REPLY_BODY_CACHE:
                    self._reply_bodies.clear()
                body = self._reply_bodies[cache_key] = kept(codec.encode(msg, version=version))
            return encode_body_frame("HeartbeatReply", body, self.key, request_id=request_id,
                                     version=version)
        try:
            return encode_frame(msg, self.key, request_id=request_id, version=version)
        except ValueError:  # the message is newer than the peer's protocol
            err = m.Error("version", f"{type(msg).__name__} needs a newer protocol version "
                          f"than {version}")
            return encode_frame(err, self.key, request_id=request_id, version=version)

    async def serve_tcp(
        self, port: int, *, host: str | None = None,
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Like trio.serve_tcp(self.handle, ...), but each wake-up of a listener accepts every
        connection waiting (up to ACCEPT_BATCH), and one over a cap is closed before any trio
        object is made for it: a flood of connections cannot fill the backlog in front of a
        node or a command, nor cost more than an accept and a close each."""
        listeners = await trio.open_tcp_listeners(port, host=host)
        try:
            async with trio.open_nursery() as nursery:
                if not self.idle.running:
                    nursery.start_soon(self.idle.run, nursery)
                for listener in listeners:
                    nursery.start_soon(self._accept_loop, listener, nursery)
                task_status.started(listeners)
        finally:
            for listener in listeners:
                await trio.aclose_forcefully(listener)

    async def _accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        # A second descriptor for the listening socket: the stdlib's accept, without a trip
        # through the scheduler for each connection (trio's yields after every one).
        sock = socket.socket(fileno=os.dup(listener.socket.fileno()))
        sock.setblocking(False)
        # The C accept and socket: socket.py's accept() runs ten Python functions a connection
        # (its class, two enum conversions), cold at a command's pace (docs/benchmarks.md).
        accept = sock._accept  # type: ignore[attr-defined]  # what socket.accept() calls
        family, kind = int(sock.family), int(sock.type)
        with sock:
            while True:
                await trio.lowlevel.wait_readable(sock)
                settling: list[FrameReader] = []  # replies of the batch waiting for the journal
                for _ in range(ACCEPT_BATCH):
                    full = not self.admission.has_room()
                    if full and not self.admission.at_capacity():
                        # a pool full of peers whose requests wait to be read: let the rest
                        # wait in the kernel's queue until one of them is through
                        await self.admission.wait_room(ROOM_POLL)
                        break
                    try:
                        fd, addr = accept()
                    except BlockingIOError:
                        break
                    except OSError as exc:
                        if exc.errno in _ACCEPT_EXHAUSTED:  # out of descriptors or memory
                            self.admission.log.event("accept", "accept failed; retrying in "
                                                     "0.1 s", logging.ERROR, error=str(exc))
                            await trio.sleep(0.1)
                        break  # ECONNABORTED and the like: the peer already left
                    try:
                        raw = _socket.socket(family, kind, 0, fd)
                    except OSError:  # not a socket after all: nothing to answer
                        os.close(fd)
                        continue
                    self._let_in(raw, _addr_text(addr), full, nursery, settling)
                if settling:  # one journal write for the batch's replies (ctld/rpc/readnow.py)
                    if self.settle_here:  # a pass, which the write holds the loop for anyway
                        await readnow.settle(settling, nursery.start_soon)
                    else:  # etcd's write waits on the network: nobody is kept at the door
                        nursery.start_soon(readnow.settle, settling, nursery.start_soon,
                                           name="rpc settle")
                await trio.lowlevel.checkpoint()

    def _let_in(self, raw: _socket.socket, peer: str, full: bool, nursery: trio.Nursery,
                settling: list[FrameReader]) -> None:
        """An accepted connection told there is no room, refused, or admitted (`full`: every
        place is held by a proven peer)."""
        ready = unread_bytes(raw.fileno()) >= READY
        # every place held by a proven peer, or a node's places all taken: told so or, a
        # command, let in to the last few (ctld/rpc/capacity.py)
        if full or (self.admission.nodes_full() and (not ready or is_register(raw))):
            raw.setblocking(False)
            self.capacity.take(raw, peer, ready, nursery)
        elif self.admission.refuses(source_of(peer), peer, ready):
            raw.close()
        else:
            self._admit(raw, peer, nursery, ready, settling)

    def _admit(self, raw: _socket.socket, peer: str, nursery: trio.Nursery,
               ready: bool = True, settling: list[FrameReader] | None = None) -> None:
        """Serve an accepted connection: a command's one request whose bytes are in already is
        answered at once when `settling` (the accept loop's batch) is given, or handed to it when
        its reply waits for the journal (ctld/rpc/readnow.py); anything else gets a task."""
        conn = Connection(RawStream(raw), peer, self.links, ready)  # no trio wrappers (fastio)
        self.admission.add(conn, source_of(peer))  # now: the batch's next sees it
        self.connections.add(conn)
        reader = FrameReader(self.steps, conn, may_park=True)
        if ready and settling is not None:
            done = reader.first(nursery.start_soon)
            if done == readnow.SETTLE:
                settling.append(reader)
            if done != readnow.TASK:
                return
        # the reader's run is the task (ctld/rpc/reading.py); a name given, not built per task
        nursery.start_soon(reader.run, name="rpc connection")

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one accepted stream (a connection from any listener, or a test's)."""
        peer = _peer(stream)
        conn = Connection(stream, peer, self.links)
        conn.ready = conn.io.unread() >= READY
        if self.admission.refuses(source_of(peer), peer, conn.ready):
            await trio.aclose_forcefully(stream)  # over a cap: closed at once
            return
        self.admission.add(conn, source_of(peer))
        self.connections.add(conn)
        await FrameReader(self.steps, conn).run()

    def connection_ended(self, conn: Connection) -> bool:
        """Forget `conn` once its reader ended; True when its stream is still to be closed
        (not a socket: the in-memory streams of tests)."""
        self.admission.gone(conn)
        self.connections.discard(conn)
        self.relays.relay_ended(conn)  # a relay's nodes' sessions end with it
        if conn.node is not None:  # a command's connection is nothing to the node registry
            self.traffic.disconnected(conn)
            logs.event("node disconnected", node=conn.node, peer=conn.peer)
        # A push still being written fails with ClosedResourceError and ends.
        stream = conn.stream
        if isinstance(stream, RawStream | trio.SocketStream):
            # what aclose_forcefully does in the end, without its cancelled scope and
            # checkpoint: the task ends here (a command's connection, hundreds a second)
            (stream if isinstance(stream, RawStream) else stream.socket).close()
            return False
        return True


def _log_limits(c: Caps, unproven: int, unproven_max: int, max_size: int, nodes: int) -> None:
    logs.event("connection limits", fd_limit=c.fd_limit, connections=c.connections,
               unproven=unproven, unproven_frame=unproven_max, frame=max_size,
               nodes_allowed=c.nodes_allowed(), nodes=nodes)
    if nodes > c.nodes_allowed():  # each node needs one, commands a few
        logs.event("descriptor limit too low for the configured nodes; raise it "
                   "(ulimit -n, or LimitNOFILE= in the systemd unit)", logging.WARNING,
                   nodes=nodes, fd_limit=c.fd_limit, connections=c.connections)


def _encode_with(msg: Any, key: bytes, request_id: int, version: int) -> bytes:
    if isinstance(msg, Prebuilt):
        return encode_body_frame(msg.type_name, msg.body, key, request_id=request_id,
                                 version=version)
    try:
        return encode_frame(msg, key, request_id=request_id, version=version)
    except ValueError:  # the message is newer than the peer's protocol
        err = m.Error("version", f"{type(msg).__name__} needs a newer protocol version "
                      f"than {version}")
        return encode_frame(err, key, request_id=request_id, version=version)


def _peer(stream: trio.SocketStream) -> str:
    try:
        return _addr_text(stream.socket.getpeername())
    except (OSError, AttributeError, IndexError):
        return "?"


def _addr_text(addr: Any) -> str:
    try:
        return f"{addr[0]}:{addr[1]}"
    except (TypeError, IndexError):
        return "?"


def _no_standby(who: str) -> m.Error:
    return m.Error("not_supported", "this controller has no standby to hand over to "
                   "(StateStore=file); a controller pair runs on etcd (docs/ha.md)")
