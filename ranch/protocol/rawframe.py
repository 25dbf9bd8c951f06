"""Frame primitives without attrs or the codec: sign a body into a frame, check and split one.

Layout (big-endian): u32 length of the rest | u16 version | u8 type-name length | type name
(ASCII) | u64 request id | f64 timestamp (wall clock) | 16-byte nonce | [32-byte header MAC,
from version 5] | body | 32-byte MAC. The MAC (HMAC-SHA256) covers everything after the length
prefix. The header MAC (HMAC-SHA256 of HEAD_LABEL, the length prefix and the header before it)
lets a receiver check that a large frame comes from a key holder before it buffers the body:
until a peer has proven the key, only frames of a few KiB are read (docs/limits.md).
ranch.protocol.framing builds its typed frames on these; the CLI's one-shot path uses them alone, so
that it starts fast.
"""

from __future__ import annotations

import os
import time
from struct import Struct

from ranch.protocol.mac import compare_digest, digest

MAC_SIZE = 32
NONCE_SIZE = 16
PREFIX = Struct(">I")
HEAD = Struct(">HB")  # version, type-name length
_VERSION = Struct(">H")
TAIL = Struct(f">Qd{NONCE_SIZE}s")  # request id, timestamp, nonce
MIN_FRAME = HEAD.size + 1 + TAIL.size + MAC_SIZE  # shortest part after the length prefix
HEAD_MAC_SINCE = 5  # the first protocol version whose frames carry a header MAC
HEAD_MAC_SIZE = 32
HEAD_LABEL = b"ranch frame header\0"  # so a header MAC is never the MAC of anything else
# The most bytes a receiver holds before it can check a header MAC (prefix included).
MAX_HEAD = PREFIX.size + HEAD.size + 255 + TAIL.size + HEAD_MAC_SIZE


class FrameError(Exception):
    """A refused frame: `code` is one of messages.Error's stable words. ranch.protocol.framing turns
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
    """A frame whose MAC checked out and whose header parsed; the body is still bytes (for a
    header checked alone, by `open_head`, the body is empty)."""

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
    if version >= HEAD_MAC_SINCE:
        prefix = PREFIX.pack(len(head) + HEAD_MAC_SIZE + len(body) + MAC_SIZE)
        head += digest(key, HEAD_LABEL, prefix, head)
    else:
        prefix = PREFIX.pack(len(head) + len(body) + MAC_SIZE)
    return b"".join((prefix, head, body, digest(key, head, body)))


def check_length(length: int, max_size: int) -> None:
    """Refuse a length prefix that cannot start a frame we accept (both are fatal: the stream
    cannot be resynchronised)."""
    if length > max_size:
        raise FrameError("too_large", f"frame of {length:,} bytes exceeds the limit of "
                                      f"{max_size:,}")
    if length < MIN_FRAME:
        raise FrameError("bad_request", f"frame of {length} bytes is shorter than any valid frame")


def frame_version(buf: bytes | bytearray | memoryview) -> int | None:
    """The version of the frame that starts `buf` (length prefix included), None until known."""
    if len(buf) < PREFIX.size + _VERSION.size:
        return None
    return _VERSION.unpack_from(buf, PREFIX.size)[0]


def open_head(buf: bytes | bytearray | memoryview, key: bytes) -> RawFrame | None:
    """Check the header MAC of the version-5-or-later frame that starts `buf` (length prefix
    included) before its body is read: its header, or None while the header is incomplete.
    FrameError("bad_mac") when the header was not signed with `key`."""
    if len(buf) < PREFIX.size + HEAD.size:
        return None
    (length,) = PREFIX.unpack_from(buf)
    version, name_len = HEAD.unpack_from(buf, PREFIX.size)
    tail_at = PREFIX.size + HEAD.size + name_len
    mac_at = tail_at + TAIL.size
    if mac_at + HEAD_MAC_SIZE + MAC_SIZE > PREFIX.size + length:
        raise FrameError("bad_request", f"frame of {length} bytes is shorter than its header",
                         version=version)
    if len(buf) < mac_at + HEAD_MAC_SIZE:
        return None
    head = bytes(buf[: mac_at + HEAD_MAC_SIZE])  # a copy of at most MAX_HEAD bytes: no view
    want = digest(key, HEAD_LABEL, head[:mac_at])
    if not compare_digest(want, head[mac_at:]):
        raise FrameError("bad_mac", "frame header signature does not match the cluster key")
    request_id, timestamp, nonce = TAIL.unpack_from(head, tail_at)
    return RawFrame(version, _type_name(head[PREFIX.size + HEAD.size : tail_at]),
                    request_id, timestamp, nonce, b"")


def open_frame(raw: bytes | bytearray | memoryview, key: bytes) -> RawFrame:
    """Check the MAC of `raw` (a frame without its length prefix) and split its header.

    Version, freshness, replay and type checks are the caller's: they depend on its policy."""
    view = memoryview(raw)
    signed, mac = view[:-MAC_SIZE], view[-MAC_SIZE:]
    if not compare_digest(digest(key, signed), mac):
        raise FrameError("bad_mac", "frame signature does not match the cluster key")
    version, name_len = HEAD.unpack_from(signed)
    tail_at = HEAD.size + name_len
    body_at = tail_at + TAIL.size + (HEAD_MAC_SIZE if version >= HEAD_MAC_SINCE else 0)
    if body_at > len(signed):
        raise FrameError("bad_request", "frame header is truncated", version=version)
    type_name = _type_name(bytes(signed[HEAD.size : tail_at]))
    request_id, timestamp, nonce = TAIL.unpack_from(signed, tail_at)
    return RawFrame(version, type_name, request_id, timestamp, nonce, signed[body_at:])


def _type_name(name: bytes) -> str:
    try:
        return name.decode("ascii")
    except UnicodeDecodeError:
        return repr(name)
