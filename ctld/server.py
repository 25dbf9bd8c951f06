"""rctld's TCP side: one task per connection, frames in, the core's replies and pushes out.

A peer's faults stay on its own connection: each frame must arrive whole within MessageTimeout
of its first byte (a total deadline: bytes dribbled in do not extend it), a send that does not
finish within MessageTimeout (a reader that stopped reading) disconnects it, at most SEND_QUEUE
pushes wait for one peer, and any frame that fails authentication or decoding is answered with
an Error, logged and the connection closed.

Nothing unauthenticated costs more than a little (docs/limits.md): a connection that has not yet
proven the key must deliver a whole frame within MessageTimeout of connecting, is read in
UNPROVEN_CHUNK pieces, and may not send a frame over UNPROVEN_MAX bytes unless its header MAC
(protocol version 5) checks out first; connections are capped in all, per source address and
while unproven, below the descriptor limit (ctld/admission.py); a frame signed before this run
started is refused, so a frame captured before a restart cannot be replayed (ctld/replaymark.py).
An over-size frame is answered with an Error naming its size and the limit, and the rest of it
is read and dropped until its deadline, so that the sender reads that Error rather than a reset.

Replies are written by the reading task itself (ctld/fastio.py): a memory channel and a writer
task per connection cost about a fifth of the controller's CPU per heartbeat and kilobytes per
node (docs/benchmarks.md, hot spots 3 and 4). Pushes, which are rare, each get a short task in
the daemon's nursery, so the core never waits on a socket; a send lock, made only when two
writes meet, keeps frames whole.
"""

from __future__ import annotations

import errno
import inspect
import logging
import math
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from ctld import eventstream, logs, permissions, userauth
from ctld.admission import READY, Admission, Caps, caps_for, fd_limit, source_of
from ctld.cluster import Cluster
from ctld.fastio import StreamIO, unread_bytes
from ctld.nodeident import NodeCredentials
from ctld.replaymark import ReplayMark
from ctld.routes import ROUTES
from ctld.wire import Prebuilt, encode_body_frame, kept
from protocol import codec
from protocol import messages as m
from protocol.errors import ProtocolError
from protocol.framing import MAX_SIZE, UNPROVEN_MAX, FrameDecoder, ReplayGuard, encode_frame
from protocol.versions import CURRENT

ACCEPT_BATCH = 256  # connections accepted per wake-up of a listener
ROOM_POLL = 0.1  # how often a full unproven pool is looked at again for an idle member
_ACCEPT_EXHAUSTED = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
RECEIVE_CHUNK = 1 << 16
UNPROVEN_CHUNK = 4 << 10  # what one read takes from a peer that has not proven the key
SEND_QUEUE = 64  # pushes waiting for a slow reader before it is cut off
ADMIN_IDLE_TIMEOUT = 120.0  # a command's connection idle this long is dropped
REPLY_BODY_CACHE = 256  # encoded HeartbeatReply bodies: (version, state, hash) -> bytes

Reconfigurer = Callable[[str], Awaitable[m.ReconfigureResult]]
Submitter = Callable[[m.SubmitJob], Awaitable[Any]]


