"""Peers past the cap in all: told in words that rctld is full, and a refused node counted alive.

When every place under the connection cap (ctld/admission.py) is held by a peer that proved the
key, waiting in the kernel's queue is futile: a place frees only when a node leaves. Such a
newcomer is accepted, its first frame read (waiting at most FIRST_FRAME_WAIT for it, WAITING
peers at a time, out of the descriptor reserve), answered with Error "busy" naming the limit,
and closed. A Register that passed its MAC and the replay guard marks its node heard: the
controller's own limit is not the node's silence (ctld/liveness.py). rnoded tries again within
BUSY_RETRY (jittered; protocol/errors.py), so it is admitted soon after a place frees. Each
refusal is a few syscalls and one frame's decoding; none waits on the event loop.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

import trio

from ranch.ctld.admission import Admission
from ranch.protocol import messages as m
from ranch.protocol.errors import BUSY, ProtocolError
from ranch.protocol.framing import FrameDecoder, ReplayGuard

FIRST_FRAME_WAIT = 1.0  # seconds a refused peer has to send its request, so it reads why
WAITING = 16  # refused peers waiting for their request at once (descriptors of the reserve)
READ = 16 << 10  # a Register with its hardware fits; more is not read from a refused peer


class CapacityRefusals:
    """Answers and closes the connections the accept loop takes while rctld is full."""

    def __init__(self, admission: Admission, key: bytes, replay_guard: ReplayGuard, *,
                 message_timeout: Callable[[], float], late_allowance: Callable[[], float],
                 heard: Callable[[str], bool], encode: Callable[..., bytes],
                 unproven_max: int) -> None:
        """`heard(name)`: the node asked to register (False: not a configured node);
        `encode(msg, request_id, version)`: a reply frame signed with the cluster key."""
        self.admission = admission
        self.key = key
        self.replay_guard = replay_guard
        self.message_timeout = message_timeout
        self.late_allowance = late_allowance
        self.heard = heard
        self.encode = encode
        self.unproven_max = unproven_max
        self.waiting = 0
        self.refused = 0
        self.nodes_heard = 0

    def take(self, raw: socket.socket, peer: str, ready: bool, nursery: trio.Nursery) -> None:
        """Refuse `raw` (accepted, non-blocking): at once when its request is waiting, else
        once it comes (or closed after FIRST_FRAME_WAIT, or at once when WAITING already
        wait)."""
        if ready:
            self._refuse(raw, peer)
        elif self.waiting < WAITING:
            self.waiting += 1
            nursery.start_soon(self._refuse_when_ready, raw, peer)
        else:
            self._count(peer, "")
            raw.close()

    async def _refuse_when_ready(self, raw: socket.socket, peer: str) -> None:
        try:
            with trio.move_on_after(FIRST_FRAME_WAIT):
                await trio.lowlevel.wait_readable(raw)
            self._refuse(raw, peer)
        finally:
            self.waiting -= 1
            raw.close()

    def _refuse(self, raw: socket.socket, peer: str) -> None:
        try:
            data = raw.recv(READ)
        except OSError:
            data = b""
        node = ""
        request_id, version = 0, None
        if data:
            decoder = FrameDecoder(
                self.key, max_size=self.unproven_max, message_timeout=self.message_timeout(),
                replay_guard=self.replay_guard, unproven_max=self.unproven_max,
                late_allowance=self.late_allowance)
            decoder.feed(data)
            try:
                frame = decoder.next_frame()
            except ProtocolError:
                frame = None
            if frame is not None:
                request_id, version = frame.request_id, frame.version
                if type(frame.msg) is m.Register:
                    node = frame.msg.name
                    if self.heard(node):
                        self.nodes_heard += 1
        if version is not None:
            c = self.admission.caps
            why = (f"rctld is at its connection limit: {self.admission.open} connections "
                   f"open, the cap is {c.connections} (descriptor limit {c.fd_limit}); "
                   "register again later")
            try:
                raw.send(self.encode(m.Error(BUSY, why), request_id, version))
            except OSError:
                pass
        self._count(peer, node)
        raw.close()

    def _count(self, peer: str, node: str) -> None:
        self.refused += 1
        adm = self.admission
        adm.log.event("capacity", "connection refused: at the connection limit", logging.ERROR,
                      peer=peer, node=node or "-", open=adm.open, cap=adm.caps.connections,
                      fd_limit=adm.caps.fd_limit, refused=self.refused,
                      hint="raise the descriptor limit (LimitNOFILE=, ulimit -n)")
