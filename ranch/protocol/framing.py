"""Frames, sans-IO: length prefix, header, body, HMAC-SHA256; FrameDecoder turns bytes into Frames.

Layout (big-endian): u32 length of the rest | u16 version | u8 type-name length | type name
(ASCII) | u64 request id | f64 timestamp (wall clock) | 16-byte nonce | [32-byte header MAC,
from version 5] | body | 32-byte MAC. The MAC covers everything after the length prefix.

What a decoder holds before the key is proven (docs/limits.md): a server gives its decoders
`unproven_max`, and until a frame from the peer has passed every check, a frame longer than that
is read only as far as its header, whose MAC (version 5 on) is checked first; an older frame
that long is refused after its first six bytes. A frame is refused when it was signed before
the ReplayGuard's `not_before` (the controller's start), so a frame captured before a restart
cannot be replayed after it.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import attrs

from ranch.protocol import codec
from ranch.protocol.errors import ProtocolError
from ranch.protocol.limits import MAX_FRAME_BYTES
from ranch.protocol.mac import use_openssl
from ranch.protocol.rawframe import (
    HEAD,
    HEAD_MAC_SINCE,
    MAC_SIZE,
    MIN_FRAME,
    NONCE_SIZE,
    PREFIX,
    TAIL,
    FrameError,
    check_length,
    frame_version,
    open_frame,
    open_head,
    pack_frame,
)
from ranch.protocol.versions import CURRENT, SUPPORTED, message_known

# Whoever frames typed messages (the daemons, rrun) lives long enough for OpenSSL's faster HMAC
# to repay its loading; only the one-shot commands sign with the built-in hash.
use_openssl()

# Default limit for the part after the length prefix (protocol/limits.py says why).
MAX_SIZE = MAX_FRAME_BYTES
# The largest frame read whole from a peer that has not yet proven the key (server side): a
# node's Register from an older rnoded (about 2 KiB) fits; a version-5 frame of any size is let
# through once its header MAC checks out. It bounds what each unproven connection can make
# rctld hold.
UNPROVEN_MAX = 16 << 10
# The layout's pieces live in protocol.rawframe (attrs-free, shared with the CLI's fast path);
# the old private names stay for code that packed headers itself.
_PREFIX, _HEAD, _TAIL, _MIN_FRAME = PREFIX, HEAD, TAIL, MIN_FRAME
__all__ = ["MAC_SIZE", "MAX_SIZE", "NONCE_SIZE", "UNPROVEN_MAX", "Frame", "FrameDecoder",
           "ReplayGuard", "encode_frame"]


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
    MessageTimeout, so a guard made before a reconfigure that raised it still covers the window.

    The nonces live in memory only, so a guard made after a restart does not know them: its
    `not_before` (wall clock; 0 = no bound) refuses every frame signed before it, and a
    controller sets it to its start (ctld/rpc/server.py)."""

    def __init__(
        self, window: float = 10.0, max_entries: int = 200_000, not_before: float = 0.0
    ) -> None:
        self.window = window
        self.max_entries = max_entries
        self.not_before = not_before
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

    def seen(self, nonce: bytes) -> bool:
        """Whether `nonce` is remembered (without adding it)."""
        return nonce in self._seen

    def _forget_first(self) -> None:
        until, nonce = heapq.heappop(self._expiry)
        if self._seen.get(nonce) == until:  # not re-added since with a later expiry
            del self._seen[nonce]


