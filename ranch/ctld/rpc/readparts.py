"""What a connection's reader is built with: the server's key, limits and guards, and its parts."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ranch.ctld.nodes.stalls import StallWatch
    from ranch.ctld.rpc.admission import Admission
    from ranch.ctld.rpc.capacity import CapacityRefusals
    from ranch.ctld.rpc.connection import Connection
    from ranch.ctld.rpc.dispatch import Dispatcher
    from ranch.ctld.rpc.idlenodes import IdleNodes
    from ranch.ctld.rpc.replaymark import ReplayMark
    from ranch.protocol import messages as m
    from ranch.protocol.framing import FrameDecoder, ReplayGuard


@attrs.frozen
class Decoding:
    """What each connection's frame decoder is built with: the server's key, limits and guards."""

    key: bytes
    max_size: int
    unproven_max: int
    replay_guard: ReplayGuard
    stalls: StallWatch  # the controller's stalls: a late frame's excuse
    message_timeout: Callable[[], float]  # the config's, in force now
    wall: Callable[[], float] = time.time  # what a frame's timestamp is judged against


@attrs.frozen
class Steps:
    """The server's parts a connection's reader uses (ctld/rpc/server.py builds it once)."""

    decoding: Decoding
    admission: Admission
    idle: IdleNodes  # where a node between frames is parked
    replay_mark: ReplayMark
    capacity: CapacityRefusals
    dispatcher: Dispatcher  # a request's route
    sync: Callable[[], Awaitable[None]] | None  # every confirmed change on disk (None: none)
    ended: Callable[[Connection], bool]  # forget the connection; True: its stream to close
    follow: Callable[[Connection, m.GetEvents, int, int], Awaitable[None]]  # rcontrol events -f
    sign_in: Callable[[Connection, FrameDecoder, str], Awaitable[None]]  # a MUNGE credential
