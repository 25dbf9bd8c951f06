"""Blocking one-shot requests to the controller over a plain socket (for the CLI: no trio here).

`request_raw` sends and returns plain dicts and imports neither attrs nor cattrs (the CLI's path:
it starts in a fraction of the time); protocol.typedclient's `request` sends and returns typed
messages over the same socket helpers.
"""

from __future__ import annotations

import _socket
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from ranch.protocol.rawframe import RawFrame

DEFAULT_PORT = 6817
# Replies come from the controller we authenticate; a snapshot of a large cluster is several MiB.
MAX_REPLY_SIZE = 256 << 20
# The protocol version request_raw speaks: protocol.versions.CURRENT, written out so that the
# raw path need not import the message classes (tests/cli/test_rawclient.py checks they agree).
RAW_VERSION = 6
_FOREVER = float("inf")  # math.inf, without loading the math module for it


class ControllerUnreachable(ConnectionError):
    """The controller could not be reached or did not answer in time."""

    def __init__(self, addr: tuple[str, int], reason: str, sent: bool = True) -> None:
        super().__init__(f"cannot reach controller at {addr[0]}:{addr[1]}: {reason}")
        self.addr = addr
        self.reason = reason
        # False: the request never left (no connection), so asking another controller cannot
        # make it happen twice
        self.sent = sent


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


def request_raw(
    addr: tuple[str, int],
    key: bytes,
    type_name: str,
    body: dict[str, object],
    *,
    timeout: float = 10.0,
    max_reply_size: int = MAX_REPLY_SIZE,
    version: int = RAW_VERSION,
    munge: str | None = None,
    connect_timeout: float | None = None,
) -> tuple[str, dict[str, object]]:
    """Send a `type_name` message whose body is `body` (the codec's shape), return the reply's
    (type name, body dict); an `Error` reply is returned, not raised.

    The reply must carry a valid MAC and a timestamp within max(timeout, 10) s of this host's
    clock. `munge` as for `request`. `connect_timeout`: how long the connection may take
    (default `timeout`; shorter where another controller can be tried next). Raises
    ControllerUnreachable like `request`, and rawframe.FrameError when the reply fails
    authentication or is not a JSON object."""
    deadline = time.monotonic() + timeout
    sock, request_id, send_error, key = _open_and_send(addr, key, type_name, body, timeout,
                                                       version, munge, connect_timeout)
    if send_error is None:
        done_sending(sock)
    with sock:
        return _read_reply(sock, addr, request_id, key, munge, deadline=deadline,
                           timeout=timeout, max_reply_size=max_reply_size,
                           send_error=send_error)


class RawCall:
    """request_raw in two halves, for a caller with a poll loop of its own (rrun's step I/O
    says "alive" from it): `RawCall(...)` connects and sends; once `fileno()` is readable,
    `reply()` reads the answer. Close it when done (or when no answer came in time)."""

    def __init__(self, addr: tuple[str, int], key: bytes, type_name: str,
                 body: dict[str, object], *, timeout: float = 10.0,
                 munge: str | None = None) -> None:
        self.addr = addr
        self.timeout = timeout
        self.munge = munge
        self.sock, self.request_id, self.send_error, self.key = _open_and_send(
            addr, key, type_name, body, timeout, RAW_VERSION, munge)
        if self.send_error is None:
            done_sending(self.sock)

    def fileno(self) -> int:
        return self.sock.fileno()

    def reply(self) -> tuple[str, dict[str, object]]:
        """The reply (request_raw's answer and errors), read within `timeout` from now."""
        return _read_reply(self.sock, self.addr, self.request_id, self.key, self.munge,
                           deadline=time.monotonic() + self.timeout, timeout=self.timeout,
                           max_reply_size=MAX_REPLY_SIZE, send_error=self.send_error)

    def close(self) -> None:
        self.sock.close()


