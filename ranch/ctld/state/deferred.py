"""Snapshot parts finished where the snapshot is encoded (the saving thread), not on the event
loop: an object with a `fragment()` method stands in the document for the JSON it returns."""

from __future__ import annotations

from typing import Any

import orjson


def finish(obj: Any) -> orjson.Fragment:
    """orjson's `default`: a deferred part's JSON, called while the document is encoded."""
    fragment = getattr(obj, "fragment", None)
    if fragment is None:
        raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")
    return fragment()


def dumps(doc: Any) -> bytes:
    """`doc` as JSON, its deferred parts finished."""
    return orjson.dumps(doc, default=finish)
