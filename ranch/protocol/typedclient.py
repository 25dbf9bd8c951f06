"""Blocking one-shot requests with typed messages (attrs classes in, attrs classes out).

For tools, benches and tests; the commands use protocol.client's raw path, which imports neither
attrs nor cattrs.
"""

from __future__ import annotations

import time

from ranch.protocol.client import (
    MAX_REPLY_SIZE,
    RAW_VERSION,
    ControllerUnreachable,
    connect,
    done_sending,
    failure_reason,
    new_request_id,
    send_frame,
    unreachable,
)


def request(
    addr: tuple[str, int],
    key: bytes,
    msg: object,
    *,
    timeout: float = 10.0,
    max_reply_size: int = MAX_REPLY_SIZE,
    munge: str | None = None,
) -> object:
    """Send `msg`, return the reply message (an `Error` reply is returned, not raised).
    `munge`: prove the caller's user with a MUNGE credential from munged at this socket ("" =
    MUNGE's default; `key` is then unused), as commands do under AuthType=auth/munge.

    Raises ControllerUnreachable when the controller cannot be reached or stays silent for
    `timeout` seconds, and ProtocolError when its reply fails authentication or decoding."""
    from ranch.protocol.framing import FrameDecoder, encode_frame

    deadline = time.monotonic() + timeout
    request_id = new_request_id()
    pre = b""
    if munge is not None:
        from ranch.protocol.userauth import preamble

        key, pre = preamble(munge or None, request_id=request_id, version=RAW_VERSION)
    try:
        sock = connect(addr, timeout)
    except OSError as exc:
        raise ControllerUnreachable(addr, failure_reason(exc)) from None
    decoder = FrameDecoder(key, max_size=max_reply_size, message_timeout=max(timeout, 10.0))
    with sock:
        send_error = send_frame(sock, pre + encode_frame(msg, key, request_id=request_id))
        if send_error is None:
            done_sending(sock)
        if isinstance(send_error, TimeoutError):
            raise ControllerUnreachable(addr, f"no reply within {timeout:g} s")
        try:
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
        except OSError as exc:
            raise unreachable(addr, exc, send_error, timeout) from None
