"""Bearer tokens of rctld's HTTP API: `name:token` lines of HttpTokenFile, and who may read.

The file must be private (the cluster key's rule, ranch.protocol.auth.read_private). The token's
name
is recorded as the user of every change made with it, as rcontrol records the login name.
"""

from __future__ import annotations

import hmac
import ipaddress
import math
import os
import time
from collections.abc import Callable

from ranch.protocol.auth import KeyFileError, read_private

MIN_TOKEN_CHARS = 16


class TokenError(Exception):
    """The token file is unusable; the message says why and what to do."""


def parse_tokens(text: str, path: str) -> dict[str, str]:
    """token -> name. Blank lines and `#` comments are skipped; errors name the line."""
    tokens: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, token = line.partition(":")
        name, token = name.strip(), token.strip()
        if not sep or not name or not token:
            raise TokenError(f"{path}:{lineno}: expected NAME:TOKEN")
        if len(token) < MIN_TOKEN_CHARS:
            raise TokenError(f"{path}:{lineno}: token of {name!r} is shorter than "
                             f"{MIN_TOKEN_CHARS} characters")
        if token in tokens:
            raise TokenError(f"{path}:{lineno}: token of {name!r} is also {tokens[token]!r}'s")
        tokens[token] = name
    return tokens

RECHECK_EVERY = 1.0  # seconds between looks at the token file: a rotation shows within this


class Tokens:
    """The token file, re-read when it changes (so tokens rotate without a restart)."""

    def __init__(self, path: str | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.clock = clock
        self._checked = -math.inf  # when the file was last stat'ed
        self._stamp: tuple[int, int, int] | None = None
        self._tokens: dict[str, str] = {}
        self._error: str | None = None if path else "no HttpTokenFile is configured"

    def problem(self) -> str | None:
        """Why no token can be accepted now, or None."""
        self._refresh()
        return self._error

    def _refresh(self) -> None:
        if self.path is None:
            return
        now = self.clock()
        if now - self._checked < RECHECK_EVERY:
            return  # a stat per request would be blocking I/O on the loop under load
        self._checked = now
        try:
            st = os.stat(self.path)
        except OSError as exc:
            self._stamp, self._tokens = None, {}
            self._error = f"HttpTokenFile {self.path}: {exc.strerror}"
            return
        stamp = (st.st_mtime_ns, st.st_size, st.st_mode)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            text = read_private(self.path, "HttpTokenFile").decode("utf-8")
            self._tokens, self._error = parse_tokens(text, self.path), None
        except (KeyFileError, TokenError) as exc:
            self._tokens, self._error = {}, str(exc)
        except FileNotFoundError:
            self._tokens, self._error = {}, f"HttpTokenFile {self.path} does not exist"
        except UnicodeDecodeError:
            self._tokens, self._error = {}, f"HttpTokenFile {self.path} is not UTF-8 text"

    def name_of(self, token: str) -> str | None:
        """The name of a presented token, or None. Compared in constant time per entry."""
        self._refresh()
        found = None
        for known, name in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = name
        return found


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"
