"""HMAC-SHA256 of frames, without loading OpenSSL in a command that signs one small request.

`import hmac` loads OpenSSL's libcrypto (_hashlib): about 2.5 ms of a command's start, a sixth of
Python's own, to sign a few hundred bytes. Until `use_openssl()` is called (the daemons call it
through ranch.protocol.framing) or a message is large, the HMAC (RFC 2104) is computed here over the
interpreter's built-in SHA-256, which is 7x slower per byte than OpenSSL's but costs nothing to
load. tests/protocol/test_mac.py checks both against hmac.digest.
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

__all__ = ["compare_digest", "digest", "use_openssl"]

# Above this many bytes OpenSSL's speed repays its loading (the built-in hash takes ~3.7 ms per
# MiB against ~0.55 ms): a reply of thousands of jobs or nodes is worth it.
OPENSSL_FROM = 512 << 10
_BLOCK = 64  # SHA-256's block size
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))
_openssl = None  # (hmac.digest, hmac.new) once loaded
_JOIN_BELOW = 4096  # parts shorter than this are joined for OpenSSL's one-shot HMAC


def use_openssl() -> None:
    """Compute every later MAC with OpenSSL (faster per message: for long-running processes)."""
    global _openssl
    if _openssl is None:
        from hmac import digest, new

        _openssl = (digest, new)


def digest(key: bytes, *parts: bytes | bytearray | memoryview) -> bytes:
    """HMAC-SHA256 of the concatenated `parts` under `key`."""
    size = sum(map(len, parts)) if len(parts) > 1 else len(parts[0])
    if _openssl is None and (_builtin is None or size > OPENSSL_FROM):
        use_openssl()
    if _openssl is not None:
        one_shot, new = _openssl
        if len(parts) == 1 or size < _JOIN_BELOW:
            return one_shot(key, parts[0] if len(parts) == 1 else b"".join(parts), "sha256")
        mac = new(key, parts[0], "sha256")
        for part in parts[1:]:
            mac.update(part)
        return mac.digest()
    if len(key) > _BLOCK:
        key = _builtin(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    inner = _builtin(key.translate(_IPAD))
    for part in parts:
        inner.update(part)
    return _builtin(key.translate(_OPAD) + inner.digest()).digest()