class Connection:
    """One peer: a node daemon's long-lived session or a command's short one. Kept small: there
    is one per node (docs/benchmarks.md, hot spot 3)."""

    __slots__ = ("io", "key", "node", "peer", "pending", "ready", "scope", "send_lock",
                 "server", "stream", "version", "who")

    def __init__(self, stream: trio.SocketStream, peer: str, server: Server,
                 ready: bool = False) -> None:
        self.stream = stream
        # bytes (or the end of stream) are likely waiting: the next read tries before it waits
        self.ready = ready
        self.io = StreamIO(stream)
        self.peer = peer
        self.server = server
        self.version = CURRENT
        self.node: str | None = None  # set by the core once a node registered on it
        self.send_lock: trio.StrictFIFOLock | None = None  # made the first time a send waits
        self.scope = trio.CancelScope()
        self.pending = 0  # pushes not yet written
        # AuthType=auth/munge (ctld/userauth.py): the user munged vouched for and the session
        # key of this connection; None for the cluster key's holder (daemons, root)
        self.who: Any = None
        self.key: bytes | None = None

    # Pusher, for the core
    def push(self, msg: Any) -> bool:
        spawn = self.server.spawn
        if spawn is None or self.scope.cancel_called or self not in self.server.connections:
            return False
        if self.pending >= SEND_QUEUE:
            logs.event("send queue full; disconnecting slow peer", logging.WARNING,
                       peer=self.peer, node=self.node or "-")
            self.close_soon()
            return False
        self.pending += 1
        spawn(self._push, msg, self.version)
        return True

    def close_soon(self) -> None:
        self.scope.cancel()

    def unread(self) -> int:
        """Bytes waiting in the kernel for this connection (0 when unknown)."""
        return self.io.unread()

    async def _push(self, msg: Any, version: int) -> None:
        try:
            await self.send(self.server.encode(msg, 0, version))
        finally:
            self.pending -= 1

    async def send(self, data: bytes) -> bool:
        """Write one frame; a peer that does not take it within MessageTimeout is cut off."""
        lock = self.send_lock
        try:
            if lock is not None and lock.locked():
                await lock.acquire()
            else:
                # Nothing else is writing: offer the frame to the kernel, which nearly always
                # takes all of it (no await between the check and the acquire below).
                sent = self.io.try_send(data)
                if sent == len(data):
                    return True
                if lock is None:
                    lock = self.send_lock = trio.StrictFIFOLock()
                lock.acquire_nowait()
                data = memoryview(data)[sent:]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.close_soon()
            return False
        try:
            with trio.move_on_after(max(self.server.message_timeout, 1.0)):
                try:
                    await self.io.send_all(data)
                    return True
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.close_soon()
                    return False
        finally:
            lock.release()
        logs.event("peer too slow to read; disconnecting", logging.WARNING,
                   peer=self.peer, node=self.node or "-")
        self.close_soon()
        return False

    async def reply(self, msg: Any, request_id: int, version: int) -> bool:
        return await self.send(self.server.encode(msg, request_id, version, self.key))


