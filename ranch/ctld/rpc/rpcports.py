"""What the rpc layer's steps and routes reach of the server and of one connection, as protocols.

The routes (ctld/rpc/routes.py), the frame reader (ctld/rpc/reading.py), permissions, user and node
identity and the event stream are parts the server (ctld/rpc/server.py) is built from; they name
these interfaces, never the server's classes, so the server imports them without a cycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # none of these imports the rpc layer
    import trio

    from ranch.ctld.nodes.cluster import Cluster
    from ranch.ctld.rpc.admission import Admission
    from ranch.ctld.rpc.capacity import CapacityRefusals
    from ranch.ctld.rpc.fastio import StreamIO
    from ranch.ctld.rpc.idlenodes import IdleNodes
    from ranch.ctld.rpc.nodecredentials import NodeCredentials
    from ranch.ctld.rpc.replaymark import ReplayMark
    from ranch.protocol import messages as m
    from ranch.protocol.framing import ReplayGuard


class Peer(Protocol):
    """One connection (ctld/rpc/server.py Connection): a node's session or a command's."""

    stream: trio.SocketStream
    io: StreamIO
    peer: str
    ready: bool
    version: int
    node: str | None  # the node that registered on it
    who: Any  # the munge-vouched user (ctld/rpc/userauth.py); None: the cluster key's holder
    key: bytes | None  # that user's session key
    scope: trio.CancelScope | None  # its reader's task runs in it (None while parked)
    closing: bool  # close_soon was called

    async def reply(self, msg: Any, request_id: int, version: int) -> bool: ...
    async def send(self, frame: bytes) -> bool: ...
    def close_soon(self) -> None: ...
    def push(self, msg: Any) -> bool: ...
    def registered_as(self, name: str) -> None: ...
    def unread(self) -> int: ...


class Rpc(Protocol):
    """The server (ctld/rpc/server.py Server), as its parts see it."""

    @property
    def cluster(self) -> Cluster: ...
    @property
    def key(self) -> bytes: ...
    @property
    def max_size(self) -> int: ...
    @property
    def unproven_max(self) -> int: ...
    @property
    def message_timeout(self) -> float: ...
    @property
    def admission(self) -> Admission: ...
    @property
    def replay_guard(self) -> ReplayGuard: ...
    @property
    def replay_mark(self) -> ReplayMark: ...
    @property
    def node_credentials(self) -> NodeCredentials: ...
    @property
    def capacity(self) -> CapacityRefusals: ...
    @property
    def sync(self) -> Callable[[], Awaitable[None]] | None: ...
    @property
    def submit(self) -> Callable[[m.SubmitJob], Awaitable[Any]] | None: ...
    @property
    def reconfigure(self) -> Callable[[str], Awaitable[m.ReconfigureResult]]: ...
    @property
    def takeover(self) -> Callable[[str], Any]: ...

    def encode(self, msg: Any, request_id: int, version: int,
               key: bytes | None = None) -> bytes: ...
    async def dispatch(self, conn: Peer, msg: Any) -> tuple[Any, bool]: ...
    def connection_ended(self, conn: Peer) -> bool: ...
    @property
    def idle(self) -> IdleNodes: ...