def _read_reply(
    sock: _Socket,
    addr: tuple[str, int],
    request_id: int,
    key: bytes,
    munge: str | None,
    *,
    deadline: float,
    timeout: float,
    max_reply_size: int,
    send_error: OSError | None,
) -> tuple[str, dict[str, object]]:
    from ranch.protocol.rawframe import PREFIX, FrameError, check_length

    try:
        while True:
            (length,) = PREFIX.unpack(_recv_exactly(sock, PREFIX.size, deadline, addr))
            check_length(length, max_reply_size)
            reply = _open_reply(_recv_exactly(sock, length, deadline, addr), key, munge)
            if reply.request_id in (request_id, 0):
                break
    except OSError as exc:
        raise unreachable(addr, exc, send_error, timeout) from None
    skew = time.time() - reply.timestamp
    window = max(timeout, 10.0)
    if not abs(skew) <= window:
        raise FrameError(
            "stale",
            f"reply timestamp is {abs(skew):.1f} s off this host's clock (allowed {window:g} s; "
            "check clock sync)",
        )
    try:
        doc = _loads(reply.body)
    except ValueError as exc:  # both parsers' decode errors are ValueErrors
        raise FrameError("bad_request", f"{reply.type} body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise FrameError("bad_request", f"{reply.type} body must be an object")
    return reply.type, doc


# Above this size orjson's faster parsing pays for its import (~10 ms, it pulls dataclasses and
# inspect); below it json's own C scanner (protocol.cjson: no re, no enum) finishes first.
ORJSON_ABOVE = 4 << 20


def _loads(body: bytes | memoryview) -> Any:
    if len(body) > ORJSON_ABOVE:
        import orjson

        return orjson.loads(body)
    from ranch.protocol.cjson import loads

    return loads(body)


def _open_reply(raw: bytearray, key: bytes, munge: str | None) -> RawFrame:
    """open_frame, but under munge a refusal of the credential itself (signed with the
    well-known UNVERIFIED_KEY: rctld could not learn the session key) is read and marked."""
    from ranch.protocol.rawframe import FrameError, open_frame

    try:
        return open_frame(raw, key)
    except FrameError as exc:
        if munge is None or exc.code != "bad_mac":
            raise
        from ranch.protocol.userauth import UNVERIFIED_KEY

        try:
            reply = open_frame(raw, UNVERIFIED_KEY)
        except FrameError:
            raise exc from None
        if reply.type != "Error":
            raise exc from None
        doc = _loads(reply.body)
        raise FrameError(str(doc.get("code") or "auth"),
                         f"{doc.get('message')} (an unauthenticated reply: the controller could "
                         "not read our credential)") from None


def _recv_exactly(
    sock: _Socket, size: int, deadline: float, addr: tuple[str, int]
) -> bytearray:
    """`size` bytes read straight into one buffer (a snapshot is MiBs: no re-copying)."""
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        sock.settimeout(None if remaining == _FOREVER else remaining)
        n = sock.recv_into(view[got:])
        if not n:
            raise ControllerUnreachable(addr, "connection closed before a reply came")
        got += n
    return buf


def _open_and_send(
    addr: tuple[str, int],
    key: bytes,
    type_name: str,
    body: dict[str, object],
    timeout: float,
    version: int,
    munge: str | None = None,
    connect_timeout: float | None = None,
) -> tuple[_Socket, int, OSError | None, bytes]:
    """Connect, authenticate and send one raw request; returns the socket, its request id, the
    error that cut the send short, if one did (see `send_frame`), and the key replies are signed
    with (the session key under munge)."""
    from ranch.protocol.cjson import dumps
    from ranch.protocol.rawframe import pack_frame

    request_id = new_request_id()
    pre = b""
    if munge is not None:
        from ranch.protocol.userauth import preamble

        key, pre = preamble(munge or None, request_id=request_id, version=version)
    frame = pre + pack_frame(type_name, dumps(body).encode(), key,
                             request_id=request_id, version=version)
    try:
        sock = connect(addr, connect_timeout or timeout)
        if connect_timeout:
            sock.settimeout(timeout)
    except OSError as exc:
        raise ControllerUnreachable(addr, failure_reason(exc), sent=False) from None
    send_error = send_frame(sock, frame)
    if isinstance(send_error, TimeoutError):
        sock.close()
        raise ControllerUnreachable(addr, f"no reply within {timeout:g} s") from None
    return sock, request_id, send_error, key


class _Socket(_socket.socket):
    """A connected TCP socket from the C module: socket.py's enum conversions and selectors
    cost a command's start more than its whole request. Closed on leaving a `with`."""

    __slots__ = ()

    def __enter__(self) -> _Socket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(addr: tuple[str, int], timeout: float) -> _Socket:
    """A connection to `addr`, each address of the host tried in turn (socket.create_connection's
    way). An ASCII host goes to getaddrinfo as bytes: given a str, it would import the idna
    codec (and stringprep) first."""
    host, port = addr
    error: OSError | None = None
    for family, kind, proto, _, sockaddr in _socket.getaddrinfo(
            host.encode() if host.isascii() else host, port, 0, _socket.SOCK_STREAM):
        sock = _Socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"no address found for {host}")


