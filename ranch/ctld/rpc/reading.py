"""One connection's read loop, in named steps: take a user's credential, decode the next frame
(or refuse the connection), wait for bytes under the right deadline, act on a frame, and send the
replies held until what they confirm is on disk.

A frame must arrive whole within MessageTimeout of its first byte (of the connect, for a peer
that has not proven the key); bytes that trickle in never move that deadline. A frame's age is
judged as of when its bytes were read (not after it waited behind the frames before it), less
the time they waited unread in this controller's socket (a storm's backlog).
Replies are held: every frame already received is handled first, then one journal write covers
them all and they leave in order (a node that sends several beats at once waits for one write,
not one each).
"""

from __future__ import annotations

import functools
import logging
import math
from typing import TYPE_CHECKING

import trio

from ranch.ctld import logs
from ranch.ctld.rpc import userauth
from ranch.ctld.rpc.allowance import connection_allowance
from ranch.ctld.rpc.dispatch import Held, journal_written, log_refusal, settled
from ranch.ctld.rpc.fastio import RECEIVE_CHUNK, UNPROVEN_CHUNK
from ranch.ctld.rpc.readnow import ReadsNow
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import Frame, FrameDecoder
from ranch.protocol.versions import CURRENT

if TYPE_CHECKING:
    from ranch.ctld.rpc.connection import Connection
    from ranch.ctld.rpc.readparts import Steps

ADMIN_IDLE_TIMEOUT = 120.0  # a command's connection idle this long is dropped


class Idle:
    """What next_frame answers for a node with nothing to read yet (the one IDLE)."""

    __slots__ = ()


IDLE = Idle()


