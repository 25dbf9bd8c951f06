"""Finding and asking the controller: address and key precedence, one request, one-line errors."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6817
SERVER_ENV = "RANCH_SERVER"
CONF_ENV = "RANCH_CONF"
REQUEST_TIMEOUT = 10.0


class CliError(Exception):
    """A failure to report on stderr as one line; `code` is the exit status (1 failure, 2 usage)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@attrs.frozen
class Target:
    host: str
    port: int
    key_path: str
    origin: str  # where the address came from, for error messages

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def find_target(
    server: str | None,
    key_file: str | None,
    conf_path: str | None,
    env: Mapping[str, str] | None = None,
) -> Target:
    """--server > RANCH_SERVER > SlurmctldHost/Port of -f/RANCH_CONF > 127.0.0.1:6817; the key
    from --key-file > RANCH_KEY_FILE > AuthKeyFile > protocol.auth's default path."""
    env = os.environ if env is None else env
    conf_path = conf_path or env.get(CONF_ENV) or None
    server_text, origin = (server, "--server") if server else (env.get(SERVER_ENV), SERVER_ENV)
    cfg = None
    if conf_path and (not server_text or not (key_file or env.get("RANCH_KEY_FILE"))):
        cfg = _load_config(conf_path)
    if server_text:
        host, port = _parse_address(server_text, origin)
    elif cfg is not None and cfg.control.hosts:
        first = cfg.control.hosts[0]
        host, port, origin = first.addr or first.name, cfg.control.port, f"config {conf_path}"
    elif cfg is not None:
        host, port, origin = DEFAULT_HOST, cfg.control.port, f"config {conf_path}"
    else:
        host, port, origin = DEFAULT_HOST, DEFAULT_PORT, "the default"
    from protocol.auth import resolve_key_path

    key_path = resolve_key_path(key_file, cfg.auth.key_file if cfg else None, env=env)
    return Target(host, port, key_path, origin)


def _parse_address(text: str, origin: str) -> tuple[str, int]:
    from protocol.client import parse_address

    try:
        return parse_address(text, DEFAULT_PORT)
    except ValueError as exc:
        raise CliError(f"{origin}: {exc}", code=2) from None


def _load_config(path: str) -> Any:
    from cli.light_imports import conf_module

    build = conf_module("build")
    errors = conf_module("errors")
    try:
        return build.load_config(path)
    except errors.ConfigError as exc:
        first = exc.errors[0] if exc.errors else None
        where = f"{first.path}:{first.line}:{first.col}: {first.message}" if first else str(exc)
        raise CliError(f"cannot read config {path}: {where}") from None
    except OSError as exc:
        raise CliError(f"cannot read config {path}: {exc.strerror or exc}") from None


def ask(target: Target, msg: Any, *, timeout: float = REQUEST_TIMEOUT) -> Any:
    """Send one request and return the reply; any failure becomes a CliError (exit 1)."""
    from protocol.auth import KeyFileError, load_key
    from protocol.client import ControllerUnreachable, request
    from protocol.errors import ProtocolError
    from protocol.messages import Error

    try:
        key = load_key(target.key_path)
    except KeyFileError as exc:
        # Without a controller the key is moot: say what is more fundamentally wrong.
        _check_reachable(target)
        raise CliError(str(exc)) from None
    try:
        reply = request((target.host, target.port), key, msg, timeout=timeout)
    except ControllerUnreachable as exc:
        raise _unreachable(target, exc.reason) from None
    except ProtocolError as exc:
        raise CliError(f"controller at {target.address}: {exc.code}: {exc.message}") from None
    if isinstance(reply, Error):
        raise CliError(f"controller at {target.address} refused the request: {reply.message}")
    return reply


def _unreachable(target: Target, reason: str) -> CliError:
    return CliError(
        f"cannot reach the controller at {target.address} (from {target.origin}): "
        f"{reason}; set its address with --server HOST:PORT or {SERVER_ENV}"
    )


def _check_reachable(target: Target) -> None:
    import socket

    try:
        socket.create_connection((target.host, target.port), timeout=2.0).close()
    except OSError as exc:
        raise _unreachable(target, exc.strerror or str(exc) or type(exc).__name__) from None


def expect(reply: Any, cls: type) -> Any:
    if not isinstance(reply, cls):
        raise CliError(f"unexpected reply {type(reply).__name__} (wanted {cls.__name__})")
    return reply
