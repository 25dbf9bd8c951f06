"""The state file written in pieces (ctld/state/deferred.py `pieces`, integrity.write_sealed): the
same bytes as the whole document sealed, and no piece near the whole."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.ctld.state import deferred, integrity, statefile
from tests.ctld.harness import Harness as Cluster
from tests.ctld.helpers import make_config, wall

leaves = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                   st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
documents = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=12),
                            st.dictionaries(st.text(max_size=4), inner, max_size=12)),
    max_leaves=80)


class Deferred:
    """A part finished where the document is encoded (a node's saved entry)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def fragment(self) -> orjson.Fragment:
        return orjson.Fragment(orjson.dumps({"n": self.n, "pad": "x" * 150}))


@settings(max_examples=200, deadline=None)
@given(doc=documents, chunk=st.integers(1, 4), few=st.integers(0, 4))
def test_pieces_join_to_the_whole_document(doc, chunk: int, few: int) -> None:
    old = deferred.CHUNK, deferred.FEW
    deferred.CHUNK, deferred.FEW = chunk, few  # small, so every branch meets small documents
    try:
        assert b"".join(deferred.pieces(doc)) == deferred.dumps(doc)
    finally:
        deferred.CHUNK, deferred.FEW = old


def test_a_large_document_never_comes_whole(tmp_path) -> None:
    doc = {"nodes": {"saved_at": 1.5, "nodes": {f"n{i}": Deferred(i) for i in range(5000)}},
           "jobs": {"next_id": 7, "jobs": [Deferred(i) for i in range(3000)]}}
    whole = deferred.dumps(doc)
    biggest = max(len(p) for p in deferred.pieces(doc))
    assert len(whole) > 1_000_000 and biggest < len(whole) / 10
    statefile.save(str(tmp_path), doc)
    raw = (tmp_path / statefile.STATE_FILE).read_bytes()
    assert raw == integrity.seal(deferred.dumps({"format": statefile.FORMAT_VERSION, **doc}))
    assert statefile.load(str(tmp_path))["nodes"]["nodes"]["n4999"]["n"] == 4999


def test_a_key_dumps_refuses_is_refused_in_pieces_too() -> None:
    doc = {"a": {1: "x"}}
    with pytest.raises(TypeError):
        deferred.dumps(doc)
    with pytest.raises(TypeError):
        b"".join(deferred.pieces(doc))


async def test_the_controllers_document_is_walked_down_to_its_large_parts() -> None:
    """`pieces` walks a dict of at most FEW keys: the document's own levels must stay so, or
    its nodes and jobs would be encoded whole again (no error would say so). Saver adds four
    keys of its own (format, node_credentials, journal_seq, journal_keep_from)."""
    doc = Cluster(make_config(), wall=wall).save_doc()
    assert len(doc) + 4 <= deferred.FEW
    assert all(len(part) <= deferred.FEW for part in doc.values() if isinstance(part, dict))


def test_a_str_subclass_key_is_refused_as_dumps_refuses_it() -> None:
    class Name(str):
        pass

    for doc in ({Name("a"): 1}, {"x": {Name("a"): 1}}):
        with pytest.raises(TypeError):
            deferred.dumps(doc)
        with pytest.raises(TypeError):
            b"".join(deferred.pieces(doc))