class FrameDecoder:
    """Feed bytes in, take Frames out. Raises ProtocolError for each refused frame; after a
    fatal one (too_large, a length too short to be a frame, a forged header) the stream is out
    of sync and every later call raises it again.

    With `unproven_max` set (a server's decoder), a frame longer than that is only read whole
    once the peer has proven the key: `proven` turns true when a frame passed every check, or
    when the header MAC of a version-5 frame did."""

    __slots__ = ("_broken", "_buf", "_read_at", "clock", "key", "late_allowance", "max_size",
                 "message_timeout", "proven", "queued", "replay_guard", "unproven_max")

    def __init__(
        self,
        key: bytes,
        *,
        max_size: int = MAX_SIZE,
        message_timeout: float = 10.0,
        replay_guard: ReplayGuard | None = None,
        clock: Callable[[], float] = time.time,
        late_allowance: Callable[[], float] | None = None,
        unproven_max: int | None = None,
        queued: Callable[[], float] | None = None,
    ) -> None:
        """`late_allowance`: seconds a frame may be older than MessageTimeout right now (rctld:
        the length of a stall of its own that just ended, ctld/nodes/stalls.py). `queued`: asked
        only for a frame about to be refused as too old, the allowance once the time its bytes
        waited unread on this side is counted (rctld: a registration storm's backlog, which
        is the receiver's delay, not the sender's; ctld/rpc/reading.py)."""
        self.key = key
        self.max_size = max_size
        self.message_timeout = message_timeout
        self.replay_guard = (
            replay_guard if replay_guard is not None else ReplayGuard(window=message_timeout)
        )
        self.clock = clock
        self.late_allowance = late_allowance
        self.queued = queued
        self.unproven_max = unproven_max
        self.proven = unproven_max is None
        self._buf = bytearray()
        self._broken: ProtocolError | None = None
        # `clock` when the last bytes were fed: every frame they complete is judged as of then
        self._read_at: float | None = None

    def feed(self, data: bytes | bytearray) -> None:
        """Bytes as they were read. A frame's age is judged as of this call, not when it is
        taken: a frame that then waits behind the ones before it (their handling, a busy
        receiver) waited on this side, not the sender's."""
        if self._broken is None:
            self._buf += data
            self._read_at = self.clock()

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def pending(self) -> bytearray:
        """The bytes not yet taken as frames (for a peek at the next frame's header; the
        caller must not change them)."""
        return self._buf

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
            self._fail(exc.code, exc.message, version=frame_version(self._buf))
        if not self.proven and length > self.unproven_max and not self._prove_by_head(length):
            return None
        if len(self._buf) < _PREFIX.size + length:
            return None
        raw = bytes(self._buf[_PREFIX.size : _PREFIX.size + length])
        del self._buf[: _PREFIX.size + length]
        frame = self._parse(raw)
        self.proven = True
        return frame

    def _prove_by_head(self, length: int) -> bool:
        """A frame too long to read from a peer not yet proven: True once its header MAC
        checked out (the peer holds the key), False while more header bytes are needed; a
        fatal ProtocolError when it cannot be proven."""
        version = frame_version(self._buf)
        if version is None:
            return False
        if version < HEAD_MAC_SINCE:
            self._fail(
                "too_large",
                f"frame of {length:,} bytes exceeds the limit of {self.unproven_max:,} for a "
                f"peer that has not yet proven the cluster key (protocol version {version} "
                f"frames carry no header MAC; version {HEAD_MAC_SINCE} and later may be up to "
                f"{self.max_size:,} bytes)",
                version=version,
            )
        try:
            head = open_head(self._buf, self.key)
        except FrameError as exc:
            self._fail(exc.code, exc.message, version=version)
        if head is None:
            return False
        try:
            self._check_fresh(head.version, head.request_id, head.timestamp, head.nonce,
                              remember=False)
        except ProtocolError as exc:
            self._fail(exc.code, exc.message, version=exc.version,
                       request_id=exc.request_id)
        self.proven = True
        return True

    def _fail(self, code: str, message: str, *, version: int | None = None,
              request_id: int = 0) -> NoReturn:
        """A fatal refusal; `version` (the reply's) only when it is one we speak."""
        self._broken = ProtocolError(code, message, fatal=True, request_id=request_id,
                                     version=version if version in SUPPORTED else None)
        self._buf.clear()
        raise self._broken

    def _check_fresh(
        self, version: int, request_id: int, timestamp: float, nonce: bytes, *, remember: bool
    ) -> None:
        """Version, clock window, the guard's start bound and the nonce (added when
        `remember`): ProtocolError for the first that fails."""
        ids: dict[str, Any] = {"request_id": request_id, "version": version}
        if version not in SUPPORTED:
            raise ProtocolError(
                "version",
                f"protocol version {version} is not supported (this side speaks "
                f"{', '.join(map(str, SUPPORTED))})",
                request_id=request_id,
                version=max(SUPPORTED),
            )
        now, late = self._check_age(timestamp, ids)
        guard = self.replay_guard
        if timestamp < guard.not_before:
            raise ProtocolError(
                "stale",
                f"frame was signed {guard.not_before - timestamp:.1f} s before the earliest "
                "time this controller accepts (its start, or later when a peer's clock ran "
                "ahead before it restarted); a frame from before a restart is never accepted "
                "(replayed, or held up in the network): send it again",
                **ids,
            )
        if remember:
            fresh = guard.check_and_add(nonce, timestamp, now - late, self.message_timeout)
        else:
            fresh = not guard.seen(nonce)
        if not fresh:
            raise ProtocolError("replay", "frame nonce was already seen (replayed frame)", **ids)

    def _check_age(self, timestamp: float, ids: dict[str, Any]) -> tuple[float, float]:
        """(the time the frame is judged at, its allowance beyond MessageTimeout), or the
        "stale" ProtocolError of a frame too old or too far ahead."""
        # As of when its bytes were read (feed), so the time it then waited in our own queue is
        # not counted (a fresh frame behind a slow one is not stale), but no more of it than the
        # guard keeps nonces past the window (rctld's backlog cover; none for a plain guard),
        # so that a replay that waited here is still found.
        now = read_at = self.clock()
        cover = max(0.0, self.replay_guard.window - self.message_timeout)
        if self._read_at is not None and self._read_at < now:
            read_at = self._read_at
            now = max(read_at, now - cover)
        # Frames that waited in the socket while the receiver itself stalled are late through
        # no fault of the sender. Replays stay refused: the guard's clock runs `late` behind
        # too, so it forgets a nonce only once its frame is too old even with the allowance.
        late = self.late_allowance() if self.late_allowance is not None else 0.0
        skew = now - timestamp
        if skew > self.message_timeout + late and self.queued is not None:
            late = self.queued()
        if not -self.message_timeout <= skew <= self.message_timeout + late:  # NaN refused
            if skew > 0 and read_at - timestamp <= self.message_timeout + late:
                # fresh when it was read: our own queue made it old, not the sender's clock
                raise ProtocolError(
                    "stale",
                    f"frame waited {self.clock() - read_at:.1f} s in this host's own queue "
                    f"after it was read, more than the {cover:g} s a frame may wait there "
                    "(the receiver was busy): send it again",
                    **ids,
                )
            direction = "behind" if skew > 0 else "ahead of"
            raise ProtocolError(
                "stale",
                f"frame timestamp is {abs(skew):.1f} s {direction} this host's clock "
                f"(MessageTimeout is {self.message_timeout:g} s; check clock sync)",
                **ids,
            )
        return now, late

    def _parse(self, raw: bytes) -> Frame:
        try:
            raw_frame = open_frame(raw, self.key)
        except FrameError as exc:
            raise ProtocolError(exc.code, exc.message, version=exc.version) from None
        version, type_name = raw_frame.version, raw_frame.type
        request_id, timestamp, nonce = raw_frame.request_id, raw_frame.timestamp, raw_frame.nonce
        body = raw_frame.body
        self._check_fresh(version, request_id, timestamp, nonce, remember=True)
        ids: dict[str, Any] = {"request_id": request_id, "version": version}
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
