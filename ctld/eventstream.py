"""`rcontrol events`: the event log's backlog in one reply, or (with --follow) a stream of
Events frames on one connection that the client keeps open.

A follower is written from its own connection's task: the core only appends to its bounded
queue (ctld/eventlog.py), so a client that reads slowly, or not at all, delays nothing else.
"""

from __future__ import annotations

import contextlib
import socket
from typing import TYPE_CHECKING, Any

import trio

from conf import hostlist
from ctld import logs
from protocol import messages as m

SEND_BUFFER = 32 << 10  # bytes; the kernel doubles it

if TYPE_CHECKING:
    from ctld.cluster import Cluster
    from ctld.server import Connection, Server


def _nodes(msg: m.GetEvents) -> list[str] | None:
    """The node names asked for (a bad expression raises ValueError)."""
    expr = msg.nodes.strip()
    if not expr or expr.upper() == "ALL":
        return None
    return hostlist.expand(expr)


def backlog(cluster: Cluster, msg: m.GetEvents) -> Any:
    try:
        nodes = _nodes(msg)
    except ValueError as exc:
        return m.Error("bad_request", f"bad hostlist {msg.nodes!r}: {exc}", field="nodes")
    return m.Events(events=tuple(cluster.eventlog.query(msg.since, nodes, msg.limit)))


async def follow(server: Server, conn: Connection, msg: m.GetEvents, request_id: int,
                 version: int) -> None:
    log = server.cluster.eventlog
    try:
        nodes = _nodes(msg)
    except ValueError as exc:
        err = m.Error("bad_request", f"bad hostlist {msg.nodes!r}: {exc}", field="nodes")
        await conn.reply(err, request_id, version)
        return
    sock = getattr(conn.stream, "socket", None)
    if sock is not None:  # what the kernel holds for a slow follower is bounded too
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    # Subscribe and read the backlog with no await between: nothing falls in the gap.
    follower = log.subscribe(nodes)
    first = m.Events(events=tuple(log.query(msg.since, nodes, msg.limit)))
    logs.event("event follower connected", peer=conn.peer)
    try:
        await conn.io.send_all(server.encode(first, request_id, version))
        while True:
            batch, missed = await follower.next_batch()
            frame = server.encode(m.Events(events=tuple(batch), missed=missed), request_id,
                                  version)
            # No timeout: a follower that stops reading only holds up this task; its queue
            # is bounded and what it misses is counted.
            await conn.io.send_all(frame)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        log.unsubscribe(follower)
        logs.event("event follower gone", peer=conn.peer)
