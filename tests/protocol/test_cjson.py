"""ranch.protocol.cjson writes and reads what json does (json.dumps, compact separators;
json.loads)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ranch.protocol import cjson

scalars = (st.none() | st.booleans() | st.integers() | st.text()
           | st.floats(allow_nan=False, allow_infinity=True))
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@given(documents)
def test_dumps_is_json_dumps_compact(doc: object) -> None:
    assert cjson.dumps(doc) == json.dumps(doc, separators=(",", ":"))


@given(documents)
def test_loads_reads_what_json_writes(doc: object) -> None:
    for text in (json.dumps(doc), json.dumps(doc, indent=1), f" \n{json.dumps(doc)}\t"):
        assert cjson.loads(text.encode()) == json.loads(text)
        assert cjson.loads(memoryview(text.encode())) == json.loads(text)


def test_surrogates_and_constants_as_json_does() -> None:
    script = b"\xff\xfe".decode("utf-8", "surrogateescape")
    assert cjson.dumps({"script": script}) == json.dumps({"script": script}, separators=(",", ":"))
    got = cjson.loads(b'[NaN, Infinity, -Infinity, 1e400, 12345678901234567890]')
    assert math.isnan(got[0]) and got[1:4] == [math.inf, -math.inf, math.inf]
    assert got[4] == 12345678901234567890


@pytest.mark.parametrize("bad", [b"", b"  ", b"{", b'{"a":1} x', b"[1,]", b"\xff", b"nul"])
def test_malformed_is_a_value_error(bad: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(bad)
    with pytest.raises(ValueError):
        cjson.loads(bad)


def test_unserializable_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        cjson.dumps({"a": {1}})
