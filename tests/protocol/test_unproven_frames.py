"""What a server's decoder holds before the peer proves the key, and frames from before a start
(issue 18): bytes in, frames or refusals out."""

from __future__ import annotations

import pytest

from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import FrameDecoder, ReplayGuard, encode_frame
from ranch.protocol.rawframe import HEAD, PREFIX, TAIL, pack_frame

KEY = b"k" * 32
NOW = 1_700_000_000.0
LIMIT = 4096


def server_decoder(**kw: object) -> FrameDecoder:
    return FrameDecoder(KEY, clock=lambda: NOW, unproven_max=LIMIT, **kw)  # type: ignore[arg-type]


def big(version: int = 5, key: bytes = KEY, now: float = NOW) -> bytes:
    msg = m.UpdateNodes("n1", "DRAIN", "r", "u" * 100_000)
    return encode_frame(msg, key, request_id=3, version=version, now=now)


def head_size(type_name: str) -> int:
    return PREFIX.size + HEAD.size + len(type_name) + TAIL.size + 32


def test_an_old_layout_frame_over_the_limit_is_refused_after_six_bytes() -> None:
    dec = server_decoder()
    data = big(version=4)
    dec.feed(data[:5])
    assert dec.next_frame() is None  # the version is not known yet
    dec.feed(data[5:6])
    with pytest.raises(ProtocolError) as info:
        dec.next_frame()
    err = info.value
    assert err.code == "too_large" and err.fatal and err.version == 4
    assert "4,096" in err.message and "not yet proven the cluster key" in err.message
    dec.feed(data[6:])
    assert dec.buffered == 0  # nothing more is held


def test_a_signed_header_lets_a_large_frame_through() -> None:
    dec = server_decoder()
    data = big()
    dec.feed(data[: head_size("UpdateNodes")])
    assert dec.next_frame() is None and dec.proven  # proven by the header alone
    dec.feed(data[head_size("UpdateNodes") :])
    (frame,) = list(dec)
    assert frame.msg.user == "u" * 100_000
    # and every later frame of this peer, of any layout, is read whole
    dec.feed(big(version=4))
    assert len(list(dec)) == 1


def test_a_forged_header_is_refused_before_the_body_is_read() -> None:
    dec = server_decoder()
    data = big(key=b"w" * 32)
    dec.feed(data[: head_size("UpdateNodes")])
    with pytest.raises(ProtocolError) as info:
        dec.next_frame()
    assert info.value.code == "bad_mac" and "header" in info.value.message
    assert not dec.proven and dec.buffered == 0


def test_a_replayed_or_stale_header_does_not_prove_the_key() -> None:
    guard = ReplayGuard()
    first = server_decoder(replay_guard=guard)
    data = big()
    first.feed(data)
    assert len(list(first)) == 1
    again = server_decoder(replay_guard=guard)
    again.feed(data[: head_size("UpdateNodes")])
    with pytest.raises(ProtocolError) as info:
        again.next_frame()
    assert info.value.code == "replay" and not again.proven
    old = server_decoder()
    old.feed(big(now=NOW - 60)[: head_size("UpdateNodes")])
    with pytest.raises(ProtocolError) as info:
        old.next_frame()
    assert info.value.code == "stale" and not old.proven


def test_a_small_frame_proves_the_key_and_lifts_the_limit() -> None:
    dec = server_decoder()
    dec.feed(encode_frame(m.Ping(), KEY, request_id=1, version=4, now=NOW))
    assert not dec.proven
    assert len(list(dec)) == 1 and dec.proven
    dec.feed(big(version=4))
    assert len(list(dec)) == 1


def test_a_client_decoder_has_no_unproven_limit() -> None:
    dec = FrameDecoder(KEY, clock=lambda: NOW)
    dec.feed(big(version=4))
    assert len(list(dec)) == 1


def test_frames_signed_before_the_guard_bound_are_refused() -> None:
    guard = ReplayGuard(not_before=NOW - 1.0)
    dec = server_decoder(replay_guard=guard)
    dec.feed(pack_frame("Ping", b"{}", KEY, request_id=1, version=5, now=NOW - 2.0))
    with pytest.raises(ProtocolError) as info:
        dec.next_frame()
    assert info.value.code == "stale" and "before a restart" in info.value.message
    dec.feed(pack_frame("Ping", b"{}", KEY, request_id=2, version=5, now=NOW - 0.5))
    assert len(list(dec)) == 1


def test_a_refusal_to_an_unknown_version_is_answered_in_one_we_speak() -> None:
    dec = server_decoder()
    dec.feed(b"GET / HTTP/1.1\r\n")
    with pytest.raises(ProtocolError) as info:
        dec.next_frame()
    assert info.value.code == "too_large" and info.value.version is None
