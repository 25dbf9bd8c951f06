"""HMAC-SHA256 of frames, without loading OpenSSL in a command that signs one small request.

`import hmac` loads OpenSSL's libcrypto (_hashlib): about 2.5 ms of a command's start, a sixth of
Python's own, to sign a few hundred bytes. Until `use_openssl()` is called (the daemons call it
through protocol.framing) or a message is large, the HMAC (RFC 2104) is computed here over the
interpreter's built-in SHA-256, which is 7x slower per byte than OpenSSL's but costs nothing to
load. tests/protocol/test_mac.py checks both against hmac.digest.
"""

from __future__ import annotations

try:
    from _sha256 import sha256 as _builtin  # CPython 3.11
except ImportError:  # pragma: no cover - 3.12 renamed it; other interpreters may lack both
    try:
        from _sha2 import sha256 as _builtin
    except ImportError:
        _builtin = None
try:
    from _operator import _compare_digest as compare_digest  # what hmac.compare_digest is
except ImportError:  # pragma: no cover
    from hmac import compare_digest

__all__ = ["compare_digest", "digest", "use_openssl"]

# Above this many bytes OpenSSL's speed repays its loading (the built-in hash takes ~3.7 ms per
# MiB against ~0.55 ms): a reply of thousands of jobs or nodes is worth it.
OPENSSL_FROM = 512 << 10
_BLOCK = 64  # SHA-256's block size
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))
_openssl = None  # hmac.new once loaded


def use_openssl() -> None:
    """Compute every later MAC with OpenSSL (faster per message: for long-running processes)."""
    global _openssl
    if _openssl is None:
        from hmac import new

        _openssl = new


def digest(key: bytes, *parts: bytes | bytearray | memoryview) -> bytes:
    """HMAC-SHA256 of the concatenated `parts` under `key`."""
    if _openssl is None and (_builtin is None or sum(map(len, parts)) > OPENSSL_FROM):
        use_openssl()
    if _openssl is not None:
        mac = _openssl(key, parts[0], "sha256")
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
