"""How much of a request body rctld reads, before authentication and after."""

# An ASGI wrapper refuses, before any route or token is looked at, a body announced over MAX_BODY
# (413, nothing read); routes that take a body read it counted once the caller is authenticated
# (a chunked body announces no length: reading stops at the cap). The largest body a route takes
# is a node update ({"state": ..., "reason": ...}); MAX_BODY leaves it a hundredfold.

from __future__ import annotations

from typing import Any

import orjson

MAX_BODY = 64 * 1024  # bytes of a request body, before authentication and after
TOO_LARGE = f"request body over the limit of {MAX_BODY:,} bytes (docs/limits.md)"


class BodyTooLarge(Exception):
    pass


def _too_large_body() -> bytes:
    return orjson.dumps({"errors": [{"error": TOO_LARGE, "error_code": 413}]})


async def send_too_large(send: Any) -> None:
    body = _too_large_body()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class BodyCap:
    """Refuses an announced body over MAX_BODY before the app runs."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for name, value in scope.get("headers", ()):
                if name == b"content-length":
                    if not value.strip().isdigit() or int(value) > MAX_BODY:
                        await send_too_large(send)
                        return
        await self.app(scope, receive, send)


async def read_body(request: Any) -> bytes:
    """The request's body, at most MAX_BODY bytes; BodyTooLarge past it (read no further)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise BodyTooLarge(TOO_LARGE)
        chunks.append(chunk)
    return b"".join(chunks)
