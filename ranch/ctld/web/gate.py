"""Who asks the HTTP layer and what they may read: HttpAuth's rule, the bearer tokens of
HttpTokenFile, and PrivateData's cut (ctld/rpc/permissions.py, the rule the CLI's reads follow)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from ranch.ctld import logs
from ranch.ctld.rpc import permissions
from ranch.ctld.web.responses import error
from ranch.ctld.web.tokens import Tokens, bearer, is_loopback

if TYPE_CHECKING:
    from ranch.ctld.web.webports import Configured

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


class Gate:
    """The checks every route makes before it answers."""

    def __init__(self, configured: Configured, auth: str, token_file: str | None) -> None:
        self.configured = configured
        self.auth = auth  # HttpAuth: none, loopback or token
        self.tokens = Tokens(token_file)

    def who(self, request: Request) -> tuple[str | None, Response | None]:
        """(token name, None) for a valid bearer token, else (None, the refusal)."""
        token = bearer(request.headers.get("authorization"))
        if token is None:
            return None, error(401, "this request needs `Authorization: Bearer TOKEN` "
                               "(a token of HttpTokenFile)", headers=_CHALLENGE)
        problem = self.tokens.problem()
        if problem is not None:
            return None, error(503, f"tokens cannot be checked: {problem}")
        name = self.tokens.name_of(token)
        if name is None:
            logs.event("http token refused", logging.WARNING, peer=peer(request),
                       path=request.url.path)
            return None, error(401, "unknown token", headers=_CHALLENGE)
        return name, None

    def read_refusal(self, request: Request, hides: str = "") -> Response | None:
        """None when the request may read (HttpAuth), else the refusal; `hides`: what
        PrivateData may hide from this reader ("nodes")."""
        refused = self._anyone_refusal(request)
        if refused is not None or not hides:
            return refused
        why = permissions.http_hidden(self.configured.config, self.reader(request), hides)
        return None if why is None else error(403, why)

    def _anyone_refusal(self, request: Request) -> Response | None:
        if self.auth == "none":
            return None
        client = request.client.host if request.client else None
        if self.auth == "loopback" and is_loopback(client):
            return None
        return self.who(request)[1]

    def reader(self, request: Request) -> permissions.Identity | None:
        """The user a valid token names (that user's rights), None for a reader without one."""
        if bearer(request.headers.get("authorization")) is None:
            return None
        name, _ = self.who(request)
        return None if name is None else permissions.identify_name(self.configured.config, name)


def peer(request: Request) -> str:
    c = request.client
    return f"{c.host}:{c.port}" if c else "?"
