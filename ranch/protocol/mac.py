"""HMAC-SHA256 of frames, without loading OpenSSL in a command that signs one small request.

`import hmac` loads OpenSSL's libcrypto (_hashlib): about 2.5 ms of a command's start, a sixth of
Python's own, to sign a few hundred bytes. The HMAC (RFC 2104) is computed here, from each key's
pads hashed once, over the interpreter's built-in SHA-256 (7x slower per byte than OpenSSL's but
nothing to load) until `use_openssl()` is called (the daemons call it through
ranch.protocol.framing) or a message is large, then over OpenSSL's. tests/protocol/test_mac.py
checks both against hmac.digest.
"""

from __future__ import annotations

try:
    from _sha256 import sha256 as _builtin  # type: ignore[import-not-found]  # CPython 3.11
except ImportError:  # pragma: no cover - 3.12 renamed it; other interpreters may lack both
    try:
        from _sha2 import sha256 as _builtin  # type: ignore[import-not-found]
    except ImportError:
        _builtin = None
try:
    from _operator import _compare_digest as compare_digest  # what hmac.compare_digest is
except ImportError:  # pragma: no cover
    from hmac import compare_digest  # type: ignore[no-redef]

TYPE_CHECKING = False  # typing stays off a command's start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Hash = Callable[[bytes], Any]  # a SHA-256 constructor

__all__ = ["compare_digest", "digest", "use_openssl"]

# Above this many bytes OpenSSL's speed repays its loading (the built-in hash takes ~3.7 ms per
# MiB against ~0.55 ms): a reply of thousands of jobs or nodes is worth it.
OPENSSL_FROM = 512 << 10
_BLOCK = 64  # SHA-256's block size
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))
_openssl: Hash | None = None  # OpenSSL's SHA-256 constructor once loaded
# Per key, the hash states after its inner and outer pads (what hmac.HMAC computes first), so a
# MAC is two copies and the message's own hashing: ~1.1 us for a small frame against 5-7 us for
# hmac.digest, which sets up OpenSSL's HMAC (and looks the digest up by name) on every call;
# rctld makes three per request. Keys: the cluster key, the nodes' own, users' session keys.
_pads: dict[bytes, tuple[Hash, Any, Any]] = {}  # key -> (constructor, inner, outer)
_PADS_KEPT = 256


def use_openssl() -> None:
    """Compute every later MAC with OpenSSL (faster per message: for long-running processes)."""
    global _openssl
    if _openssl is None:
        try:
            from _hashlib import openssl_sha256  # what hashlib.sha256 is
        except ImportError:  # pragma: no cover - an interpreter without OpenSSL
            from hashlib import sha256 as openssl_sha256

        _openssl = openssl_sha256


def _keyed(key: bytes, hash_: Hash) -> tuple[Hash, Any, Any]:
    """The pads' states of `key` under `hash_` (RFC 2104), kept for the next MAC."""
    padded = hash_(key).digest() if len(key) > _BLOCK else key
    padded = padded.ljust(_BLOCK, b"\0")
    pads = (hash_, hash_(padded.translate(_IPAD)), hash_(padded.translate(_OPAD)))
    if type(key) is bytes:
        if len(_pads) >= _PADS_KEPT:  # keys come and go with users' sessions: stay bounded
            _pads.clear()
        _pads[key] = pads
    return pads


def digest(key: bytes, *parts: bytes | bytearray | memoryview) -> bytes:
    """HMAC-SHA256 of the concatenated `parts` under `key`."""
    hash_ = _openssl
    if hash_ is None:
        if _builtin is None or sum(map(len, parts)) > OPENSSL_FROM:
            use_openssl()
        hash_ = _openssl or _builtin
    pads = _pads.get(key) if type(key) is bytes else None
    if pads is None or pads[0] is not hash_:
        pads = _keyed(bytes(key), hash_)
    inner = pads[1].copy()
    for part in parts:
        inner.update(part)
    outer = pads[2].copy()
    outer.update(inner.digest())
    return outer.digest()
