"""Frames that waited in the socket while the receiver stalled (FrameDecoder.late_allowance):
accepted up to the stall's length past MessageTimeout, and never twice (issue 18)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import FrameDecoder, ReplayGuard, encode_frame

KEY = b"k" * 32
T0 = 1_700_000_000.0
MT = 3.0


class Receiver:
    """A receiver's wall clock and the allowance a stall watch would give (ctld/nodes/stalls.py):
    a stall of S widens it by S for MessageTimeout after the stall."""

    def __init__(self) -> None:
        self.now = T0
        self.allowance = 0.0
        self.until = -1.0
        self.guard = ReplayGuard(window=MT)

    def late(self) -> float:
        return self.allowance if self.now < self.until else 0.0

    def stall(self, seconds: float) -> None:
        self.now += seconds
        self.allowance = (self.allowance if self.now - seconds < self.until else 0.0) + seconds
        self.until = self.now + MT

    def decoder(self) -> FrameDecoder:
        return FrameDecoder(KEY, message_timeout=MT, replay_guard=self.guard,
                            clock=lambda: self.now, late_allowance=self.late)

    def accepts(self, data: bytes) -> bool:
        dec = self.decoder()
        dec.feed(data)
        try:
            return len(list(dec)) == 1
        except ProtocolError as exc:
            assert exc.code in ("stale", "replay"), exc
            return False


def frame(sent: float, request_id: int = 1) -> bytes:
    return encode_frame(m.Ping(), KEY, request_id=request_id, now=sent)


def test_a_frame_delayed_by_our_stall_is_accepted_once() -> None:
    r = Receiver()
    sent = frame(T0)  # sent just as the receiver stopped
    r.stall(10.0)
    assert r.accepts(sent)
    assert not r.accepts(sent)  # a replay of it, later in the allowance
    r.now += MT - 0.1
    assert not r.accepts(sent)
    r.now += 1.0  # the allowance is over
    assert not r.accepts(sent)


def test_no_stall_no_allowance_and_frames_ahead_get_none() -> None:
    r = Receiver()
    assert not r.accepts(frame(T0 - MT - 1))
    r.stall(10.0)
    assert not r.accepts(frame(r.now + MT + 1))  # ahead of our clock: no stall excuses it
    assert not r.accepts(frame(T0 - MT - 1))  # older than the stall could have delayed it


def test_a_frame_seen_before_the_stall_is_not_accepted_again_after_it() -> None:
    r = Receiver()
    data = frame(T0)
    assert r.accepts(data)
    r.now += 0.5
    r.stall(20.0)  # its nonce would have expired during the stall by wall time
    assert r.accepts(frame(r.now, request_id=2))  # fresh traffic after the stall ...
    assert not r.accepts(data)  # ... does not make the guard forget it


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("wait"), st.floats(0.0, 8.0)),
    st.tuples(st.just("stall"), st.floats(0.5, 30.0)),
    st.tuples(st.just("send"), st.floats(-2.0, 40.0)),  # a frame stamped now - x
    st.tuples(st.just("replay"), st.integers(0, 50)),
), max_size=60))
def test_no_frame_is_ever_accepted_twice(ops: list[tuple[str, float]]) -> None:
    r = Receiver()
    sent: list[bytes] = []
    accepted: dict[bytes, int] = {}
    for op, arg in ops:
        if op == "wait":
            r.now += arg
        elif op == "stall":
            r.stall(arg)
        elif op == "send":
            sent.append(frame(r.now - arg, request_id=len(sent) + 1))
            data = sent[-1]
        else:
            if not sent:
                continue
            data = sent[int(arg) % len(sent)]
        if op in ("send", "replay") and r.accepts(data):
            accepted[data] = accepted.get(data, 0) + 1
    assert all(n == 1 for n in accepted.values())


@pytest.mark.parametrize("late", [0.0, 5.0])
def test_nan_timestamps_stay_refused(late: float) -> None:
    dec = FrameDecoder(KEY, message_timeout=MT, clock=lambda: T0, late_allowance=lambda: late)
    dec.feed(frame(float("nan")))
    with pytest.raises(ProtocolError) as info:
        list(dec)
    assert info.value.code == "stale"
