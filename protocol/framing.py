"""Frames, sans-IO: length prefix, header, body, HMAC-SHA256; FrameDecoder turns bytes into Frames.

Layout (big-endian): u32 length of the rest | u16 version | u8 type-name length | type name
(ASCII) | u64 request id | f64 timestamp (wall clock) | 16-byte nonce | body | 32-byte MAC.
The MAC covers everything after the length prefix.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from protocol import codec
from protocol.errors import ProtocolError
from protocol.rawframe import (
    HEAD,
    MAC_SIZE,
    MIN_FRAME,
    NONCE_SIZE,
    PREFIX,
    TAIL,
    FrameError,
    check_length,
    open_frame,
    pack_frame,
)
from protocol.versions import CURRENT, SUPPORTED, message_known

MAX_SIZE = 1 << 20  # default limit for the part after the length prefix
# The layout's pieces live in protocol.rawframe (attrs-free, shared with the CLI's fast path);
# the old private names stay for code that packed headers itself.
_PREFIX, _HEAD, _TAIL, _MIN_FRAME = PREFIX, HEAD, TAIL, MIN_FRAME
__all__ = ["MAC_SIZE", "MAX_SIZE", "NONCE_SIZE", "Frame", "FrameDecoder", "ReplayGuard",
           "encode_frame"]


@attrs.frozen
class Frame:
    version: int
    type: str
    request_id: int
    msg: Any
    timestamp: float
    nonce: bytes


def encode_frame(
    msg: Any,
    key: bytes,
    *,
    request_id: int,
    version: int = CURRENT,
    now: float | None = None,
) -> bytes:
    """One signed frame carrying `msg`, written for a peer speaking `version`."""
    type_name = type(msg).__name__
    if not message_known(type_name, version):
        raise ValueError(f"{type_name} cannot be sent in protocol version {version}")
    body = codec.encode(msg, version=version)
    return pack_frame(type_name, body, key, request_id=request_id, version=version, now=now)


class ReplayGuard:
    """Nonces seen within the acceptance window, with bounded memory.

    A nonce is remembered until its frame's timestamp leaves the window (after which the stale
    check refuses the frame anyway). Share one guard across all connections of a server, so a
    frame captured on one connection cannot be replayed on another. Each decoder passes its own
    MessageTimeout, so a guard made before a reconfigure that raised it still covers the window."""

    def __init__(self, window: float = 10.0, max_entries: int = 200_000) -> None:
        self.window = window
        self.max_entries = max_entries
        self._seen: dict[bytes, float] = {}  # nonce -> when it may be forgotten
        self._expiry: list[tuple[float, bytes]] = []

    def __len__(self) -> int:
        return len(self._seen)

    def check_and_add(
        self, nonce: bytes, timestamp: float, now: float, window: float | None = None
    ) -> bool:
        """True if the nonce is fresh (and remember it); False if it was seen before.

        The stale check accepts a frame while |now - timestamp| <= window, so the nonce is kept
        until max(timestamp, now) + window, inclusive."""
        while self._expiry and self._expiry[0][0] < now:
            self._forget_first()
        if nonce in self._seen:
            return False
        while len(self._seen) >= self.max_entries and self._expiry:
            # Over the bound only under a flood; forgetting the soonest-to-expire nonce is the
            # smallest hole we can open.
            self._forget_first()
        keep_until = max(timestamp, now) + max(self.window, window or 0.0)
        self._seen[nonce] = keep_until
        heapq.heappush(self._expiry, (keep_until, nonce))
        return True

    def _forget_first(self) -> None:
        until, nonce = heapq.heappop(self._expiry)
        if self._seen.get(nonce) == until:  # not re-added since with a later expiry
            del self._seen[nonce]


class FrameDecoder:
    """Feed bytes in, take Frames out. Raises ProtocolError for each refused frame; after a
    fatal one (too_large, a length too short to be a frame) the stream is out of sync and every
    later call raises it again."""

    __slots__ = ("_broken", "_buf", "clock", "key", "late_allowance", "max_size",
                 "message_timeout", "replay_guard")

    def __init__(
        self,
        key: bytes,
        *,
        max_size: int = MAX_SIZE,
        message_timeout: float = 10.0,
        replay_guard: ReplayGuard | None = None,
        clock: Callable[[], float] = time.time,
        late_allowance: Callable[[], float] | None = None,
    ) -> None:
        """`late_allowance`: seconds a frame may be older than MessageTimeout right now (rctld:
        the length of a stall of its own that just ended, ctld/stalls.py)."""
        self.key = key
        self.max_size = max_size
        self.message_timeout = message_timeout
        self.replay_guard = (
            replay_guard if replay_guard is not None else ReplayGuard(window=message_timeout)
        )
        self.clock = clock
        self.late_allowance = late_allowance
        self._buf = bytearray()
        self._broken: ProtocolError | None = None

    def feed(self, data: bytes) -> None:
        if self._broken is None:
            self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def __iter__(self) -> Iterator[Frame]:
        while (frame := self.next_frame()) is not None:
            yield frame

    def next_frame(self) -> Frame | None:
        """The next complete frame, or None if more bytes are needed."""
        if self._broken is not None:
            raise self._broken
        if len(self._buf) < _PREFIX.size:
            return None
        (length,) = _PREFIX.unpack_from(self._buf)
        try:
            check_length(length, self.max_size)
        except FrameError as exc:
            self._fail(exc.code, exc.message)
        if len(self._buf) < _PREFIX.size + length:
            return None
        raw = bytes(self._buf[_PREFIX.size : _PREFIX.size + length])
        del self._buf[: _PREFIX.size + length]
        return self._parse(raw)

    def _fail(self, code: str, message: str) -> None:
        self._broken = ProtocolError(code, message, fatal=True)
        self._buf.clear()
        raise self._broken

    def _parse(self, raw: bytes) -> Frame:
        try:
            raw_frame = open_frame(raw, self.key)
        except FrameError as exc:
            raise ProtocolError(exc.code, exc.message, version=exc.version) from None
        version, type_name = raw_frame.version, raw_frame.type
        request_id, timestamp, nonce = raw_frame.request_id, raw_frame.timestamp, raw_frame.nonce
        body = raw_frame.body
        ids = {"request_id": request_id, "version": version}
        if version not in SUPPORTED:
            raise ProtocolError(
                "version",
                f"protocol version {version} is not supported (this side speaks "
                f"{', '.join(map(str, SUPPORTED))})",
                request_id=request_id,
                version=max(SUPPORTED),
            )
        now = self.clock()
        # Frames that waited in the socket while the receiver itself stalled are late through
        # no fault of the sender. Replays stay refused: the guard's clock runs `late` behind
        # too, so it forgets a nonce only once its frame is too old even with the allowance.
        late = self.late_allowance() if self.late_allowance is not None else 0.0
        skew = now - timestamp
        if not -self.message_timeout <= skew <= self.message_timeout + late:  # NaN refused
            direction = "behind" if skew > 0 else "ahead of"
            raise ProtocolError(
                "stale",
                f"frame timestamp is {abs(skew):.1f} s {direction} this host's clock "
                f"(MessageTimeout is {self.message_timeout:g} s; check clock sync)",
                **ids,
            )
        if not self.replay_guard.check_and_add(nonce, timestamp, now - late,
                                               self.message_timeout):
            raise ProtocolError("replay", "frame nonce was already seen (replayed frame)", **ids)
        if not message_known(type_name, version):
            raise ProtocolError(
                "unknown_type",
                f"unknown message type {type_name!r} in protocol version {version}",
                **ids,
            )
        try:
            msg = codec.decode(type_name, body)
        except ProtocolError as exc:
            exc.request_id, exc.version = request_id, version
            raise
        return Frame(version, type_name, request_id, msg, timestamp, nonce)
