"""The JSON response and the error document every route of the HTTP layer answers with."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response


class Json(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return content if isinstance(content, bytes) else orjson.dumps(content)


def error(status: int, message: str, field: str | None = None,
          headers: dict[str, str] | None = None) -> Json:
    err: dict[str, Any] = {"error": message}
    if field:
        err["field"] = field
    return Json({"errors": [err]}, status_code=status, headers=headers)


def is_number(text: str) -> bool:
    """Whether a path or query word is a plain decimal number int() takes: str.isdigit() also
    passes '²' (int() refuses it, a 500 for a reader's typo), and the length is capped."""
    return text.isascii() and text.isdecimal() and len(text) <= 18
