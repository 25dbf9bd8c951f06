"""Message bodies: one cattrs converter (orjson preconf) for every class of protocol.messages.

orjson was picked by bench/codec_bench.py: fastest round trip for both a heartbeat and a
10,000-node snapshot (figures in the bench's output and the daemons issue's notes).
"""

from __future__ import annotations

from typing import Any

import cattrs
import orjson
from cattrs.preconf.orjson import make_converter

from protocol.errors import ProtocolError
from protocol.messages import MESSAGE_TYPES
from protocol.versions import CURRENT, downgrade

converter = make_converter(forbid_extra_keys=False)  # newer peers may send fields we lack


def encode(msg: Any, *, version: int = CURRENT) -> bytes:
    """Body bytes of `msg`, without the fields `version` does not know."""
    body = converter.unstructure(msg)
    if version < CURRENT:
        body = downgrade(body, type(msg), version)
    return orjson.dumps(body)


def decode(type_name: str, body: bytes) -> Any:
    """The message of type `type_name` from body bytes; raises ProtocolError on any flaw."""
    cls = MESSAGE_TYPES.get(type_name)
    if cls is None:
        raise ProtocolError("unknown_type", f"unknown message type {type_name!r}")
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError("bad_request", f"{type_name} body is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ProtocolError("bad_request", f"{type_name} body must be an object")
    try:
        return converter.structure(raw, cls)
    except Exception as exc:  # cattrs raises ExceptionGroups, TypeErrors, ValueErrors, ...
        field, why = _describe(exc)
        where = f" field {field!r}" if field else ""
        raise ProtocolError("bad_request", f"{type_name}{where}: {why}", field=field) from None


def _describe(exc: BaseException) -> tuple[str, str]:
    """(dotted field path, reason) of the first problem cattrs found."""
    if isinstance(exc, cattrs.BaseValidationError):
        first = cattrs.transform_error(exc, path="")[0]
        # "invalid value for type, expected int @ .seq" -> ("seq", "invalid value ...")
        why, _, path = first.rpartition(" @ ")
        path = path.lstrip(".").replace("[", ".").replace("]", "")
        return path, why or first
    return "", str(exc) or type(exc).__name__
