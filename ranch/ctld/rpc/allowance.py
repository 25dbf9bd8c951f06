"""A frame's allowance for the time it waited unread in this controller's own backlog (a
restart storm, a busy loop): that wait is the receiver's, not the sender's, so a frame is not
refused as too old for it (ctld/rpc/reading.py builds each connection's decoder with it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ranch.ctld.nodes.stalls import StallWatch
    from ranch.ctld.rpc.connection import Connection
    from ranch.ctld.rpc.fastio import StreamIO


def backlog_allowance(stalls: StallWatch, io: StreamIO, cover: float) -> float:
    """The frame allowance once a connection's wait in our own backlog is counted: a frame read
    late because rctld was reading thousands of others (a restart storm) is not the sender's
    fault. Asked by the decoder only for a frame about to be refused as old; the wait is the
    kernel's (tcpi_last_data_recv), which no peer can fake, and at most `cover`, what the
    replay guard keeps nonces past the window (ctld/rpc/server.py)."""
    return stalls.queued(min(io.waited(), cover))


def connection_allowance(stalls: StallWatch, conn: Connection, cover: float) -> float:
    """`backlog_allowance` for `conn`. A relay's link (ctld/rpc/relayhub.py) is never quiet
    long enough for the kernel's last-arrival time to show the wait of the batch being read,
    and its batches do wait here while the one before is acted on: its frames get the whole
    cover, which the replay guard still spans."""
    if conn.relaying:
        return stalls.queued(cover)
    return backlog_allowance(stalls, conn.io, cover)
