"""Relays on rctld's side (issue 47): each relayed node's session, checked with its own key.

A relay's connection carries RelayUp batches; each item is one node's frame, whole and signed
with that node's key (protocol/relaymessages.py). Every relayed node has a session here
(`RelayedConnection`): no socket, no task, no buffer, only its decoder (its node key, the
server's replay guard). The RelayUp route acts on the batch's frames in order as a direct
connection's reader acts on its frames (ctld/rpc/reading.py): each checked, dispatched by the
same routes, its reply held until the journal has what it confirms (one write for the batch).
What rctld sends a relayed node (replies, orders) is signed with its node key and leaves in the
relay's next RelayDown, gathered over one pass of the scheduler. A frame the relay altered or
made up fails the MAC and ends that node's session (logged with the relay it came through); a
type a node never sends (an admin's request) is refused before it is read. The relay's own
connection ending ends its nodes' sessions, as their own connections' ends would: no node is
marked DOWN for it, its failure detection still counts only its heartbeats
(ctld/nodes/liveness.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs
import trio

from ranch.ctld import logs
from ranch.ctld.rpc.connection import Connection, Links
from ranch.ctld.rpc.dispatch import Held, journal_written, log_refusal, settled
from ranch.ctld.rpc.readparts import Steps
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import FrameDecoder
from ranch.protocol.relaymessages import NODE_UPWARD, frame_type, node_key_of_digest
from ranch.protocol.versions import CURRENT

DOWN_BYTES = 4 << 20  # a RelayDown's frames at most


class Outlet:
    """What goes down one relay's connection: items gathered, one RelayDown per pass."""

    __slots__ = ("conn", "items", "scheduled")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.items: list[m.RelayItem] = []
        self.scheduled = False

    def send(self, item: m.RelayItem) -> None:
        self.items.append(item)
        if self.scheduled:
            return
        spawn = self.conn.links.spawn()
        if spawn is None:
            return
        self.scheduled = True
        spawn(self._flush)

    async def _flush(self) -> None:
        await trio.sleep(0)  # the other replies of this pass join the batch
        items, self.items, self.scheduled = self.items, [], False
        conn = self.conn
        while items and not conn.closing:
            # a storm's RegisterReplies carry the config files each: several frames, each
            # well under the frame limit (base64 adds a third)
            n = size = 0
            while n < len(items) and (n == 0 or size + len(items[n].frame) <= DOWN_BYTES):
                size += len(items[n].frame)
                n += 1
            batch, items = tuple(items[:n]), items[n:]
            await conn.send(conn.links.encode(m.RelayDown(batch), 0, conn.version))


@attrs.define(eq=False)
class Relay:
    """One relay's connection and the sessions of the nodes it carries."""

    name: str
    conn: Connection
    outlet: Outlet
    end: Callable[[RelayedConnection], None]  # a session is over (RelayHub._ended)
    stalls: Callable[[], float]  # the allowance for the controller's own stalls
    nodes: dict[str, RelayedConnection] = attrs.Factory(dict)
    waited: float = 0.0  # how long the batch being read took from the relay to here

    def reading(self, waited: float) -> None:
        """A batch that took `waited` seconds from the relay to here is being read."""
        self.waited = waited

    def allowance(self) -> float:
        """What a node's frame in this batch may be late by beyond MessageTimeout: the
        batch's way here and the controller's stalls, not its wait at the node or the relay."""
        return max(self.waited, self.stalls())

    def carry(self, session: RelayedConnection) -> None:
        self.nodes[session.proven_name] = session

    def drop(self, session: RelayedConnection) -> bool:
        """Forget `session` (True) unless a newer one of its node replaced it."""
        if self.nodes.get(session.proven_name) is not session:
            return False
        del self.nodes[session.proven_name]
        return True


class RelayedConnection(Connection):
    """A node's session through a relay, proven as `proven_name` by its key alone. It holds no
    stream and no task: its frames are decoded and acted on as the relay's RelayUp brings them,
    and what is sent to it joins the relay's next RelayDown."""

    __slots__ = ("decoder", "proven_name", "relay")

    def __init__(self, peer: str, links: Links, node: str, key: bytes, relay: Relay,
                 decoder: FrameDecoder) -> None:
        super().__init__(None, peer, links)  # type: ignore[arg-type]  # no stream of its own
        self.key = key  # replies and pushes are signed with the node's key
        self.proven_name = node
        self.relay = relay
        self.decoder = decoder

    async def send(self, frame: bytes) -> bool:
        if self.closing:
            return False
        self.relay.outlet.send(m.RelayItem(self.proven_name, frame))
        return True

    def close_soon(self) -> None:
        if not self.closing:
            self.closing = True
            self.relay.end(self)


