"""Relays on rctld's side (issue 47): each relayed node's session, checked with its own key.

A relay's connection carries RelayUp batches; each item is one node's frame, whole and signed
with that node's key (protocol/relaymessages.py). Every relayed node gets a connection of its own
here (`RelayedConnection`) over an in-memory stream, read by the same FrameReader as a direct
node's: its frames are decoded with its node key and the server's replay guard, dispatched by
the same routes, its replies held until the journal has what they confirm. What rctld writes
to it (replies, orders) is signed with the node key and leaves in the relay's next RelayDown,
gathered over one pass of the scheduler. A frame the relay altered or made up fails the MAC and
ends that node's relayed session (logged with the relay it came through); a type a node never
sends (an admin's request) is refused before it is read. The relay's own connection ending ends
its nodes' sessions, as their own connections' ends would: no node is marked DOWN for it, its
failure detection still counts only its heartbeats (ctld/nodes/liveness.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs
import trio

from ranch.ctld import logs
from ranch.ctld.rpc.connection import Connection, Links
from ranch.ctld.rpc.reading import FrameReader, Steps
from ranch.protocol import messages as m
from ranch.protocol.relaymessages import NODE_UPWARD, frame_type, node_key_of_digest


class InnerStream:
    """A relayed node's side of its relay's connection, as a stream for its FrameReader: bytes
    fed from RelayUp items, bytes written go to the relay's next RelayDown."""

    __slots__ = ("_buf", "_closed", "_wake", "node", "outlet")

    def __init__(self, node: str, outlet: Outlet) -> None:
        self.node = node
        self.outlet = outlet
        self._buf = bytearray()
        self._closed = False
        self._wake: trio.Event | None = None

    def feed(self, data: bytes) -> None:
        if not self._closed:
            self._buf += data
            self._poke()

    def close(self) -> None:
        self._closed = True
        self._poke()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()
            self._wake = None

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while not self._buf:
            if self._closed:
                return b""
            self._wake = trio.Event()
            await self._wake.wait()
        n = len(self._buf) if max_bytes is None else max_bytes
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._closed:
            raise trio.ClosedResourceError("relayed session closed")
        self.outlet.send(m.RelayItem(self.node, bytes(data)))
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()


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
        items, self.items, self.scheduled = tuple(self.items), [], False
        if items and not self.conn.closing:
            conn = self.conn
            await conn.send(conn.links.encode(m.RelayDown(items), 0, conn.version))


@attrs.define(eq=False)
class Relay:
    """One relay's connection and the sessions of the nodes it carries."""

    name: str
    conn: Connection
    outlet: Outlet
    nodes: dict[str, RelayedConnection] = attrs.Factory(dict)

    def carry(self, session: RelayedConnection) -> None:
        self.nodes[session.proven_name] = session

    def drop(self, session: RelayedConnection) -> bool:
        """Forget `session` (True) unless a newer one of its node replaced it."""
        if self.nodes.get(session.proven_name) is not session:
            return False
        del self.nodes[session.proven_name]
        return True


class RelayedConnection(Connection):
    """A node's session through a relay: proven as `proven_name` by its key alone."""

    __slots__ = ("inner", "proven_name", "relay")

    def __init__(self, stream: InnerStream, peer: str, links: Links, node: str, key: bytes,
                 relay: Relay) -> None:
        super().__init__(stream, peer, links)  # type: ignore[arg-type]  # a stream all the same
        self.inner: InnerStream = stream
        self.key = key  # replies and pushes are signed with the node's key
        self.proven_name = node
        self.relay = relay


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
        self.steps = attrs.evolve(steps, ended=self._ended)
        self.digest = digest
        self.disconnected = disconnected
        self.refused = 0  # inner frames refused before they were read (type, no key)

    def up(self, conn: Connection, msg: m.RelayUp) -> Any:
        """The RelayUp route: each item to its node's session (opened at its first frame)."""
        if conn.who is not None or isinstance(conn, RelayedConnection):
            return m.Error("permission_denied", "only a relay rnoded (the cluster key) relays")
        if self.links.spawn() is None:
            return m.Error("not_supported", "this controller is not serving relays yet")
        relay = self.relays.get(conn)
        if relay is None:
            relay = self.relays[conn] = Relay(msg.relay, conn, Outlet(conn))
            logs.event("relay connected", relay=msg.relay, peer=conn.peer)
        for item in msg.items:
            self._item(relay, item)
        return None

    def _item(self, relay: Relay, item: m.RelayItem) -> None:
        session = relay.nodes.get(item.node)
        if item.gone:
            if session is not None:
                session.inner.close()
            return
        kind = frame_type(item.frame)
        if kind not in NODE_UPWARD:
            self._refuse(relay, item.node, f"a {kind or 'malformed'} frame is not a node's to "
                         "send through a relay")
            if session is not None:
                session.inner.close()
            return
        if session is None or session.closing:
            session = self._open(relay, item.node)
            if session is None:
                return
        session.inner.feed(item.frame)

    def _open(self, relay: Relay, node: str) -> RelayedConnection | None:
        digest = self.digest(node)
        if digest is None:
            self._refuse(relay, node, "no node credential is on file for it (a node registers "
                         "straight to rctld once, to be issued one, before it may be relayed)")
            return None
        key = node_key_of_digest(digest)
        stream = InnerStream(node, relay.outlet)
        session = RelayedConnection(stream, f"{relay.conn.peer} (relay {relay.name})",
                                    self.links, node, key, relay)
        steps = attrs.evolve(self.steps, decoding=attrs.evolve(self.steps.decoding, key=key))
        spawn = self.links.spawn()
        assert spawn is not None  # checked by `up`
        relay.carry(session)
        self.open.add(session)
        spawn(FrameReader(steps, session).run)
        return session

    def _refuse(self, relay: Relay, node: str, why: str) -> None:
        self.refused += 1
        logs.event("relayed frame refused", logging.WARNING, relay=relay.name,
                   peer=relay.conn.peer, node=node, why=why)
        relay.outlet.send(m.RelayItem(node, gone=True))

    def _ended(self, conn: Connection) -> bool:
        """A relayed session's reader ended (the node left the relay, a refused frame, the
        relay gone): the node side is told as for a direct connection's end."""
        assert isinstance(conn, RelayedConnection)
        self.open.discard(conn)
        relay = conn.relay
        if relay.drop(conn):
            if not relay.conn.closing and self.relays.get(relay.conn) is relay:
                relay.outlet.send(m.RelayItem(conn.proven_name, gone=True))
        if conn.node is not None:
            self.disconnected(conn)
            logs.event("node disconnected", node=conn.node, peer=conn.peer)
        return True

    def relay_ended(self, conn: Connection) -> None:
        """The relay's own connection ended: every session under it ends (each node comes back
        through another relay or straight, within seconds; none is DOWN for it)."""
        relay = self.relays.pop(conn, None)
        if relay is None:
            return
        logs.event("relay disconnected", logging.WARNING, relay=relay.name, peer=conn.peer,
                   nodes=len(relay.nodes))
        for session in list(relay.nodes.values()):
            session.inner.close()

    def counts(self) -> dict[str, int]:
        return {"relays": len(self.relays), "relayed": len(self.open), "refused": self.refused}
