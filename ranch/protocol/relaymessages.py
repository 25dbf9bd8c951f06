"""Relays (issue 47): the messages between a relay rnoded and rctld, and the rules both ends share.

A relayed node speaks to rctld through a relay rnoded. It joins the relay with `RelayJoin` (signed
with the cluster key), then signs every frame of its session with its own node key (the SHA-256
of the node credential rctld issued it, which rctld keeps in node_credentials.json): the relay
cannot read that key, so it forwards the node's frames unchanged, many to a `RelayUp`, and rctld
checks each inner frame as if it had come direct. rctld's replies and orders to the node are
signed with the same node key and fanned out in `RelayDown`; the node checks them. A relay can
drop or delay a frame, never forge or alter one (a changed byte fails the MAC, a replay the
nonce guard, which rctld shares between direct and relayed frames).
"""

from __future__ import annotations

import hashlib
import zlib

import attrs

from ranch.protocol.rawframe import HEAD, MIN_FRAME, PREFIX

RELAY_PORT = 6818  # where a relay listens when its NodeName line sets no Port (SlurmdPort's)
# The node messages a relay may carry upward: a node's session, nothing of an admin's.
NODE_UPWARD = frozenset({"Register", "Heartbeat", "ShutdownNotice", "JobStarted", "Ack",
                         "Error", "StepEnd"})


@attrs.frozen
class RelayJoin:
    """Node -> relay, the first frame of a relayed session (cluster key): which node this is.
    The relay answers Ack when its own link to rctld is up, else an Error (try the next)."""

    node: str


@attrs.frozen
class RelayItem:
    """One node's frame, whole and unchanged (`frame`: the bytes from its length prefix on);
    `gone`: the node's connection to the relay ended (upward) or is to end (downward)."""

    node: str
    frame: bytes = b""
    gone: bool = False


@attrs.frozen
class RelayUp:
    """Relay -> rctld: the frames its nodes sent since the last batch (empty: a keep-alive)."""

    relay: str
    items: tuple[RelayItem, ...] = ()
    # the relay's wall clock as it sent the batch: the time since is rctld's backlog or the
    # network's, which the node's frames are not held to (as a direct frame's wait in rctld's
    # socket is not: ctld/rpc/reading.py); the time before, at the node or the relay, is theirs
    sent: float = 0.0


@attrs.frozen
class RelayDown:
    """rctld -> relay: replies and orders for the relay's nodes, each signed with its node key."""

    items: tuple[RelayItem, ...] = ()


RELAY_MESSAGES: tuple[type, ...] = (RelayJoin, RelayUp, RelayDown)


def node_key(credential: str) -> bytes:
    """The key a relayed node signs its frames with: the SHA-256 of its credential, which is
    what rctld keeps of it (ctld/rpc/nodecredentials.py), so neither end stores anything new."""
    return hashlib.sha256(credential.encode("utf-8", "replace")).digest()


def node_key_of_digest(hexdigest: str) -> bytes:
    """rctld's side of `node_key`, from the digest it keeps."""
    return bytes.fromhex(hexdigest)


def relay_entry(name: str, host: str, port: int) -> str:
    """How a relay is named in NodeSettings.relays: NAME=HOST:PORT."""
    return f"{name}={host}:{port}"


def parse_entry(entry: str) -> tuple[str, str, int]:
    """(name, host, port) of a NodeSettings.relays entry; ValueError when it is not one."""
    name, sep, addr = entry.partition("=")
    host, colon, port = addr.rpartition(":")
    if not sep or not colon or not name or not host or not port.isdigit():
        raise ValueError(f"relay entry {entry!r} is not NAME=HOST:PORT")
    return name, host.strip("[]"), int(port)


def relay_order(node: str, relays: tuple[str, ...]) -> tuple[str, ...]:
    """The relays `node` tries, in order: its own first (a stable hash of its name spreads the
    nodes evenly over the relays, whatever their order in the config), then the others after
    it, each tried before the controllers. A relay itself goes straight to the controllers."""
    names = [parse_entry(e)[0] for e in relays]
    if not relays or node in names:
        return ()
    first = zlib.crc32(node.encode()) % len(relays)
    return relays[first:] + relays[:first]


def frame_type(frame: bytes) -> str | None:
    """The type name a whole frame's header gives (before its MAC is checked: only to refuse
    what a relay may not carry), None when it is no frame."""
    at = PREFIX.size + HEAD.size
    if len(frame) < at:
        return None
    (length,) = PREFIX.unpack_from(frame)
    _version, name_len = HEAD.unpack_from(frame, PREFIX.size)
    if length != len(frame) - PREFIX.size or len(frame) < at + name_len:
        return None
    try:
        return frame[at:at + name_len].decode("ascii")
    except UnicodeDecodeError:
        return None


def split_frames(buf: bytearray, max_size: int) -> list[bytes]:
    """Take every whole frame off the front of `buf` (length prefix included), unchecked: a relay
    forwards them as they are. ValueError for a length over `max_size` (the stream is lost)."""
    out: list[bytes] = []
    while len(buf) >= PREFIX.size:
        (length,) = PREFIX.unpack_from(buf)
        if length > max_size or length < MIN_FRAME:
            raise ValueError(f"frame of {length:,} bytes (limit {max_size:,})")
        end = PREFIX.size + length
        if len(buf) < end:
            break
        out.append(bytes(buf[:end]))
        del buf[:end]
    return out
