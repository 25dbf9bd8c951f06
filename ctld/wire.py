"""Frames around an already-encoded body, so a cached Snapshot is not re-serialised per request.

The layout is protocol/framing.py's (u32 length | u16 version | u8 name length | name | u64
request id | f64 timestamp | 16-byte nonce | body | 32-byte HMAC-SHA256); tests/ctld/test_wire.py
proves protocol.framing.FrameDecoder reads these frames, so a layout change cannot go unnoticed.
"""

from __future__ import annotations

import hmac
import secrets
import struct
import time
from hashlib import sha256

import attrs

from protocol.framing import NONCE_SIZE

_PREFIX = struct.Struct(">I")
_HEAD = struct.Struct(">HB")
_TAIL = struct.Struct(f">Qd{NONCE_SIZE}s")


@attrs.frozen
class Prebuilt:
    """A reply whose body bytes were encoded once and cached (valid in every protocol version
    the controller serves: the message's fields did not change between them)."""

    type_name: str
    body: bytes


def encode_body_frame(
    type_name: str, body: bytes, key: bytes, *, request_id: int, version: int
) -> bytes:
    name = type_name.encode("ascii")
    head = _HEAD.pack(version, len(name)) + name + _TAIL.pack(
        request_id, time.time(), secrets.token_bytes(NONCE_SIZE)
    )
    mac = hmac.new(key, head, sha256)
    mac.update(body)
    digest = mac.digest()
    return b"".join((_PREFIX.pack(len(head) + len(body) + len(digest)), head, body, digest))