class RelayHub:
    """Every relay's connection and the relayed sessions under it."""

    def __init__(self, links: Links, steps: Steps, digest: Callable[[str], str | None],
                 disconnected: Callable[[Connection], None]) -> None:
        """`links`/`steps`: the server's, which the relayed sessions share (their own set of
        open connections, their own key and end); `digest`: a node's credential digest
        (ctld/rpc/nodecredentials.py); `disconnected`: what a node's connection ending tells
        the node side."""
        self.relays: dict[Connection, Relay] = {}
        self.open: set[Connection] = set()  # the relayed sessions (a closed one pushes nothing)
        self.links = attrs.evolve(links, connections=self.open)
        self.steps = steps
        self.digest = digest
        self.disconnected = disconnected
        self.refused = 0  # inner frames refused before they were read (type, no key)

    def up(self, conn: Connection, msg: m.RelayUp) -> Any:
        """The RelayUp route: each item to its node's session (opened at its first frame),
        acted on in order; the replies leave once what they confirm is on disk."""
        if conn.who is not None or isinstance(conn, RelayedConnection):
            return m.Error("permission_denied", "only a relay rnoded (the cluster key) relays")
        relay = self.relays.get(conn)
        if relay is None:
            relay = self.relays[conn] = Relay(msg.relay, conn, Outlet(conn), self._ended,
                                              self.steps.decoding.stalls.late_allowance)
            logs.event("relay connected", relay=msg.relay, peer=conn.peer)
            conn.relaying = True
        return self._take(relay, msg) if msg.items else None

    async def _take(self, relay: Relay, msg: m.RelayUp) -> None:
        d = self.steps.decoding
        cover = d.replay_guard.window - d.message_timeout()  # what the guard keeps nonces for
        relay.reading(min(cover, max(0.0, d.wall() - msg.sent)) if msg.sent else 0.0)
        held: list[tuple[RelayedConnection, Held]] = []
        for i, item in enumerate(msg.items):
            if i % 32 == 31:  # the other relays and connections get their turn
                await trio.lowlevel.checkpoint()
            session = self._session(relay, item)
            if session is not None:
                answer = await self._act(session, item.frame)
                if answer is not None:
                    held.append((session, answer))
        failure = await journal_written(self.steps.sync, any(h.confirms for _, h in held))
        for session, h in held:
            reply = settled(h.reply, h.confirms, h.request, failure)
            await session.reply(reply, h.request_id, h.version)
            log_refusal(session, h.request, reply)

    def _session(self, relay: Relay, item: m.RelayItem) -> RelayedConnection | None:
        """The session `item` goes to (opened at its node's first frame), None when the item
        ends it or is refused."""
        session = relay.nodes.get(item.node)
        if item.gone:
            if session is not None:
                session.close_soon()
            return None
        kind = frame_type(item.frame)
        if kind not in NODE_UPWARD:
            self._refuse(relay, item.node, f"a {kind or 'malformed'} frame is not a node's to "
                         "send through a relay")
            if session is not None:
                session.close_soon()
            return None
        if session is None or session.closing:
            session = self._open(relay, item.node)
        return session

    async def _act(self, session: RelayedConnection, frame_bytes: bytes) -> Held | None:
        """One frame of a node's session, as a direct connection's reader acts on it
        (ctld/rpc/reading.py): checked with the node's key, dispatched, its reply held. A frame
        refused ends the session, as it ends a direct connection."""
        steps = self.steps
        session.decoder.feed(frame_bytes)
        try:
            frame = session.decoder.next_frame()
            if frame is None:
                raise ProtocolError("bad_frame", "a relayed frame must be whole", fatal=True)
        except ProtocolError as exc:
            logs.event("frame rejected", logging.WARNING, peer=session.peer,
                       node=session.proven_name, code=exc.code, error=exc.message)
            await session.reply(exc.to_error(), exc.request_id, exc.version or CURRENT)
            session.close_soon()
            return None
        conn: Connection = session
        conn.version = frame.version
        if steps.replay_mark.needs(frame.timestamp):
            await steps.replay_mark.cover(frame.timestamp)
        reply, confirms = await steps.dispatcher.answer(session, frame.msg)
        if reply is None:
            return None
        return Held(reply, frame.request_id, frame.version, frame.type, confirms)

    def _open(self, relay: Relay, node: str) -> RelayedConnection | None:
        digest = self.digest(node)
        if digest is None:
            self._refuse(relay, node, "no node credential is on file for it (a node registers "
                         "straight to rctld once, to be issued one, before it may be relayed)")
            return None
        key = node_key_of_digest(digest)
        d = self.steps.decoding
        decoder = FrameDecoder(key, max_size=d.max_size, message_timeout=d.message_timeout(),
                               clock=d.wall, replay_guard=d.replay_guard,
                               late_allowance=d.stalls.late_allowance, queued=relay.allowance)
        session = RelayedConnection(f"{relay.conn.peer} (relay {relay.name})", self.links,
                                    node, key, relay, decoder)
        relay.carry(session)
        self.open.add(session)
        return session

    def _refuse(self, relay: Relay, node: str, why: str) -> None:
        self.refused += 1
        logs.event("relayed frame refused", logging.WARNING, relay=relay.name,
                   peer=relay.conn.peer, node=node, why=why)
        relay.outlet.send(m.RelayItem(node, gone=True))

    def _ended(self, conn: RelayedConnection) -> None:
        """A relayed session is over (the node left the relay, a refused frame, the relay
        gone, the node side closed it): the node side is told as for a direct connection's
        end, and the relay, so that it closes the node's connection."""
        self.open.discard(conn)
        relay = conn.relay
        if relay.drop(conn) and not relay.conn.closing and self.relays.get(relay.conn) is relay:
            relay.outlet.send(m.RelayItem(conn.proven_name, gone=True))
        if conn.node is not None:
            self.disconnected(conn)
            logs.event("node disconnected", node=conn.node, peer=conn.peer)

    def relay_ended(self, conn: Connection) -> None:
        """The relay's own connection ended: every session under it ends (each node comes back
        through another relay or straight, within seconds; none is DOWN for it)."""
        relay = self.relays.pop(conn, None)
        if relay is None:
            return
        logs.event("relay disconnected", logging.WARNING, relay=relay.name, peer=conn.peer,
                   nodes=len(relay.nodes))
        for session in list(relay.nodes.values()):
            session.close_soon()

    def counts(self) -> dict[str, int]:
        return {"relays": len(self.relays), "relayed": len(self.open), "refused": self.refused}
