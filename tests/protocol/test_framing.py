"""Frames: round trip and each refusal (bad MAC, stale, replay, too large, type, version)."""

from __future__ import annotations

import hmac
import os
import struct
from hashlib import sha256

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.framing import FrameDecoder, ReplayGuard, encode_frame
from ranch.protocol.rawframe import pack_frame
from ranch.protocol.versions import CURRENT

KEY = b"k" * 32
NOW = 1_700_000_000.0


def decoder(**kw: object) -> FrameDecoder:
    return FrameDecoder(KEY, clock=lambda: NOW, **kw)  # type: ignore[arg-type]


def frame(msg: object = None, **kw: object) -> bytes:
    kw.setdefault("request_id", 42)
    kw.setdefault("now", NOW)
    return encode_frame(msg if msg is not None else m.Ping(), KEY, **kw)  # type: ignore[arg-type]


def refusal(data: bytes, dec: FrameDecoder | None = None) -> ProtocolError:
    dec = dec or decoder()
    dec.feed(data)
    with pytest.raises(ProtocolError) as info:
        list(dec)
    return info.value


def test_round_trip_byte_by_byte() -> None:
    msg = m.UpdateNodes("gpu[01-02]", "DRAIN", "fan")
    data = frame(msg, request_id=7) + frame(m.Ping(), request_id=8)
    dec = decoder()
    frames = []
    for i in range(len(data)):
        dec.feed(data[i : i + 1])
        frames.extend(dec)
    assert [(f.request_id, f.msg, f.version, f.type) for f in frames] == [
        (7, msg, CURRENT, "UpdateNodes"),
        (8, m.Ping(), CURRENT, "Ping"),
    ]
    assert dec.buffered == 0


def test_bad_mac_and_stream_stays_usable() -> None:
    dec = decoder()
    wrong = encode_frame(m.Ping(), b"x" * 32, request_id=1, now=NOW)
    assert refusal(wrong, dec).code == "bad_mac"
    tampered = bytearray(frame())
    tampered[12] ^= 1
    assert refusal(bytes(tampered), dec).code == "bad_mac"
    dec.feed(frame(request_id=5))
    assert [f.request_id for f in dec] == [5]


@pytest.mark.parametrize(("offset", "word"), [(-42.5, "behind"), (30.0, "ahead of")])
def test_stale_names_the_skew(offset: float, word: str) -> None:
    err = refusal(frame(now=NOW + offset, request_id=9), decoder(message_timeout=10))
    assert err.code == "stale"
    assert f"{abs(offset):.1f} s {word}" in err.message
    assert err.request_id == 9  # the reply can still be matched to the request


def test_within_timeout_accepted() -> None:
    dec = decoder(message_timeout=10)
    dec.feed(frame(now=NOW - 9.5))
    assert len(list(dec)) == 1


def test_replay_refused_even_on_another_connection() -> None:
    guard = ReplayGuard(window=10)
    data = frame()
    first = decoder(replay_guard=guard)
    first.feed(data)
    assert len(list(first)) == 1
    assert refusal(data, first).code == "replay"
    assert refusal(data, decoder(replay_guard=guard)).code == "replay"


def test_replay_guard_expires_and_stays_bounded() -> None:
    guard = ReplayGuard(window=10, max_entries=100)
    assert guard.check_and_add(b"a" * 16, NOW, NOW)
    assert not guard.check_and_add(b"a" * 16, NOW, NOW + 5)
    for i in range(1000):
        guard.check_and_add(i.to_bytes(16, "big"), NOW + 20, NOW + 20)
    assert len(guard) == 100  # old nonce expired, flood capped


def test_too_large_refused_after_four_bytes() -> None:
    dec = decoder()
    dec.feed(struct.pack(">I", 2 << 30))  # claims 2 GiB; nothing else sent
    with pytest.raises(ProtocolError) as info:
        dec.next_frame()
    assert info.value.code == "too_large" and info.value.fatal
    dec.feed(b"\0" * 1000)  # the body is never buffered
    assert dec.buffered == 0
    with pytest.raises(ProtocolError):
        dec.next_frame()


def test_too_short_length_is_fatal() -> None:
    err = refusal(struct.pack(">I", 3) + b"abc")
    assert err.code == "bad_request" and err.fatal


def raw_frame(type_name: str = "Ping", version: int = CURRENT, body: bytes = b"{}") -> bytes:
    """A correctly signed frame with any header values and body."""
    return pack_frame(type_name, body, KEY, request_id=77, version=version, now=NOW)


def test_unknown_type() -> None:
    err = refusal(raw_frame("LaunchMissiles"))
    assert err.code == "unknown_type" and "LaunchMissiles" in err.message


def test_message_newer_than_version() -> None:
    with pytest.raises(ValueError, match="JobStarted"):
        frame(m.JobStarted(1, 0, 1.0), version=4)
    err = refusal(raw_frame("JobStarted", version=4,
                            body=b'{"job_id":1,"restarts":0,"started_at":1.0}'))
    assert err.code == "unknown_type"


