"""Peers past the cap in all: told in words that rctld is full, and a refused node counted alive.

When every place under the connection cap (ctld/rpc/admission.py) is held by a peer that proved the
key, waiting in the kernel's queue is futile: a place frees only when a node leaves. Such a
newcomer is accepted and its first frame awaited (at most FIRST_FRAME_WAIT, WAITING peers at a
time, out of the descriptor reserve). Nodes take at most the cap less COMMAND_ROOM places: a
command gets one of the rest while one is free, so rinfo answers while every node's place is
taken; a Register past that, or anything once every place is taken, is read, answered with
Error "busy" naming the limit, and closed. A Register that passed its MAC and the replay guard
marks its node heard: the controller's own limit is not the node's silence (ctld/nodes/liveness.py).
rnoded tries again within BUSY_RETRY (jittered; protocol/errors.py), so it is admitted soon
after a place frees. Each refusal is a few syscalls and one frame's decoding; none waits on
the event loop.
"""

from __future__ import annotations

import _socket
import logging
import socket
from collections.abc import Callable

import trio

from ranch.ctld.rpc.admission import Admission
from ranch.protocol import messages as m
from ranch.protocol.errors import BUSY, ProtocolError
from ranch.protocol.framing import FrameDecoder, ReplayGuard
from ranch.protocol.rawframe import HEAD, PREFIX

FIRST_FRAME_WAIT = 1.0  # seconds a refused peer has to send its request, so it reads why
WAITING = 16  # peers waiting for their first frame at once, at least (a quarter of the reserve)
READ = 16 << 10  # a Register with its hardware fits; more is not read from a refused peer
_REGISTER = b"Register"
_NAME_AT = PREFIX.size + HEAD.size  # where a frame's type name starts (protocol/rawframe.py)


def is_register(raw: _socket.socket) -> bool:
    """Whether the frame waiting first on `raw` says it is a Register (its header peeked at,
    nothing read; not yet authenticated: a Register is refused, and authenticated then)."""
    try:
        head = raw.recv(_NAME_AT + len(_REGISTER), socket.MSG_PEEK)
    except OSError:
        return False
    return head[_NAME_AT - 1:] == bytes([len(_REGISTER)]) + _REGISTER


class CapacityRefusals:
    """Answers and closes the connections the accept loop takes while rctld is full."""

    def __init__(self, admission: Admission, key: bytes, replay_guard: ReplayGuard, *,
                 message_timeout: Callable[[], float], late_allowance: Callable[[], float],
                 heard: Callable[[str], bool], encode: Callable[..., bytes],
                 admit: Callable[[_socket.socket, str, trio.Nursery], None],
                 unproven_max: int) -> None:
        """`heard(name)`: the node asked to register (False: not a configured node);
        `encode(msg, request_id, version)`: a reply frame signed with the cluster key;
        `admit(raw, peer, nursery)`: serve the connection as any other."""
        self.admission = admission
        self.key = key
        self.replay_guard = replay_guard
        self.message_timeout = message_timeout
        self.late_allowance = late_allowance
        self.heard = heard
        self.encode = encode
        self.admit = admit
        self.unproven_max = unproven_max
        self.waiting = 0
        self.refused = 0
        self.nodes_heard = 0

    def take(self, raw: _socket.socket, peer: str, ready: bool, nursery: trio.Nursery) -> None:
        """Settle `raw` (accepted, non-blocking) at once when its request is waiting, else
        once it comes (or close it after FIRST_FRAME_WAIT, or at once when WAITING already
        wait): a command is admitted to the places kept for commands while one is free; a
        Register, or anything once those are full too, is refused."""
        if ready:
            self._settle(raw, peer, nursery)
        elif self.waiting < self._waiting_cap():
            self.waiting += 1
            nursery.start_soon(self._settle_when_ready, raw, peer, nursery)
        else:
            self._count(peer, "")
            raw.close()

    def _waiting_cap(self) -> int:
        """A quarter of the descriptors kept in reserve, at least WAITING: at 19,900 nodes under
        a limit of 20,000, 16 left most refused nodes closed before they had spoken, and so
        neither told why nor counted heard."""
        c = self.admission.caps
        return max(WAITING, (c.fd_limit - c.connections) // 4)

    async def _settle_when_ready(self, raw: _socket.socket, peer: str,
                                 nursery: trio.Nursery) -> None:
        try:
            with trio.move_on_after(FIRST_FRAME_WAIT):
                await trio.lowlevel.wait_readable(raw)
        except BaseException:
            raw.close()
            raise
        finally:
            self.waiting -= 1
        self._settle(raw, peer, nursery)

    def _settle(self, raw: _socket.socket, peer: str, nursery: trio.Nursery) -> None:
        if not is_register(raw) and self.admission.open < self.admission.caps.connections:
            self.admit(raw, peer, nursery)  # a command: the last COMMAND_ROOM places are its
        else:
            self._refuse(raw, peer)

    def registering(self, name: str, peer: str) -> m.Error | None:
        """The answer to a Register on a connection let in before it was known to be a node's
        (a storm), when nodes now hold more than their places: Error busy, its node counted
        heard, and the connection is to close; None when there is room."""
        if not self.admission.nodes_over():
            return None
        self.heard(name)
        self._count(peer, name)
        return m.Error(BUSY, self._why())

    def _why(self) -> str:
        c = self.admission.caps
        return (f"rctld is at its connection limit: {self.admission.open} connections open, "
                f"{c.nodes_allowed()} of the cap of {c.connections} for nodes (descriptor "
                f"limit {c.fd_limit}); register again later")

    def _refuse(self, raw: _socket.socket, peer: str) -> None:
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
            try:
                raw.send(self.encode(m.Error(BUSY, self._why()), request_id, version))
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
