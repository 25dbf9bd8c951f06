"""ranch.protocol.mac's HMAC-SHA256 is the standard one, over the built-in hash and over
OpenSSL's."""

from __future__ import annotations

import hmac
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ranch.protocol import mac

REPO = __file__.rsplit("/tests/", 1)[0]


@given(key=st.binary(min_size=0, max_size=200), parts=st.lists(st.binary(max_size=300),
                                                                min_size=1, max_size=4))
def test_builtin_hash_gives_the_standard_hmac(key: bytes, parts: list[bytes]) -> None:
    want = hmac.digest(key, b"".join(parts), "sha256")
    saved = mac._openssl
    mac._openssl = None
    try:
        assert mac.digest(key, *parts) == want
        assert mac.digest(key, *map(memoryview, parts)) == want
    finally:
        mac._openssl = saved


@given(key=st.binary(min_size=0, max_size=200), parts=st.lists(st.binary(max_size=300),
                                                                min_size=1, max_size=4))
def test_each_keys_pads_kept_give_the_standard_hmac(key: bytes, parts: list[bytes]) -> None:
    """The pads' states are kept per key and hash: the second MAC under a key (OpenSSL's, then
    the built-in's, then OpenSSL's again) is the standard one too, and a bytearray key is
    the same key."""
    want = hmac.digest(key, b"".join(parts), "sha256")
    mac.use_openssl()
    saved = mac._openssl
    try:
        for hash_ in (saved, saved, None, None, saved):
            mac._openssl = hash_
            assert mac.digest(key, *parts) == want
            assert mac.digest(bytearray(key), *map(bytearray, parts)) == want
    finally:
        mac._openssl = saved


def test_keys_kept_stay_bounded() -> None:
    """Users' session keys come and go: the pads kept never pass _PADS_KEPT keys."""
    for i in range(mac._PADS_KEPT * 3):
        key = i.to_bytes(4, "big") * 8
        assert mac.digest(key, b"m") == hmac.digest(key, b"m", "sha256")
        assert len(mac._pads) <= mac._PADS_KEPT


def test_openssl_gives_the_same_and_large_messages_load_it() -> None:
    key, data = b"k" * 32, bytes(range(256)) * 4096  # 1 MiB: above OPENSSL_FROM
    code = f"""
import sys
sys.path.insert(0, {REPO!r})
from ranch.protocol import mac
small = mac.digest({key!r}, b"abc")
assert "_hashlib" not in sys.modules, "a small message loaded OpenSSL"
big = mac.digest({key!r}, bytes(range(256)) * 4096)
assert mac._openssl is not None
print(small.hex(), big.hex(), mac.digest({key!r}, b"abc").hex())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [hmac.digest(key, b"abc", "sha256").hex(), hmac.digest(key, data, "sha256").hex(),
                   hmac.digest(key, b"abc", "sha256").hex()]


@pytest.mark.parametrize(("a", "b", "same"), [(b"x" * 32, b"x" * 32, True),
                                              (b"x" * 32, b"x" * 31 + b"y", False)])
def test_compare_digest(a: bytes, b: bytes, same: bool) -> None:
    assert mac.compare_digest(a, b) is same


def test_whoever_frames_typed_messages_signs_with_openssl() -> None:
    """The daemons (and rrun) import ranch.protocol.framing: every MAC they make is OpenSSL's."""
    code = f"""
import sys
sys.path.insert(0, {REPO!r})
from ranch.protocol import mac
assert mac._openssl is None
import ranch.protocol.framing
assert mac._openssl is not None
"""
    subprocess.run([sys.executable, "-c", code], check=True)
