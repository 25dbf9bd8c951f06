"""Frames around an already-encoded body, so a cached Snapshot is not re-serialised per request.

The frame layout itself lives in protocol/rawframe.py; tests/ctld/test_wire.py proves
ranch.protocol.framing.FrameDecoder reads these frames.
"""

from __future__ import annotations

import attrs

from ranch.protocol.rawframe import pack_frame


@attrs.frozen
class Prebuilt:
    """A reply whose body bytes were encoded once and cached (valid in every protocol version
    the controller serves: the message's fields did not change between them)."""

    type_name: str
    body: bytes


def encode_body_frame(
    type_name: str, body: bytes, key: bytes, *, request_id: int, version: int
) -> bytes:
    return pack_frame(type_name, body, key, request_id=request_id, version=version)
