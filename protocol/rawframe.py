"""Frame primitives without attrs or the codec: sign a body into a frame, check and split one.

Layout (big-endian): u32 length of the rest | u16 version | u8 type-name length | type name
(ASCII) | u64 request id | f64 timestamp (wall clock) | 16-byte nonce | body | 32-byte MAC.
The MAC (HMAC-SHA256) covers everything after the length prefix. protocol.framing builds its
typed frames on these; the CLI's one-shot path uses them alone, so that it starts fast.
"""

from __future__ import annotations

import hmac
import os
import struct
import time
from hashlib import sha256

MAC_SIZE = 32
NONCE_SIZE = 16
PREFIX = struct.Struct(">I")
HEAD = struct.Struct(">HB")  # version, type-name length
TAIL = struct.Struct(f">Qd{NONCE_SIZE}s")  # request id, timestamp, nonce
MIN_FRAME = HEAD.size + 1 + TAIL.size + MAC_SIZE  # shortest part after the length prefix


class FrameError(Exception):
    """A refused frame: `code` is one of messages.Error's stable words. protocol.framing turns
    it into a ProtocolError; this class stays free of the message classes."""

    def __init__(
        self, code: str, message: str, *, request_id: int = 0, version: int | None = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id
        self.version = version


class RawFrame:
    """A frame whose MAC checked out and whose header parsed; the body is still bytes."""

    __slots__ = ("body", "nonce", "request_id", "timestamp", "type", "version")

    def __init__(
        self,
        version: int,
        type_name: str,
        request_id: int,
        timestamp: float,
        nonce: bytes,
        body: bytes | memoryview,
    ) -> None:
        self.version = version
        self.type = type_name
        self.request_id = request_id
        self.timestamp = timestamp
        self.nonce = nonce
        self.body = body


def pack_frame(
    type_name: str,
    body: bytes,
    key: bytes,
    *,
    request_id: int,
    version: int,
    now: float | None = None,
) -> bytes:
    """One signed frame around already-encoded `body` bytes (length prefix included)."""
    name = type_name.encode("ascii")
    head = (
        HEAD.pack(version, len(name))
        + name
        + TAIL.pack(request_id, time.time() if now is None else now, os.urandom(NONCE_SIZE))
    )
    mac = hmac.new(key, head, sha256)
    mac.update(body)
    return b"".join((PREFIX.pack(len(head) + len(body) + MAC_SIZE), head, body, mac.digest()))


def check_length(length: int, max_size: int) -> None:
    """Refuse a length prefix that cannot start a frame we accept (both are fatal: the stream
    cannot be resynchronised)."""
    if length > max_size:
        raise FrameError("too_large", f"frame of {length} bytes exceeds the limit of {max_size}")
    if length < MIN_FRAME:
        raise FrameError("bad_request", f"frame of {length} bytes is shorter than any valid frame")


def open_frame(raw: bytes | bytearray | memoryview, key: bytes) -> RawFrame:
    """Check the MAC of `raw` (a frame without its length prefix) and split its header.

    Version, freshness, replay and type checks are the caller's: they depend on its policy."""
    view = memoryview(raw)
    signed, mac = view[:-MAC_SIZE], view[-MAC_SIZE:]
    if not hmac.compare_digest(hmac.digest(key, signed, "sha256"), mac):
        raise FrameError("bad_mac", "frame signature does not match the cluster key")
    version, name_len = HEAD.unpack_from(signed)
    tail_at = HEAD.size + name_len
    if tail_at + TAIL.size > len(signed):
        raise FrameError("bad_request", "frame header is truncated", version=version)
    name = bytes(signed[HEAD.size : tail_at])
    try:
        type_name = name.decode("ascii")
    except UnicodeDecodeError:
        type_name = repr(name)
    request_id, timestamp, nonce = TAIL.unpack_from(signed, tail_at)
    return RawFrame(version, type_name, request_id, timestamp, nonce, signed[tail_at + TAIL.size :])