def test_removed_set_allocation_is_refused_and_the_stream_goes_on() -> None:
    # Versions 3 to 5 had SetAllocation; only jobs allocate now. An old peer's frame is an
    # unknown type, refused with its request id, and the next frame on the stream decodes.
    dec = decoder()
    for version in (3, 4, CURRENT):
        err = refusal(raw_frame("SetAllocation", version=version,
                                body=b'{"node_names":"n1","cpus_alloc":4,"user":"root"}'), dec)
        assert (err.code, err.request_id, err.fatal) == ("unknown_type", 77, False)
        assert "SetAllocation" in err.message
    dec.feed(frame())
    assert [f.msg for f in dec] == [m.Ping()]


def test_version_outside_supported() -> None:
    err = refusal(raw_frame(version=9))
    assert err.code == "version" and "version 9" in err.message and "2, 3, 4, 5" in err.message


def test_bad_body_keeps_request_id_and_stream() -> None:
    dec = decoder()
    err = refusal(raw_frame("Heartbeat", body=b'{"name": "n", "seq": "x"}'), dec)
    assert (err.code, err.field, err.request_id, err.fatal) == ("bad_request", "seq", 77, False)
    dec.feed(frame())
    assert len(list(dec)) == 1


def test_version_2_register_frame_decodes() -> None:
    hw = m.Hardware(4, 1, 1, 4, 1, 8000, 1000, numa_nodes=2, os="Linux", hostname="old")
    reg = m.Register("old01", hw, 1.6e9, "0.0.9", config_hash="abc")
    dec = decoder()
    dec.feed(frame(reg, version=2, request_id=3))
    (got,) = list(dec)
    assert got.version == 2 and got.request_id == 3
    assert got.msg == m.Register("old01", hw, 1.6e9, "0.0.9")  # config_hash came in 3


def test_replay_guard_keeps_nonce_through_window_edge() -> None:
    # Accepted while |now - ts| <= timeout: the nonce must still be known at exactly ts + timeout.
    guard = ReplayGuard(window=10)
    ts = NOW - 10.0  # the oldest timestamp the stale check accepts
    assert guard.check_and_add(b"e" * 16, ts, NOW)
    assert not guard.check_and_add(b"e" * 16, ts, NOW + 10.0)
    ahead = NOW + 10.0  # a frame from a clock 10 s ahead, replayed just before it goes stale
    assert guard.check_and_add(b"f" * 16, ahead, NOW)
    assert not guard.check_and_add(b"f" * 16, ahead, ahead + 10.0)


def test_shared_guard_covers_a_longer_message_timeout() -> None:
    # rctld makes one guard at start; a reconfigure may raise MessageTimeout afterwards.
    guard = ReplayGuard(window=10)
    data = frame(now=NOW - 25.0)
    dec = FrameDecoder(KEY, clock=lambda: NOW, message_timeout=30.0, replay_guard=guard)
    dec.feed(data)
    assert len(list(dec)) == 1
    later = FrameDecoder(KEY, clock=lambda: NOW + 4.0, message_timeout=30.0, replay_guard=guard)
    assert refusal(data, later).code == "replay"


def test_replay_guard_bounded_under_re_adds() -> None:
    guard = ReplayGuard(window=10, max_entries=10)
    for round_ in range(50):
        for i in range(20):
            guard.check_and_add(i.to_bytes(16, "big"), NOW + round_, NOW + round_)
    assert len(guard) <= 10 and len(guard._expiry) <= 10 + 20


def _signed(payload: bytes) -> bytes:
    mac = hmac.new(KEY, payload, sha256).digest()
    return struct.pack(">I", len(payload) + len(mac)) + payload + mac


@settings(max_examples=200, deadline=None)
@given(
    version=st.integers(0, 0xFFFF),
    name=st.binary(max_size=40) | st.sampled_from([n.encode() for n in m.MESSAGE_TYPES]),
    name_len_delta=st.integers(-3, 3),
    request_id=st.integers(0, 2**64 - 1),
    timestamp=st.floats(allow_nan=True, allow_infinity=True) | st.just(NOW),
    body=st.binary(max_size=200) | st.sampled_from([b"{}", b'{"a": [1, {"b": null}]}', b"[]"]),
)
def test_signed_garbage_only_ever_raises_protocol_error(
    version: int, name: bytes, name_len_delta: int, request_id: int, timestamp: float, body: bytes
) -> None:
    # A peer holding the key can still send anything: every flaw must be a ProtocolError.
    name_len = max(0, min(255, len(name) + name_len_delta))
    payload = (
        struct.pack(">HB", version, name_len) + name
        + struct.pack(">Qd16s", request_id, timestamp, os.urandom(16)) + body
    )
    dec = decoder()
    dec.feed(_signed(payload))
    try:
        list(dec)
    except ProtocolError:
        pass


def test_truncated_mac_is_refused_not_crashed() -> None:
    data = frame(m.UpdateNodes("n[1-100]", "DRAIN", "x" * 100))
    short = struct.pack(">I", len(data) - 4 - 20) + data[4:-20]
    assert refusal(short).code == "bad_mac"
