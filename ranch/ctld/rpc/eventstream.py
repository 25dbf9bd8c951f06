"""`rcontrol events`: the event log's backlog in one reply, or (with --follow) a stream of
Events frames on one connection that the client keeps open.

A follower is written from its own connection's task: the core only appends to its bounded
queue (ctld/nodes/eventlog.py), so a client that reads slowly, or not at all, delays nothing else.
"""

from __future__ import annotations

import contextlib
import socket
from typing import TYPE_CHECKING, Any

import trio

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.protocol import messages as m

SEND_BUFFER = 32 << 10  # bytes; the kernel doubles it
MAX_FOLLOWERS = 32  # each holds a connection, a task and up to FOLLOW_QUEUE events
# A follower whose client has not taken a frame for this long is ended (its queue has long been
# full and dropping): it holds a connection for nothing.
STALL_LIMIT = 300.0

if TYPE_CHECKING:
    from ranch.ctld.rpc.rpcports import Peer, Rpc, Services


def _nodes(msg: m.GetEvents) -> list[str] | None:
    """The node names asked for (a bad expression raises ValueError)."""
    expr = msg.nodes.strip()
    if not expr or expr.upper() == "ALL":
        return None
    return hostlist.expand(expr)


def backlog(cluster: Services, msg: m.GetEvents) -> Any:
    try:
        nodes = _nodes(msg)
    except ValueError as exc:
        return m.Error("bad_request", f"bad hostlist {msg.nodes!r}: {exc}", field="nodes")
    return m.Events(events=tuple(cluster.eventlog.query(msg.since, nodes, msg.limit)))


async def follow(server: Rpc, conn: Peer, msg: m.GetEvents, request_id: int,
                 version: int) -> None:
    from ranch.ctld.rpc.permissions import gate

    _, refused, _ = gate(server, conn, msg)  # PrivateData=nodes|events (ctld/rpc/permissions.py)
    if refused is not None:
        await conn.reply(refused, request_id, version)
        return
    log = server.cluster.eventlog
    try:
        nodes = _nodes(msg)
    except ValueError as exc:
        err = m.Error("bad_request", f"bad hostlist {msg.nodes!r}: {exc}", field="nodes")
        await conn.reply(err, request_id, version)
        return
    if len(log.followers) >= MAX_FOLLOWERS:
        busy = m.Error("busy", f"{MAX_FOLLOWERS} event followers are connected already; "
                       "try again later")
        await conn.reply(busy, request_id, version)
        logs.event("event follower refused: too many", peer=conn.peer)
        return
    sock = getattr(conn.stream, "socket", None)
    if sock is not None:  # what the kernel holds for a slow follower is bounded too
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    # Subscribe and read the backlog with no await between: nothing falls in the gap.
    follower = log.subscribe(nodes)
    first = m.Events(events=tuple(log.query(msg.since, nodes, msg.limit)))
    logs.event("event follower connected", peer=conn.peer)
    why = "gone"
    try:
        frame = server.encode(first, request_id, version, conn.key)
        while True:
            # A follower that reads slowly only holds up this task (its queue is bounded and
            # what it misses is counted); one that takes nothing for STALL_LIMIT is ended.
            with trio.move_on_after(STALL_LIMIT) as sending:
                await conn.stream.send_all(frame)
            if sending.cancelled_caught:  # a half-sent frame: the connection is closed after
                why = f"not reading for {STALL_LIMIT:g} s: ended"
                break
            batch, missed = await follower.next_batch()  # a quiet log may wait any time
            frame = server.encode(m.Events(events=tuple(batch), missed=missed), request_id,
                                  version, conn.key)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        log.unsubscribe(follower)
        logs.event(f"event follower {why}", peer=conn.peer)
