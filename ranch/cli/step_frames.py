"""The frames of rrun's step I/O connections, without attrs or cattrs: rawframe's signed frames
around JSON bodies in the codec's shape (StepHello, TaskOutput, TaskExit in; StepSignal,
TaskInput out), checked as ranch.protocol.framing's FrameDecoder checks them."""

from __future__ import annotations

import time

from ranch.protocol.cjson import dumps, loads
from ranch.protocol.client import RAW_VERSION
from ranch.protocol.limits import MAX_FRAME_BYTES
from ranch.protocol.mac import use_openssl
from ranch.protocol.rawframe import PREFIX, FrameError, check_length, open_frame, pack_frame

TYPE_CHECKING = False  # typing stays off rrun's start
if TYPE_CHECKING:
    from collections.abc import Callable

# The step messages came with protocol version 5 (protocol/versions.py MESSAGE_SINCE): a frame
# of an older version cannot carry one. rrun writes version 5, which every rnoded since reads, and
# reads up to the newest version this release speaks (RAW_VERSION: newer ones only add fields).
STEP_VERSION = 5
MESSAGE_TIMEOUT = 10.0  # a frame's timestamp within this of our clock (FramedStream's default)
# The built-in SHA-256 (protocol/mac.py) saves OpenSSL's loading on a short step; past this
# much output OpenSSL's faster HMAC repays it.
OPENSSL_AFTER = 1 << 20
INCOMING = frozenset({"StepHello", "TaskOutput", "TaskExit"})
_received = 0  # bytes of frames taken by every reader, for OPENSSL_AFTER


class StepFrameError(Exception):
    """A refused frame; `fatal` when the stream is out of sync and must be closed."""

    def __init__(self, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


def pack(kind: str, body: dict, key: bytes) -> bytes:
    """One frame of rrun's to a node (request id 0, as every frame of a step's I/O)."""
    return pack_frame(kind, dumps(body).encode(), key, request_id=0, version=STEP_VERSION)


class FrameReader:
    """Bytes of one node's connection in, (type name, body dict) out. `seen` is shared by the
    step's connections: a frame replayed on another connection is refused too."""

    __slots__ = ("_broken", "_buf", "clock", "key", "seen")

    def __init__(self, key: bytes, seen: Nonces,
                 clock: Callable[[], float] = time.time) -> None:
        self.key = key
        self.seen = seen
        self.clock = clock
        self._buf = bytearray()
        self._broken = False

    def feed(self, data: bytes) -> None:
        if not self._broken:
            self._buf += data

    def next_frame(self) -> tuple[str, dict] | None:
        """The next complete frame's (type, body), None while more bytes are needed;
        StepFrameError for a refused one."""
        global _received
        if self._broken:
            raise StepFrameError("the stream is out of sync", fatal=True)
        buf = self._buf
        if len(buf) < PREFIX.size:
            return None
        (length,) = PREFIX.unpack_from(buf)
        try:
            check_length(length, MAX_FRAME_BYTES)
        except FrameError as exc:
            self._broken = True
            buf.clear()
            raise StepFrameError(exc.message, fatal=True) from None
        if len(buf) < PREFIX.size + length:
            return None
        raw = bytes(buf[PREFIX.size: PREFIX.size + length])
        del buf[: PREFIX.size + length]
        _received += len(raw)
        if _received > OPENSSL_AFTER:
            use_openssl()
        try:
            frame = open_frame(raw, self.key)
        except FrameError as exc:
            raise StepFrameError(exc.message) from None
        if not STEP_VERSION <= frame.version <= RAW_VERSION:
            raise StepFrameError(f"protocol version {frame.version} is not supported here")
        self._check_fresh(frame.timestamp, frame.nonce)
        if frame.type not in INCOMING:
            raise StepFrameError(f"unexpected message type {frame.type!r}")
        try:
            body = loads(frame.body)
        except ValueError as exc:
            raise StepFrameError(f"{frame.type} body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise StepFrameError(f"{frame.type} body must be an object")
        return frame.type, body

    def _check_fresh(self, timestamp: float, nonce: bytes) -> None:
        now = self.clock()
        skew = now - timestamp
        if not -MESSAGE_TIMEOUT <= skew <= MESSAGE_TIMEOUT:  # NaN refused
            raise StepFrameError(f"frame timestamp is {abs(skew):.1f} s off this host's clock")
        if not self.seen.add(nonce, max(timestamp, now) + MESSAGE_TIMEOUT, now):
            raise StepFrameError("frame nonce was already seen (replayed frame)")


class Nonces:
    """The nonces of the frames taken, each until its frame is too old for the stale check
    (ranch.protocol.framing.ReplayGuard's rule, in a dict swept now and then instead of a heap)."""

    __slots__ = ("_sweep_at", "until")

    def __init__(self) -> None:
        self.until: dict[bytes, float] = {}  # nonce -> when it may be forgotten
        self._sweep_at = 4096

    def add(self, nonce: bytes, keep_until: float, now: float) -> bool:
        """False when `nonce` was seen and not yet forgotten; else remember it."""
        until = self.until
        if until.get(nonce, -1.0) >= now:
            return False
        if len(until) >= self._sweep_at:
            for old in [n for n, t in until.items() if t < now]:
                del until[old]
            self._sweep_at = max(4096, 2 * len(until))  # sweeps stay linear in frames taken
        until[nonce] = keep_until
        return True