class Server:
    def __init__(
        self,
        cluster: Cluster,
        key: bytes,
        *,
        reconfigure: Reconfigurer,
        max_size: int = MAX_SIZE,
        unproven_max: int = UNPROVEN_MAX,
        submit: Submitter | None = None,
        state_dir: str | None = None,
        caps: Caps | None = None,
        mirror: Callable[[str, bytes], Awaitable[None]] | None = None,
        takeover: Callable[[str], Any] | None = None,
    ) -> None:
        self.cluster = cluster
        self.submit = submit  # the daemon's: journals the job before the reply
        # The daemon's Daemon.durable: every change a reply confirms is on disk before it
        # leaves. None (tests of the core alone): nothing is persisted.
        self.sync: Callable[[], Awaitable[None]] | None = None
        self.key = key
        self.max_size = max_size
        self.unproven_max = unproven_max
        self.reconfigure = reconfigure
        self.takeover = takeover or _no_standby  # rcontrol takeover (ctld/ha.py)
        # Frames signed before this run started are refused (state_dir keeps the mark that
        # covers peers whose clocks run ahead; without one, the start alone is the bound).
        self.replay_mark = ReplayMark(state_dir, self.message_timeout)
        # each node's own (nodeident.py); `mirror`: a replicated store's copy (issue 32)
        self.node_credentials = NodeCredentials(state_dir, mirror=mirror)
        self.replay_guard = ReplayGuard(window=self.message_timeout,
                                        not_before=self.replay_mark.floor)
        self.admission = Admission(caps or caps_for(fd_limit(), len(cluster.nodes)))
        self.connections: set[Connection] = set()
        self._reply_bodies: dict[tuple[int, str, str], bytes] = {}
        # Where pushes are written from (the daemon's nursery): a push is rare, and a nursery per
        # connection to hold it would cost every connection its memory.
        self.spawn: Callable[..., Any] | None = None
        c = self.admission.caps
        logs.event("connection limits", fd_limit=c.fd_limit, connections=c.connections,
                   unproven=self.admission.pool_cap(), unproven_frame=unproven_max,
                   frame=max_size)
        if len(cluster.nodes) + 16 > c.connections:  # each node needs one, commands a few
            logs.event("descriptor limit too low for the configured nodes; raise it "
                       "(ulimit -n, or LimitNOFILE= in the systemd unit)", logging.WARNING,
                       nodes=len(cluster.nodes), fd_limit=c.fd_limit, connections=c.connections)

    @property
    def message_timeout(self) -> float:
        return float(self.cluster.config.timeouts.message_timeout)

    def encode(self, msg: Any, request_id: int, version: int, key: bytes | None = None) -> bytes:
        """`key`: a user's session key (ctld/userauth.py); the cluster key when None."""
        if key is not None:
            return _encode_with(msg, key, request_id, version)
        if isinstance(msg, Prebuilt):
            return encode_body_frame(msg.type_name, msg.body, self.key, request_id=request_id,
                                     version=version)
        # the same few bodies, a thousand times a second (a kill list makes one unique)
        if type(msg) is m.HeartbeatReply and not msg.kill_job_ids:
            key = (version, msg.node_state, msg.config_hash)
            body = self._reply_bodies.get(key)
            if body is None:
                if len(self._reply_bodies) >= REPLY_BODY_CACHE:
                    self._reply_bodies.clear()
                body = self._reply_bodies[key] = kept(codec.encode(msg, version=version))
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
        with sock:
            while True:
                await trio.lowlevel.wait_readable(sock)
                for _ in range(ACCEPT_BATCH):
                    if not self.admission.has_room():
                        # a pool full of peers whose requests wait to be read: let the rest
                        # wait in the kernel's queue until one of them is through
                        await self.admission.wait_room(ROOM_POLL)
                        break
                    try:
                        raw, addr = sock.accept()
                    except BlockingIOError:
                        break
                    except OSError as exc:
                        if exc.errno in _ACCEPT_EXHAUSTED:  # out of descriptors or memory
                            self.admission.log.event("accept", "accept failed; retrying in "
                                                     "0.1 s", logging.ERROR, error=str(exc))
                            await trio.sleep(0.1)
                        break  # ECONNABORTED and the like: the peer already left
                    peer = _addr_text(addr)
                    ready = unread_bytes(raw.fileno()) >= READY
                    if self.admission.refuses(source_of(peer), peer, ready):
                        raw.close()
                        continue
                    stream = trio.SocketStream(trio.socket.from_stdlib_socket(raw))
                    conn = Connection(stream, peer, self, ready)
                    self.admission.add(conn, source_of(peer))  # now: the batch's next sees it
                    nursery.start_soon(self._serve, conn)
                await trio.lowlevel.checkpoint()

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one accepted stream (a connection from any listener, or a test's)."""
        peer = _peer(stream)
        conn = Connection(stream, peer, self)
        conn.ready = conn.unread() >= READY
        if self.admission.refuses(source_of(peer), peer, conn.ready):
            await trio.aclose_forcefully(stream)  # over a cap: closed at once
            return
        self.admission.add(conn, source_of(peer))
        await self._serve(conn)

    async def _serve(self, conn: Connection) -> None:
        """Read `conn` (counted in by admission.add) until it ends."""
        peer, stream = conn.peer, conn.stream
        self.connections.add(conn)
        try:
            with conn.scope:
                await self._read(conn)
        except Exception as exc:  # never let one peer take the server down
            logs.event("connection failed", logging.ERROR, peer=peer, error=repr(exc))
        finally:
            self.admission.gone(conn)
            self.connections.discard(conn)
            self.cluster.disconnected(conn)
            if conn.node:
                logs.event("node disconnected", node=conn.node, peer=peer)
            # A push still being written fails with ClosedResourceError and ends.
            if isinstance(stream, trio.SocketStream):
                # what aclose_forcefully does in the end, without its cancelled scope and
                # checkpoint: this task ends here (a command's connection, hundreds a second)
                stream.socket.close()
            else:
                await trio.aclose_forcefully(stream)

    async def _read(self, conn: Connection) -> None:
        mt = self.message_timeout
        decoder = FrameDecoder(self.key, max_size=self.max_size, message_timeout=mt,
                               replay_guard=self.replay_guard, unproven_max=self.unproven_max,
                               late_allowance=self.cluster.liveness.stalls.late_allowance)
        proven = False
        # Replies held until what they confirm is on disk: every frame already received is
        # handled first, then one journal write covers them all and they leave in order (a
        # node that sends several beats at once waits for one write, not one write each).
        held: list[Held] = []
        # The deadline of the frame being read: MessageTimeout from its first byte (from the
        # connect, for a peer that has not proven the key); bytes that trickle in never move it.
        frame_deadline: float | None = trio.current_time() + mt
        while True:
            try:
                if not proven and conn.who is None and (
                        cred := userauth.offered(conn, decoder, self.unproven_max)):
                    await userauth.accept(self, conn, decoder, cred)  # a user's connection
                frame = decoder.next_frame()
            except ProtocolError as exc:
                await self._send_held(conn, held)
                self._reject(conn, exc, decoder.proven)
                await conn.reply(exc.to_error(), exc.request_id, exc.version or CURRENT)
                if exc.code == "too_large":
                    await self._drain(conn, frame_deadline or trio.current_time() + mt)
                return
            if not proven and decoder.proven:
                proven = True
                self.admission.proven(conn)
            if frame is None:
                if held:
                    await self._send_held(conn, held)
                    # a command that half-closed after its request (protocol/client.py) has
                    # its end of stream waiting: read it at once rather than wait for it
                    conn.ready = conn.node is None
                    continue  # time has passed: look at the deadlines afresh
                if decoder.buffered or not proven:
                    if frame_deadline is None:
                        frame_deadline = trio.current_time() + mt
                    limit = frame_deadline
                    why = (f"frame not completed within {mt:g} s of its first byte" if proven
                           else f"no complete request within {mt:g} s of connecting")
                elif conn.node is None:
                    limit, why = trio.current_time() + ADMIN_IDLE_TIMEOUT, "idle"
                else:
                    limit, why = math.inf, ""
                try:
                    if conn.ready:  # the first frame is in the kernel already (accept loop)
                        conn.ready = False
                        data = conn.io.read_now(RECEIVE_CHUNK if proven else UNPROVEN_CHUNK)
                        if data is not None:
                            if not data:
                                return
                            decoder.feed(data)
                            data = None
                            continue
                    if limit == math.inf:  # a registered node: no cancel scope per receive
                        data = await conn.io.receive_some(RECEIVE_CHUNK)
                    else:
                        data = None
                        with trio.move_on_at(limit):
                            data = await conn.io.receive_some(
                                RECEIVE_CHUNK if proven else UNPROVEN_CHUNK)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if data is None:
                    if proven:
                        logs.event("connection timed out", logging.WARNING, peer=conn.peer,
                                   node=conn.node or "-", why=why)
                    else:  # anyone can cause these
                        self.admission.log.event("timeout", "connection timed out",
                                                 peer=conn.peer, why=why)
                    if decoder.buffered:
                        await conn.reply(m.Error("timeout", why), 0, conn.version)
                    return
                if not data:
                    return
                decoder.feed(data)
                data = None  # a node waits seconds between beats: hold nothing of the last one
                continue
            frame_deadline = None
            conn.version = frame.version
            if self.replay_mark.needs(frame.timestamp):  # before acting on it (replaymark.py)
                await self.replay_mark.cover(frame.timestamp)
            if type(frame.msg) is m.GetEvents and frame.msg.follow:
                # the one long-lived admin connection: it streams until the client goes
                await self._send_held(conn, held)
                await eventstream.follow(self, conn, frame.msg, frame.request_id, frame.version)
                return
            confirms = False
            try:
                reply, confirms = await self._dispatch(conn, frame.msg)
            except OSError as exc:  # the journal write failed: say so, never "done"
                reply = _not_saved(type(frame.msg).__name__, exc)
            except Exception as exc:
                logging.getLogger(logs.LOGGER_NAME).exception(
                    "request failed: %s from %s", type(frame.msg).__name__, conn.peer)
                reply = m.Error("internal", f"{type(frame.msg).__name__} failed: {exc!r}")
            if reply is not None:
                held.append(Held(reply, frame.request_id, frame.version, frame.type, confirms))
            frame = reply = None

    async def _send_held(self, conn: Connection, held: list[Held]) -> None:
        """The held replies, in order, once every change they confirm is on disk (one write
        for all of them); those that confirm a change are errors if that write failed."""
        if not held:
            return
        batch = held[:]
        held.clear()
        if self.sync is not None and any(h.confirms for h in batch):
            try:
                await self.sync()
            except OSError as exc:
                batch = [attrs.evolve(h, reply=_not_saved(h.request, exc)) if h.confirms else h
                         for h in batch]
        for h in batch:
            if h.reply is not None:
                await conn.reply(h.reply, h.request_id, h.version)
                _log_refusal(conn, h.request, h.reply)

    def _confirms(self, msg: Any, nodes_changed: bool, jobs_changed: bool) -> bool:
        """Whether the reply to `msg` waits for the journal. A heartbeat confirms only the
        endings it carries (the node forgets them on the reply) and what it changed."""
        if type(msg) is m.Heartbeat:
            return bool(msg.jobs_ended or nodes_changed or jobs_changed)
        if type(msg) is m.Register:
            # A registration confirms only the endings it carries and the jobs it moved; its
            # own state change is journalled with the next write (a registration storm does
            # not wait on the disk: lost at a crash, the node registers again).
            return bool(msg.jobs_ended or jobs_changed)
        return True

    async def _drain(self, conn: Connection, deadline: float) -> None:
        """Read and drop what the peer still sends, until it closes or the deadline: a socket
        closed with unread input is reset, and the peer would see that instead of our Error."""
        with trio.move_on_at(deadline):
            while True:
                try:
                    if not await conn.io.receive_some(RECEIVE_CHUNK):
                        return
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return

    def _reject(self, conn: Connection, exc: ProtocolError, proven: bool) -> None:
        if proven:
            logs.event("frame rejected", logging.WARNING, peer=conn.peer, node=conn.node or "-",
                       code=exc.code, error=exc.message)
        else:  # anyone can send these: at most a line per kind every few seconds
            self.admission.log.event(f"rejected:{exc.code}", "frame rejected", peer=conn.peer,
                                     code=exc.code, error=exc.message)

    async def _dispatch(self, conn: Connection, msg: Any) -> tuple[Any, bool]:
        """(the reply of the request's route (ctld/routes.py), whether it confirms a change:
        then it may leave only once the change is on disk)."""
        route = ROUTES.get(type(msg))
        if route is None:
            return m.Error("bad_request",
                           f"{type(msg).__name__} is not a request rctld serves"), False
        msg, refused, after = permissions.gate(self, conn, msg)  # who may (ctld/permissions.py)
        if refused is not None:
            return refused, False
        c = self.cluster
        nodes_before, jobs_before = c.node_changes, c.job_changes
        reply = route.handler(self, conn, msg)
        if inspect.isawaitable(reply):
            reply = await reply
        confirms = route.changes and self._confirms(
            msg, c.node_changes != nodes_before, c.job_changes != jobs_before)
        return (reply if after is None else after(reply)), confirms


@attrs.frozen
class Held:
    """A reply held back until the journal holds what it confirms."""

    reply: Any
    request_id: int
    version: int
    request: str  # the request's type name (logs)
    confirms: bool


def _not_saved(request: str, exc: OSError) -> m.Error:
    logs.event("change not saved; request answered with an error", logging.ERROR,
               request=request, error=str(exc))
    return m.Error("internal", f"{request}: the change could not be written to disk "
                   f"({exc.strerror or exc}); it is in effect but a controller restart "
                   "would lose it")


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


def _log_refusal(conn: Connection, request: str, reply: Any) -> None:
    """Every refused request is logged with the peer that sent it."""
    if isinstance(reply, m.Error):
        errors: tuple[str, ...] = (f"{reply.code}: {reply.message}",)
    elif isinstance(reply, m.UpdateResult | m.ReconfigureResult | m.JobResult) and not reply.ok:
        errors = reply.errors
    elif isinstance(reply, m.RegisterReply) and not reply.accepted:
        if reply.health_check_first:
            return  # the normal first step of a node with a health check, not a refusal
        errors = (reply.reason,)
    else:
        return
    shown = "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
    logs.event("request refused", logging.WARNING, request=request, peer=conn.peer,
               node=conn.node or "-", error=shown)


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