class FrameReader(ReadsNow):
    """Reads one connection until it ends; each `run` is a task (a node parked between frames
    starts a new one when it speaks: ctld/rpc/idlenodes.py). Its steps that never wait, for a
    caller with no task for it (the idle poller, the accept loop), are ReadsNow's."""

    __slots__ = ("may_park", "timeout")  # and ReadsNow's

    def __init__(self, steps: Steps, conn: Connection, *, may_park: bool = False) -> None:
        """`may_park`: a node between frames may be handed to the server's idle poller
        (ctld/rpc/idlenodes.py) rather than wait in this task."""
        self.steps = steps
        self.conn = conn
        self.may_park = may_park
        d = steps.decoding
        self.timeout = mt = d.message_timeout()
        self.decoder = FrameDecoder(
            d.key, max_size=d.max_size, message_timeout=mt, clock=d.wall,
            replay_guard=d.replay_guard, unproven_max=d.unproven_max,
            late_allowance=d.stalls.late_allowance,
            # no reference back to this reader: a cycle would leave every closed connection's
            # reader for the garbage collector (rctld keeps it rare; ctld/gctune.py)
            queued=functools.partial(connection_allowance, d.stalls, conn,
                                     d.replay_guard.window - mt))
        self.proven = False
        self.held: list[Held] = []
        # what `quick` read and left to the task: a frame to act on, or a refusal to send
        self.pending: Frame | ProtocolError | None = None
        # The deadline of the frame being read (None between frames): from the connect for a
        # peer that has not proven the key, else from the frame's first byte.
        self.frame_deadline: float | None = trio.current_time() + mt

    async def run(self) -> None:
        """One stretch of the connection's life in a task: frames are read and acted on until
        the connection ends (the server then forgets it) or, a node with nothing to read, it is
        parked with the server's idle poller, which starts the next stretch once bytes come."""
        conn, steps = self.conn, self.steps
        parked = False
        try:
            if conn.closing:  # closed while its stretch was about to start
                return
            with trio.CancelScope() as conn.scope:
                while True:
                    frame = await self.next_frame()
                    if frame is None:
                        return
                    if isinstance(frame, Idle):
                        if self.may_park and steps.idle.park(self):
                            parked = True  # no await from here to the task's end
                            return
                        try:
                            conn.ready = await conn.io.wait_readable()
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            return
                        continue
                    go_on = await self.act(frame)
                    # not kept while the next one is awaited: a node's last heartbeat, decoded,
                    # is about 2 KB (its GPU metrics), seconds at a time, on every connection
                    del frame
                    if not go_on:
                        return
        except Exception as exc:  # never let one peer take the server down
            logs.event("connection failed", logging.ERROR, peer=conn.peer, error=repr(exc))
        finally:
            conn.scope = None
            if not parked and steps.ended(conn):
                await trio.aclose_forcefully(conn.stream)

    async def next_frame(self) -> Frame | Idle | None:
        """The next whole frame, or None once the connection is to end (closed, timed out,
        refused: each already answered and logged), or IDLE: a node with nothing to read, for
        `run` to park or wait on."""
        conn, decoder = self.conn, self.decoder
        if self.pending is not None:
            pending, self.pending = self.pending, None
            if not isinstance(pending, ProtocolError):
                return pending
            await self.refuse(pending)
            return None
        while True:
            try:
                if not self.proven and conn.who is None:
                    await self.take_credential()
                frame = decoder.next_frame()
            except ProtocolError as exc:
                await self.refuse(exc)
                return None
            if not self.proven and decoder.proven:
                self.proven = True
                self.steps.admission.proven(conn)
            if frame is not None:
                return frame
            if self.held:
                await self.send_held()
                # a command that half-closed after its request (protocol/client.py) has its end
                # of stream waiting: read it at once rather than wait for it
                conn.ready = conn.node is None
                continue  # time has passed: look at the deadlines afresh
            if self.idle_node():
                return IDLE
            if not await self.receive():
                return None

    def idle_node(self) -> bool:
        """A registered node's socket with nothing buffered, held or still to prove: the next
        bytes start a new frame, whenever they come."""
        conn = self.conn
        return (conn.node is not None and not conn.ready and conn.io.sock is not None
                and self.proven and not self.held and not self.decoder.buffered)

    async def take_credential(self) -> None:
        """A user's connection starts with a MUNGE credential (ctld/rpc/userauth.py)."""
        cred = userauth.offered(self.conn, self.decoder, self.steps.decoding.unproven_max)
        if cred:
            await self.steps.sign_in(self.conn, self.decoder, cred)

    def deadline(self) -> tuple[float, str]:
        """(when the wait for bytes ends, why, for the log): a frame under way or an unproven
        peer has MessageTimeout; an idle command ADMIN_IDLE_TIMEOUT; a registered node none."""
        mt = self.timeout
        if self.decoder.buffered or not self.proven:
            if self.frame_deadline is None or self.conn.relaying:
                # a relay's batches follow one another and wait on this side while the one
                # before is acted on: each read must come within MessageTimeout, not the frame
                self.frame_deadline = trio.current_time() + mt
            why = (f"frame not completed within {mt:g} s of its first byte" if self.proven
                   else f"no complete request within {mt:g} s of connecting")
            return self.frame_deadline, why
        if self.conn.node is None:
            return trio.current_time() + ADMIN_IDLE_TIMEOUT, "idle"
        return math.inf, ""

    async def receive(self) -> bool:
        """Feed the decoder what arrives before the deadline; False once the connection is to
        end (the peer closed it, or the deadline passed: logged, and answered mid-frame)."""
        conn = self.conn
        chunk = RECEIVE_CHUNK if self.proven else UNPROVEN_CHUNK
        limit, why = self.deadline()
        try:
            if conn.ready:  # the first frame is in the kernel already (the accept loop saw it)
                conn.ready = False
                data = conn.io.read_now(chunk)
                if data is not None:
                    if not data:
                        return False
                    self.decoder.feed(data)
                    return True
            if limit == math.inf:  # a registered node: no cancel scope per receive
                data = await conn.io.receive_some(RECEIVE_CHUNK)
            else:
                data = None
                with trio.move_on_at(limit):
                    data = await conn.io.receive_some(chunk)
            if data is None:
                # Bytes that came before the deadline and were not read in time waited on us
                # (a storm's backlog, a busy loop), not on the peer: judged as of the deadline.
                data = conn.io.read_now(chunk)
                if data is not None and conn.io.waited() < trio.current_time() - limit:
                    data = None  # they came after it: the peer was late
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        if data is None:
            await self.timed_out(why)
            return False
        if not data:
            return False
        # a node waits seconds between beats: the chunk is not kept past this call
        self.decoder.feed(data)
        return True

    async def timed_out(self, why: str) -> None:
        conn = self.conn
        if self.proven:
            logs.event("connection timed out", logging.WARNING, peer=conn.peer,
                       node=conn.node or "-", why=why)
        else:  # anyone can cause these
            self.steps.admission.log.event("timeout", "connection timed out", peer=conn.peer,
                                            why=why)
        if self.decoder.buffered:
            await conn.reply(m.Error("timeout", why), 0, conn.version)

    async def refuse(self, exc: ProtocolError) -> None:
        """A frame failed authentication or decoding: the replies before it, then the Error;
        an over-size frame's rest is read and dropped so the sender reads the Error."""
        await self.send_held()
        conn = self.conn
        if self.decoder.proven:
            logs.event("frame rejected", logging.WARNING, peer=conn.peer, node=conn.node or "-",
                       code=exc.code, error=exc.message)
        else:  # anyone can send these: at most a line per kind every few seconds
            self.steps.admission.log.event(f"rejected:{exc.code}", "frame rejected",
                                            peer=conn.peer, code=exc.code, error=exc.message)
        await conn.reply(exc.to_error(), exc.request_id, exc.version or CURRENT)
        if exc.code == "too_large":
            await self.drain(self.frame_deadline or trio.current_time() + self.timeout)

    async def drain(self, deadline: float) -> None:
        """Read and drop what the peer still sends, until it closes or the deadline: a socket
        closed with unread input is reset, and the peer would see that instead of our Error."""
        with trio.move_on_at(deadline):
            while True:
                try:
                    if not await self.conn.io.receive_some(RECEIVE_CHUNK):
                        return
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return

    async def act(self, frame: Frame) -> bool:
        """Act on one frame and hold its reply; False when the connection ends with it (the
        event stream takes it over)."""
        steps, conn = self.steps, self.conn
        self.frame_deadline = None
        conn.version = frame.version
        if steps.replay_mark.needs(frame.timestamp):  # before acting on it (replaymark.py)
            await steps.replay_mark.cover(frame.timestamp)
        msg = frame.msg
        if type(msg) is m.Register and conn.node is None:
            busy = steps.capacity.registering(msg.name, conn.peer)  # nodes over their places
            if busy is not None:  # logged quietly there, not once per refusal here
                await self.send_held()
                await conn.reply(busy, frame.request_id, frame.version)
                return False
        if type(msg) is m.GetEvents and msg.follow:
            # the one long-lived admin connection: it streams until the client goes
            await self.send_held()
            await steps.follow(conn, msg, frame.request_id, frame.version)
            return False
        reply, confirms = await steps.dispatcher.answer(conn, msg)
        if reply is not None:
            self.held.append(Held(reply, frame.request_id, frame.version, frame.type, confirms))
        return True

    async def send_held(self) -> None:
        """The held replies, in order, once every change they confirm is on disk (one write
        for all of them); those that confirm a change are errors if that write failed."""
        if not self.held:
            return
        batch = self.held[:]
        self.held.clear()
        failure = await journal_written(self.steps.sync, any(h.confirms for h in batch))
        for h in batch:
            reply = settled(h.reply, h.confirms, h.request, failure)
            if reply is not None:
                await self.conn.reply(reply, h.request_id, h.version)
                log_refusal(self.conn, h.request, reply)
