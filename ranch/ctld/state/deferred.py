"""Snapshot parts finished where the snapshot is encoded (the saving thread), not on the event
loop: an object with a `fragment()` method stands in the document for the JSON it returns."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

import orjson

# `pieces` encodes a container of more entries than this a chunk at a time, and walks a dict
# of at most FEW keys (the document's own levels) key by key; whatever lies between is small
# enough to encode whole.
CHUNK = 512
FEW = 64


def finish(obj: Any) -> orjson.Fragment:
    """orjson's `default`: a deferred part's JSON, called while the document is encoded."""
    fragment = getattr(obj, "fragment", None)
    if fragment is None:
        raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")
    return fragment()


def dumps(doc: Any) -> bytes:
    """`doc` as JSON, its deferred parts finished."""
    return orjson.dumps(doc, default=finish)


def pieces(doc: Any) -> Iterator[bytes]:
    """dumps(doc) in pieces, byte for byte, never the whole in memory: a 50,000-node snapshot is
    96 MB, and orjson's growing buffer and the finished copy held about twice that at the
    save's peak (docs/benchmarks.md, relays)."""
    if isinstance(doc, dict) and len(doc) > CHUNK:
        yield b"{"
        items = iter(doc.items())
        first = True
        while chunk := dict(islice(items, CHUNK)):
            if not first:
                yield b","
            yield dumps(chunk)[1:-1]
            first = False
        yield b"}"
    elif isinstance(doc, dict) and len(doc) <= FEW:
        yield b"{"
        for i, (key, value) in enumerate(doc.items()):
            if type(key) is not str:  # as dumps refuses it (a str subclass too)
                raise TypeError("Dict key must be str")
            yield b'%s%s:' % (b"," if i else b"", orjson.dumps(key))
            yield from pieces(value)
        yield b"}"
    elif isinstance(doc, list) and len(doc) > CHUNK:
        yield b"["
        for start in range(0, len(doc), CHUNK):
            yield b"%s%s" % (b"," if start else b"", dumps(doc[start:start + CHUNK])[1:-1])
        yield b"]"
    else:
        yield dumps(doc)
