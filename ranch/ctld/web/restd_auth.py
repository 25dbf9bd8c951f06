"""Who a slurmrestd-style request (/slurm/v0.0.38) comes from: an HS256 JWT, or a Ranch token.

slurmrestd 22.05 with rest_auth/jwt takes X-SLURM-USER-NAME and X-SLURM-USER-TOKEN; the token is
a JWT signed with the cluster's jwt key (AuthAltTypes=auth/jwt, AuthAltParameters=jwt_key=PATH)
whose claims name the user (sun) and its expiry (exp). Ranch checks it here, with the same key,
where slurmctld would; a token of HttpTokenFile (Authorization: Bearer) is taken too, and a
request with neither reads as the /api/v1 routes let an anonymous reader (HttpAuth).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import time
from typing import Any

import orjson

from ranch.conf.model import ClusterConfig
from ranch.protocol.auth import KeyFileError, read_private


class AuthFailure(Exception):
    """The request's credentials are refused (the words say why)."""


def jwt_key_path(config: ClusterConfig) -> str | None:
    """The jwt key's path, where AuthAltTypes names auth/jwt; else None (JWTs are refused)."""
    settings = dict(config.settings)
    types = [t.strip() for t in settings.get("AuthAltTypes", "").split(",")]
    if "auth/jwt" not in types:
        return None
    for word in settings.get("AuthAltParameters", "").split(","):
        key, _, value = word.strip().partition("=")
        if key.lower() == "jwt_key" and value:
            return value
    # slurmctld's default: StateSaveLocation/jwt_hs256.key
    base = config.control.state_save_location
    return os.path.join(base, "jwt_hs256.key") if base else None


class JwtKey:
    """The HS256 key file, read again when it changes (a key rotated in place is taken up)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._key = b""

    def key(self) -> bytes:
        if self.path is None:
            raise AuthFailure("JWT authentication is not configured (AuthAltTypes=auth/jwt, "
                              "AuthAltParameters=jwt_key=PATH)")
        try:
            st = os.stat(self.path)
            if (st.st_mtime_ns, st.st_size, st.st_mode) != self._stamp:
                # a secret as the cluster key is: a regular file only its owner may read (who
                # reads it mints anyone's token), opened without hanging on a FIFO
                self._key = read_private(self.path, "jwt key")
                self._stamp = (st.st_mtime_ns, st.st_size, st.st_mode)
        except KeyFileError as exc:
            raise AuthFailure(str(exc)) from None
        except OSError as exc:
            raise AuthFailure(f"the jwt key {self.path} cannot be read: "
                              f"{exc.strerror or exc}") from None
        if not self._key:
            raise AuthFailure(f"the jwt key {self.path} is empty")
        return self._key

    def verify(self, token: str, now: float | None = None) -> dict[str, Any]:
        """The token's claims, or AuthFailure: signature (HS256 with the key), expiry, user."""
        parts = token.split(".")
        if len(parts) != 3:
            raise AuthFailure("the token is not a JWT (three dot-separated parts)")
        try:
            header = orjson.loads(_unb64(parts[0]))
            claims = orjson.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except (binascii.Error, ValueError, orjson.JSONDecodeError):
            raise AuthFailure("the token is not a JWT (its parts are not base64url JSON)") \
                from None
        if not isinstance(header, dict) or header.get("alg") != "HS256":
            raise AuthFailure("the token is not signed with HS256")
        mac = hmac.new(self.key(), f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(mac, signature):
            raise AuthFailure("the token's signature does not match the jwt key")
        if not isinstance(claims, dict):
            raise AuthFailure("the token's claims are not an object")
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or exp < (time.time() if now is None else now):
            raise AuthFailure("the token has expired" if isinstance(exp, int | float)
                              else "the token has no expiry (exp)")
        user = claims.get("sun") or claims.get("username")
        if not isinstance(user, str) or not user:
            raise AuthFailure("the token names no user (sun)")
        return claims


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def may_act_as(config: ClusterConfig, token_user: str, asked: str) -> bool:
    """slurmctld's rule: a token acts for its own user; root's or SlurmUser's for anybody."""
    return asked == token_user or token_user in ("root", config.access.slurm_user)
