"""rrun's step frames (cli/step_frames.py) against the typed frames rnoded speaks
(ranch.protocol.framing with ranch.protocol.messages): each side reads what the other writes, and
rrun
refuses what FrameDecoder refuses (forged, stale, replayed, out-of-sync, wrong version)."""

from __future__ import annotations

import time

import pytest

from ranch.cli.step_frames import STEP_VERSION, FrameReader, Nonces, StepFrameError, pack
from ranch.protocol import messages as m
from ranch.protocol.framing import FrameDecoder, encode_frame
from ranch.protocol.rawframe import pack_frame
from ranch.protocol.versions import SUPPORTED

KEY = bytes(range(32))


def read_all(reader: FrameReader, data: bytes) -> list[tuple[str, dict]]:
    reader.feed(data)
    out = []
    while (got := reader.next_frame()) is not None:
        out.append(got)
    return out


def test_what_rnoded_sends_reads_as_its_fields() -> None:
    reader = FrameReader(KEY, Nonces())
    data = b"".join(encode_frame(msg, KEY, request_id=0) for msg in (
        m.StepHello(7, 2, "n1", (0, 1)), m.TaskOutput(1, 2, "caf\xe9\n\x00"), m.TaskExit(0),
        m.TaskExit(1, 0, 9)))
    # fed a byte at a time: frames come whole or not at all
    got = []
    for i in range(len(data)):
        got += read_all(reader, data[i:i + 1])
    assert got == [("StepHello", {"job_id": 7, "step_id": 2, "node": "n1", "tasks": [0, 1]}),
                   ("TaskOutput", {"task": 1, "fd": 2, "data": "caf\xe9\n\x00"}),
                   ("TaskExit", {"task": 0, "exit_code": 0, "signal": 0}),
                   ("TaskExit", {"task": 1, "exit_code": 0, "signal": 9})]


def test_what_rrun_sends_decodes_as_the_messages_rnoded_expects() -> None:
    decoder = FrameDecoder(KEY)
    decoder.feed(pack("StepSignal", {"signal": 2}, KEY)
                 + pack("TaskInput", {"data": "x\xff", "eof": False}, KEY)
                 + pack("TaskInput", {"data": "", "eof": True}, KEY))
    frames = list(decoder)
    assert [f.msg for f in frames] == [m.StepSignal(2), m.TaskInput("x\xff", False),
                                       m.TaskInput("", True)]
    assert {(f.version, f.request_id) for f in frames} == {(STEP_VERSION, 0)}
    assert STEP_VERSION in SUPPORTED  # every rnoded that knows steps reads what rrun writes


def test_a_frame_signed_with_another_key_is_refused_and_the_stream_goes_on() -> None:
    reader = FrameReader(KEY, Nonces())
    reader.feed(encode_frame(m.TaskExit(0), b"other key" * 4, request_id=0))
    with pytest.raises(StepFrameError) as err:
        reader.next_frame()
    assert not err.value.fatal and "signature" in str(err.value)
    assert read_all(reader, encode_frame(m.TaskExit(1), KEY, request_id=0)) == [
        ("TaskExit", {"task": 1, "exit_code": 0, "signal": 0})]


def test_a_replayed_frame_is_refused_on_any_connection_of_the_step() -> None:
    seen = Nonces()
    frame = encode_frame(m.TaskOutput(0, 1, "rm -rf\n"), KEY, request_id=0)
    assert len(read_all(FrameReader(KEY, seen), frame)) == 1
    for reader in (FrameReader(KEY, seen), FrameReader(KEY, seen)):
        reader.feed(frame)
        with pytest.raises(StepFrameError, match="replayed"):
            reader.next_frame()


@pytest.mark.parametrize("skew", [-11.0, 11.0])
def test_a_frame_outside_the_clock_window_is_refused(skew: float) -> None:
    reader = FrameReader(KEY, Nonces())
    reader.feed(encode_frame(m.TaskExit(0), KEY, request_id=0, now=time.time() + skew))
    with pytest.raises(StepFrameError, match="clock"):
        reader.next_frame()


def test_other_versions_types_and_bodies_are_refused() -> None:
    reader = FrameReader(KEY, Nonces())
    bad = [pack_frame("TaskExit", b'{"task":0}', KEY, request_id=0, version=4),
           encode_frame(m.Ping(), KEY, request_id=0),
           pack_frame("TaskExit", b"[1]", KEY, request_id=0, version=STEP_VERSION),
           pack_frame("TaskExit", b"{not json", KEY, request_id=0, version=STEP_VERSION)]
    reader.feed(b"".join(bad))
    words = []
    for _ in bad:
        with pytest.raises(StepFrameError) as err:
            reader.next_frame()
        assert not err.value.fatal
        words.append(str(err.value))
    assert ["version 4" in words[0], "'Ping'" in words[1], "object" in words[2],
            "JSON" in words[3]] == [True] * 4
    assert reader.next_frame() is None


def test_a_length_no_frame_can_have_puts_the_stream_out_of_sync_for_good() -> None:
    reader = FrameReader(KEY, Nonces())
    reader.feed((1 << 30).to_bytes(4, "big") + b"\0" * 16)
    for _ in range(2):
        with pytest.raises(StepFrameError) as err:
            reader.next_frame()
        assert err.value.fatal
    reader.feed(encode_frame(m.TaskExit(0), KEY, request_id=0))
    with pytest.raises(StepFrameError):
        reader.next_frame()


def test_nonces_are_forgotten_once_too_old_to_matter() -> None:
    seen = Nonces()
    assert seen.add(b"a" * 16, keep_until=110.0, now=100.0)
    assert not seen.add(b"a" * 16, keep_until=120.0, now=110.0)  # within its window: a replay
    assert seen.add(b"a" * 16, keep_until=121.0, now=111.0)  # the stale check refuses it now
    for i in range(20000):  # a long step's frames: memory stays bounded by those still fresh
        assert seen.add(i.to_bytes(16, "big"), keep_until=i + 10.0, now=float(i))
        assert len(seen.until) <= 4096
