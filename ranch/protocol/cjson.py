"""JSON for the commands' one request: the json package's own C encoder and scanner (_json),
without importing json, whose decoder and scanner import re (and re, enum): 6 ms of a command's
start, more than half of Python's own. orjson costs more still (its import pulls dataclasses,
inspect and json). Output and results are json.dumps(separators=(",", ":")) and json.loads':
tests/protocol/test_cjson.py holds them to that; an interpreter without _json uses json itself.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays off a command's start
if TYPE_CHECKING:
    from typing import Any

__all__ = ["dumps", "loads"]

_WHITESPACE = " \t\n\r"


def _refuse(obj: object) -> object:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


class _Context:
    """What _json.make_scanner reads from a json.JSONDecoder: json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity: float() reads all three


try:
    from _json import encode_basestring_ascii as _quote
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner

    # The C types' stubs name json's own classes; any object with these attributes serves.
    _encode: Any = _make_encoder(None, _refuse, _quote, None, ":", ",", False, False, True)
    _scan: Any = _make_scanner(_Context)  # type: ignore[arg-type]
except (ImportError, TypeError):  # pragma: no cover - no C accelerator (or another signature)
    _encode = _scan = None


def dumps(obj: object) -> str:
    """`json.dumps(obj, separators=(",", ":"))`."""
    if _encode is None:  # pragma: no cover
        import json

        return json.dumps(obj, separators=(",", ":"))
    if isinstance(obj, str):
        return _quote(obj)
    return "".join(_encode(obj, 0))


def loads(data: bytes | bytearray | memoryview | str) -> object:
    """`json.loads(data)` for UTF-8 text (what the wire carries); ValueError when malformed."""
    text = data if isinstance(data, str) else str(data, "utf-8")
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        obj, end = _scan(text, start)
    except StopIteration as exc:
        raise ValueError(f"Expecting value: char {exc.value}") from None
    if text[end:].strip(_WHITESPACE):
        raise ValueError(f"Extra data: char {end}")
    return obj
