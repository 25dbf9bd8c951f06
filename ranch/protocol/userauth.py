"""A command's identity on the wire (AuthType=auth/munge): the Credential frame that opens its
connection, and how both sides find the key that signs the rest.

The client makes a random 32-byte session key, asks the local munged for a credential carrying
it (MUNGE encrypts the payload with the cluster's munge key), and sends a Credential frame signed
with that session key, then its request signed the same way. rctld asks its own munged to decode
the credential: the uid and gid it vouches for are the caller's, and its payload is the key that
checks this frame and signs the replies. Nobody without the munge key learns the session key, and
munged refuses a credential it has seen before (EMUNGE_CRED_REPLAYED), so a captured connection
cannot be replayed. Daemons, and root holding the cluster key, sign with the cluster key as before.

Attrs-free and codec-free, like ranch.protocol.rawframe: the CLI's one-shot path imports it.
"""

from __future__ import annotations

import json
import os

from ranch.protocol.rawframe import (
    HEAD,
    HEAD_MAC_SINCE,
    HEAD_MAC_SIZE,
    MAC_SIZE,
    PREFIX,
    TAIL,
    FrameError,
    pack_frame,
)

SESSION_KEY_BYTES = 32
CREDENTIAL_TYPE = b"Credential"
# Signs rctld's refusal of a credential it could not decode: it then knows no key the client can
# check, so the reply is marked as unverified rather than left unreadable (the client says so).
UNVERIFIED_KEY = b"ranch: refusal of an unreadable credential"


def preamble(socket: str | None, *, request_id: int, version: int,
             use: str = "") -> tuple[bytes, bytes]:
    """(session key, the Credential frame to send before the request). MungeError when munged
    cannot be asked (its message says which socket and why)."""
    from ranch.protocol import munge

    key = os.urandom(SESSION_KEY_BYTES)
    cred = munge.encode(key, socket=socket, use=use)
    body = json.dumps({"cred": cred}, separators=(",", ":")).encode()
    return key, pack_frame("Credential", body, key, request_id=request_id, version=version)


def may_open_with_credential(buf: bytes | bytearray) -> bool:
    """False once `buf` is known to start with a frame other than a Credential frame."""
    name_at = PREFIX.size + HEAD.size
    if len(buf) < name_at:
        return True
    _version, name_len = HEAD.unpack_from(buf, PREFIX.size)
    if name_len != len(CREDENTIAL_TYPE):
        return False
    seen = bytes(buf[name_at:name_at + name_len])
    return CREDENTIAL_TYPE.startswith(seen)


def peek_credential(buf: bytes | bytearray, limit: int) -> str | None:
    """The credential of the Credential frame that starts `buf` (length prefix included), before
    its MAC can be checked; None when `buf` starts with another frame or not yet a whole one.
    FrameError when it is a Credential frame that cannot be one (over `limit` bytes, no cred)."""
    if len(buf) < PREFIX.size + HEAD.size:
        return None
    (length,) = PREFIX.unpack_from(buf)
    version, name_len = HEAD.unpack_from(buf, PREFIX.size)
    name_at = PREFIX.size + HEAD.size
    if name_len != len(CREDENTIAL_TYPE) or len(buf) < name_at + name_len:
        return None
    if bytes(buf[name_at:name_at + name_len]) != CREDENTIAL_TYPE:
        return None
    if length > limit:
        raise FrameError("too_large", f"Credential frame of {length:,} bytes exceeds the limit "
                                      f"of {limit:,}", version=version)
    if len(buf) < PREFIX.size + length:
        return None
    body_at = name_at + name_len + TAIL.size + (HEAD_MAC_SIZE if version >= HEAD_MAC_SINCE else 0)
    end = PREFIX.size + length - MAC_SIZE
    try:
        doc = json.loads(bytes(buf[body_at:end]))
        cred = doc["cred"]
    except (ValueError, KeyError, TypeError):
        raise FrameError("bad_request", "Credential frame carries no credential",
                         version=version) from None
    if not isinstance(cred, str) or not cred:
        raise FrameError("bad_request", "Credential frame's cred must be a MUNGE credential "
                                        "string", version=version)
    return cred