def send_frame(sock: _Socket, frame: bytes) -> OSError | None:
    """Send `frame`; a send cut short (the controller refused the frame and closed) is returned,
    not raised: the controller's Error saying why may be waiting to be read, and it says more
    than "connection reset"."""
    try:
        sock.sendall(frame)
    except OSError as exc:
        return exc
    return None


def done_sending(sock: _Socket) -> None:
    """Half-close after the one request: rctld then finds the end of stream waiting once it has
    replied and closes at once, instead of waiting for it (issue 23: a scheduler pass and an
    epoll registration per command). Not for a stream of replies (stream_raw)."""
    try:
        sock.shutdown(_socket.SHUT_WR)
    except OSError:
        pass  # the reply (or the reason there is none) is read all the same


def new_request_id() -> int:
    return (int.from_bytes(os.urandom(8), "big") >> 1) or 1


def unreachable(addr: tuple[str, int], exc: OSError, send_error: OSError | None,
                timeout: float) -> ControllerUnreachable:
    """What a request that failed while waiting for its reply says: the send's own failure
    first (a reply that never came after a failed send is that failure), a silent controller as
    the time waited, an unreachable one as itself."""
    if isinstance(exc, TimeoutError):
        return ControllerUnreachable(addr, failure_reason(send_error) if send_error
                                     else f"no reply within {timeout:g} s")
    if isinstance(exc, ControllerUnreachable) and send_error is None:
        return exc
    return ControllerUnreachable(addr, failure_reason(send_error or exc))


def failure_reason(exc: OSError) -> str:
    if isinstance(exc, TimeoutError):
        return "connection timed out"
    if isinstance(exc, _socket.gaierror):
        return f"cannot resolve host ({exc.strerror})"
    return exc.strerror or str(exc) or type(exc).__name__


def stream_raw(
    addr: tuple[str, int],
    key: bytes,
    type_name: str,
    body: dict[str, object],
    *,
    timeout: float = 10.0,
    max_reply_size: int = MAX_REPLY_SIZE,
    munge: str | None = None,
) -> Iterator[tuple[str, dict[str, object]]]:
    """Like request_raw, for a request answered by a stream of replies on one connection
    (`rcontrol events --follow`): yields (type name, body) per reply frame until the controller
    closes the connection. The first reply must come within `timeout`; later ones may take any
    time, and their timestamps are not held to the clock window (a reply may wait in the
    socket while the reader is slow; each one's MAC is still checked)."""
    from ranch.protocol.rawframe import PREFIX, FrameError, check_length

    sock, request_id, send_error, key = _open_and_send(addr, key, type_name, body, timeout,
                                                       RAW_VERSION, munge)
    if send_error is not None:
        sock.close()
        raise ControllerUnreachable(addr, failure_reason(send_error))
    deadline = time.monotonic() + timeout
    with sock:
        try:
            while True:
                try:
                    head = _recv_exactly(sock, PREFIX.size, deadline, addr)
                except ControllerUnreachable:
                    if deadline == _FOREVER:
                        return  # the controller ended the stream
                    raise
                (length,) = PREFIX.unpack(head)
                check_length(length, max_reply_size)
                reply = _open_reply(_recv_exactly(sock, length, deadline, addr), key, munge)
                if reply.request_id not in (request_id, 0):
                    continue
                try:
                    doc = _loads(reply.body)
                except ValueError as exc:
                    raise FrameError("bad_request",
                                     f"{reply.type} body is not valid JSON: {exc}") from None
                deadline = _FOREVER  # the stream is open: wait for events as long as it takes
                yield reply.type, doc if isinstance(doc, dict) else {}
        except TimeoutError:
            raise ControllerUnreachable(addr, f"no reply within {timeout:g} s") from None
        except OSError as exc:
            if isinstance(exc, ControllerUnreachable):
                raise
            raise ControllerUnreachable(addr, failure_reason(exc)) from None
