"""Blocking one-shot requests to the controller over a plain socket (for the CLI: no trio here)."""

from __future__ import annotations

import secrets
import socket
import time
from typing import Any

from protocol.framing import FrameDecoder, encode_frame

DEFAULT_PORT = 6817
# Replies come from the controller we authenticate; a snapshot of a large cluster is several MiB.
MAX_REPLY_SIZE = 256 << 20


class ControllerUnreachable(ConnectionError):
    """The controller could not be reached or did not answer in time."""

    def __init__(self, addr: tuple[str, int], reason: str) -> None:
        super().__init__(f"cannot reach controller at {addr[0]}:{addr[1]}: {reason}")
        self.addr = addr
        self.reason = reason


def parse_address(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """ "host", "host:port", "[v6]:port" -> (host, port); ValueError naming the problem."""
    text = text.strip()
    if not text:
        raise ValueError("empty controller address")
    host, port_text = text, ""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"bad address {text!r}: expected [IPv6]:PORT")
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    if not host:
        raise ValueError(f"bad address {text!r}: missing host")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad address {text!r}: port {port_text!r} is not a number 1-65535")
    return host, int(port_text)


def request(
    addr: tuple[str, int],
    key: bytes,
    msg: Any,
    *,
    timeout: float = 10.0,
    max_reply_size: int = MAX_REPLY_SIZE,
) -> Any:
    """Send `msg`, return the reply message (an `Error` reply is returned, not raised).

    Raises ControllerUnreachable when the controller cannot be reached or stays silent for
    `timeout` seconds, and ProtocolError when its reply fails authentication or decoding."""
    deadline = time.monotonic() + timeout
    request_id = secrets.randbits(63) or 1
    try:
        sock = socket.create_connection(addr, timeout=timeout)
    except OSError as exc:
        raise ControllerUnreachable(addr, _reason(exc)) from None
    decoder = FrameDecoder(key, max_size=max_reply_size, message_timeout=max(timeout, 10.0))
    with sock:
        try:
            sock.sendall(encode_frame(msg, key, request_id=request_id))
            while True:
                for frame in decoder:
                    if frame.request_id in (request_id, 0):
                        return frame.msg
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                sock.settimeout(remaining)
                data = sock.recv(1 << 16)
                if not data:
                    raise ControllerUnreachable(addr, "connection closed before a reply came")
                decoder.feed(data)
        except TimeoutError:
            raise ControllerUnreachable(addr, f"no reply within {timeout:g} s") from None
        except OSError as exc:
            if isinstance(exc, ControllerUnreachable):
                raise
            raise ControllerUnreachable(addr, _reason(exc)) from None


def _reason(exc: OSError) -> str:
    if isinstance(exc, TimeoutError):
        return "connection timed out"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host ({exc.strerror})"
    return exc.strerror or str(exc) or type(exc).__name__
