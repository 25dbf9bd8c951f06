"""A connection's frames acted on with no task of its own: a parked node's, a command's one.

A parked node's next frame is read and acted on in the idle poller's task (`quick`: a plain
heartbeat, answered at once; ctld/rpc/idlenodes.py). A beat whose reply waits for the journal (it
carried an ending) is answered there too once the write is done (`settle_nodes`), when the
write holds the loop anyway (the file journal).

A command (rbatch, rinfo, rqueue...) connects, sends one request and half-closes
(protocol/client.py), so by the time its connection is accepted the kernel nearly always holds the
whole request and the end of stream behind it. Then the request is read, acted on and answered
where it was accepted: a task per connection, its cancel scope and its scheduler passes were a
fifth of rctld's CPU for a Ping (docs/benchmarks.md, issue 50). A reply that confirms a change (a
submission, a cancel) waits for the journal: the accept loop hands the batch's such connections
to one task (`settle`), whose one write covers them all, as the connections' own tasks shared one.

Anything else goes to the connection's task, as before, carrying on from where this left off: a
frame not whole yet, a MUNGE credential, a request not in AT_ONCE or more than one, a client that
did not half-close, a frame that fails its checks (its refusal). A reply the kernel takes only
part of (a long listing to a client slow to read) is finished by a short task, which then closes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from ranch.ctld import logs
from ranch.ctld.rpc import userauth
from ranch.ctld.rpc.dispatch import IMMEDIATE, Held, journal_written, log_refusal, settled
from ranch.ctld.rpc.fastio import RECEIVE_CHUNK, UNPROVEN_CHUNK
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError

if TYPE_CHECKING:
    from ranch.ctld.rpc.connection import Connection
    from ranch.ctld.rpc.readparts import Steps
    from ranch.protocol.framing import Frame, FrameDecoder

# The requests whose routes answer without waiting (Dispatcher.dispatch_now; tests/ctld/
# test_readnow.py checks each route), from the commands: rinfo, rqueue, rsprio, rshare, rcontrol
# show, ping, rbatch / ralloc / rrun's submission, rcancel, rcontrol hold|release|... (rqueue
# --why and racct wait: their tasks answer them)
AT_ONCE = frozenset({
    m.Ping, m.GetSnapshot, m.GetJobs, m.GetDiag, m.GetConfig, m.PriorityRequest, m.ShareRequest,
    m.SubmitJob, m.CancelJobs, m.JobControl,
})
DONE = "done"  # a command answered at once, and its connection closed
SETTLE = "settle"  # its reply waits for the journal: the accept loop's batch hands it to `settle`
TASK = "task"  # the connection's task carries on from here


class ReadsNow:
    """FrameReader's steps that never wait (ctld/rpc/reading.py), and the state they share."""

    __slots__ = ("conn", "decoder", "frame_deadline", "held", "pending", "proven", "steps")
    conn: Connection
    decoder: FrameDecoder
    steps: Steps
    held: list[Held]
    pending: Frame | ProtocolError | None
    proven: bool
    frame_deadline: float | None

    if TYPE_CHECKING:  # the connection's task (FrameReader.run), which the idle poller starts
        async def run(self) -> None: ...

    def quick(self) -> bool:
        """A parked node's next frame read and acted on in the idle poller's own task, with no
        task, cancel scope or await of its own: at 10,000 nodes those were a fifth of rctld's
        CPU per heartbeat (docs/benchmarks.md, issue 50). True: done, the reply written and the
        connection parked again. False: start the task, which carries on from here: a frame
        not yet whole, one whose route waits (`pending`), a refusal (`pending`), a reply held
        for the journal's write or for another write under way, a connection closing."""
        try:
            return self._quick()
        except Exception as exc:  # as in `run`: one peer never takes the poller down
            logs.event("connection failed", logging.ERROR, peer=self.conn.peer,
                       error=repr(exc))
            self.conn.closing = True  # the task starts, sees it and ends the connection
            return False

    def _quick(self) -> bool:
        conn, decoder, steps = self.conn, self.decoder, self.steps
        if conn.closing or self.held or self.pending is not None or not self.proven:
            return False
        data = self._read(RECEIVE_CHUNK)
        if not data:  # nothing after all (the task waits), or the end (the task meets it)
            return False
        conn.ready = False
        decoder.feed(data)
        try:
            frame = decoder.next_frame()
        except ProtocolError as exc:
            self.pending = exc
            return False
        if frame is None:  # the frame's first bytes: the task reads the rest, under its deadline
            return False
        if type(frame.msg) not in IMMEDIATE or steps.replay_mark.needs(frame.timestamp):
            self.pending = frame
            return False
        self.frame_deadline = None
        conn.version = frame.version
        reply, confirms = steps.dispatcher.answer_now(conn, frame.msg)
        if reply is None:
            return not conn.closing and not decoder.buffered and steps.idle.park(self)
        sent = None if confirms or conn.closing or decoder.buffered else conn.send_now(
            conn.links.encode(reply, frame.request_id, frame.version, conn.key))
        if sent is None:  # held for the journal, behind another write, or frames to come
            self.held.append(Held(reply, frame.request_id, frame.version, frame.type, confirms))
            return False
        log_refusal(conn, frame.type, reply)
        return sent and steps.idle.park(self)

    def only_held(self) -> bool:
        """Whether all `quick` left is replies held for the journal's write (a beat that carried
        a job's end): the idle poller's `settle_nodes` can finish it with no task."""
        conn = self.conn
        return bool(self.held) and self.pending is None and not conn.closing \
            and not self.decoder.buffered

    def send_settled(self, failure: OSError | None, spawn: Callable[..., Any]) -> None:
        """The held replies sent once the journal write they waited for ended (`failure`: how
        it failed), and the node parked again; what cannot be finished here (a write under way,
        a reply the kernel takes only part of, a connection closing) its task finishes."""
        conn, held = self.conn, self.held
        try:
            while held:
                h = held[0]
                reply = settled(h.reply, h.confirms, h.request, failure)
                if reply is not None:
                    sent = conn.send_now(conn.links.encode(reply, h.request_id, h.version,
                                                           conn.key))
                    if sent is None:  # behind another write: the task sends it, and the rest
                        held[0] = Held(reply, h.request_id, h.version, h.request, False)
                        break
                    log_refusal(conn, h.request, reply)
                del held[0]
            if not held and not conn.closing and self.steps.idle.park(self):
                return
        except Exception as exc:  # as in `quick`: one peer never takes the poller down
            logs.event("connection failed", logging.ERROR, peer=conn.peer, error=repr(exc))
            conn.closing = True  # the task starts, sees it and ends the connection
        spawn(self.run, name="rpc connection")

    def first(self, spawn: Callable[..., Any]) -> str:
        """Read, act on and answer the one request of a command whose bytes are in the kernel:
        DONE, SETTLE or TASK (the module's docstring). `spawn`: where a task that finishes a
        long reply is started (the accept loop's nursery)."""
        try:
            return self._first(spawn)
        except Exception as exc:  # as in `run`: one peer never takes the accept loop down
            logs.event("connection failed", logging.ERROR, peer=self.conn.peer,
                       error=repr(exc))
            self.conn.closing = True  # the task starts, sees it and ends the connection
            return TASK

    def _first(self, spawn: Callable[..., Any]) -> str:
        conn, decoder, steps = self.conn, self.decoder, self.steps
        conn.ready = True  # whatever the task is left, it reads at once before it waits
        while True:  # an unproven peer's first read is UNPROVEN_CHUNK; once proven, the rest
            data = self._read(RECEIVE_CHUNK if decoder.proven else UNPROVEN_CHUNK)
            if not data:  # nothing after all (the task waits), or the end (the task meets it)
                return TASK
            decoder.feed(data)
            try:
                if not self.proven and conn.who is None and userauth.offered(
                        conn, decoder, steps.decoding.unproven_max):
                    return TASK  # a user's MUNGE credential: the task asks munged
                frame = decoder.next_frame()
            except ProtocolError as exc:
                self.pending = exc
                return TASK
            if frame is not None:
                break
        if not self.proven and decoder.proven:
            self.proven = True
            steps.admission.proven(conn)
        self.pending = frame  # until it is acted on here, the task's to act on
        if type(frame.msg) not in AT_ONCE or decoder.buffered or \
                steps.replay_mark.needs(frame.timestamp):
            return TASK
        rest = self._read(RECEIVE_CHUNK)
        if rest != b"":  # more bytes, or no end of stream yet: the task reads on after this one
            if rest:
                decoder.feed(rest)
            return TASK
        self.pending = self.frame_deadline = None
        conn.version = frame.version
        reply, confirms = steps.dispatcher.answer_now(conn, frame.msg)
        held = Held(reply, frame.request_id, frame.version, frame.type, confirms)
        if confirms:
            self.held.append(held)
            return SETTLE
        self._answer(held, reply, spawn)
        return DONE

    def _read(self, size: int) -> bytes | None:
        try:
            return self.conn.io.read_now(size)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return b""  # the task's read meets it again, and ends the connection

    def answer_settled(self, failure: OSError | None, spawn: Callable[..., Any]) -> None:
        """The reply `first` held (SETTLE) sent, once the journal write it waited for ended
        (`failure`: how it failed), and the connection closed; a connection closed meanwhile
        (close_soon) is only forgotten."""
        held = self.held.pop()
        try:
            if self.conn.closing:
                self.steps.ended(self.conn)
                return
            self._answer(held, settled(held.reply, held.confirms, held.request, failure), spawn)
        except Exception as exc:  # one peer's failure ends its connection, not the batch's
            logs.event("connection failed", logging.ERROR, peer=self.conn.peer,
                       error=repr(exc))
            self.steps.ended(self.conn)

    def _answer(self, held: Held, reply: Any, spawn: Callable[..., Any]) -> None:
        """Write `reply` and close; what the kernel does not take at once a short task writes
        (under MessageTimeout, Connection.send), then closes."""
        conn = self.conn
        if reply is not None:
            data = conn.links.encode(reply, held.request_id, held.version, conn.key)
            log_refusal(conn, held.request, reply)
            try:
                sent = conn.io.try_send(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                sent = len(data)  # the client left: nothing more to write
            if sent < len(data):
                spawn(self._write_rest, data[sent:])
                return
        self.steps.ended(conn)

    async def _write_rest(self, rest: bytes) -> None:
        try:
            await self.conn.send(rest)
        finally:
            self.steps.ended(self.conn)


Answer = Callable[[ReadsNow, OSError | None, Callable[..., Any]], None]


async def settle(readers: Sequence[ReadsNow], spawn: Callable[..., Any],
                 answer: Answer = ReadsNow.answer_settled) -> None:
    """A batch of replies that wait for the journal: one write for them all, then each reader's
    `answer`. The accept loop's commands (`answer_settled`: the reply sent, the connection
    closed); the idle poller's nodes whose beats carried endings (`settle_nodes`: the reply
    sent, the node parked again; a task per such beat was a job's one task of rctld's,
    docs/benchmarks.md, issue 50). Only where the write holds the loop anyway (the file
    journal). Cancelled (the server stops), or the wait failing other than the write (a fault
    of ours), they are closed unanswered, as their tasks were (a node keeps its endings and
    sends them again when it has reconnected)."""
    try:
        failure = await journal_written(readers[0].steps.sync, True)
    except BaseException as exc:
        for reader in readers:
            reader.steps.ended(reader.conn)
        if not isinstance(exc, Exception):
            raise
        # as each connection's task did (FrameReader.run): logged, never the server's end
        logs.event("connection failed", logging.ERROR, peer=readers[0].conn.peer,
                   connections=len(readers), error=repr(exc))
        return
    for reader in readers:
        answer(reader, failure, spawn)


settle_nodes = functools.partial(settle, answer=ReadsNow.send_settled)
