"""A frame that waited unread in rctld's own socket (a restart storm's backlog) is judged on the
sender's delay only: the kernel's record of when its bytes came (TCP_INFO) is credited
(allowance.backlog_allowance, as every FrameReader asks it), and a replay of it is still
refused."""

from __future__ import annotations

import socket
import time

import pytest
import trio

from ranch.ctld.deadlines import Deadlines
from ranch.ctld.nodes.stalls import StallWatch, backlog_cover
from ranch.ctld.rpc.allowance import backlog_allowance
from ranch.ctld.rpc.fastio import StreamIO
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import FrameDecoder, ReplayGuard, encode_frame

KEY = b"k" * 32
MT = 1.0


@pytest.fixture
def pair():
    """A real loopback TCP connection: (the sender's socket, the receiver's StreamIO)."""
    srv = socket.create_server(("127.0.0.1", 0))
    cli = socket.create_connection(srv.getsockname())
    raw, _ = srv.accept()
    srv.close()
    io = StreamIO(trio.SocketStream(trio.socket.from_stdlib_socket(raw)))
    yield cli, io
    cli.close()
    raw.close()


class Receiver:
    """rctld's side: one stall watch and one replay guard for every connection."""

    def __init__(self) -> None:
        self.watch = StallWatch(Deadlines(), clock=time.monotonic, on_stall=lambda s, c: None,
                                check_clocks=False)
        self.watch.configure(1.0, MT)
        self.guard = ReplayGuard(window=MT + backlog_cover(MT))

    def decode(self, io: StreamIO, data: bytes) -> list:
        cover = self.guard.window - MT
        dec = FrameDecoder(KEY, message_timeout=MT, replay_guard=self.guard,
                           late_allowance=self.watch.late_allowance,
                           queued=lambda: backlog_allowance(self.watch, io, cover))
        dec.feed(data)
        return [f.msg for f in dec]


def _read(io: StreamIO) -> bytes:
    data = io.read_now(1 << 16)
    assert data, "nothing arrived"
    return data


def test_a_frame_that_waited_in_our_socket_past_message_timeout_is_accepted_once(pair) -> None:
    cli, io = pair
    sent = encode_frame(m.Ping(), KEY, request_id=1)  # signed now
    cli.sendall(sent)
    time.sleep(MT + 0.6)  # unread in our kernel, past MessageTimeout
    assert io.waited() >= MT + 0.5
    data = _read(io)
    # without the kernel's word, the frame is stale: what dropped thousands of registrations
    plain = FrameDecoder(KEY, message_timeout=MT, replay_guard=ReplayGuard(window=MT))
    plain.feed(data)
    with pytest.raises(ProtocolError, match="stale"):
        list(plain)
    r = Receiver()
    assert r.decode(io, data) == [m.Ping()]
    # the same bytes again, fresh in the socket: a replay, refused
    cli.sendall(sent)
    with pytest.raises(ProtocolError) as exc:
        r.decode(io, _read(io))
    assert exc.value.code == "replay"


def test_a_frame_old_when_it_arrived_is_still_stale(pair) -> None:
    cli, io = pair
    r = Receiver()
    # signed MessageTimeout + 1 s ago and sent now: its age is the sender's, not our backlog's
    cli.sendall(encode_frame(m.Ping(), KEY, request_id=1, now=time.time() - MT - 1.0))
    time.sleep(0.05)
    with pytest.raises(ProtocolError, match="stale"):
        r.decode(io, _read(io))
    assert r.watch.late_allowance() < 0.5
