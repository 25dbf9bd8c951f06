"""A node connection's reads and writes without trio's extra scheduler round trips.

trio's SocketStream tries each recv before waiting, so a heartbeat (the next one is seconds
away) costs a failed syscall and an exception, and it yields to the scheduler again after every
send the kernel takes at once. At 10,000 nodes that was the largest share of rctld's CPU per
heartbeat left after the message work itself (docs/benchmarks.md, hot spot 4). Here a receive
waits for readability first, then reads; a send is first tried without waiting, and only what
the kernel did not take goes through trio. The socket is read and written through its file
descriptor (os.read/os.write, Unix only) because trio keeps the stdlib socket private.
"""

from __future__ import annotations

import _socket
import contextlib
import fcntl
import os
import socket
import sys
import termios
from typing import Any

import trio

# struct tcp_info (linux/tcp.h): eight one-byte fields, then u32s; tcpi_last_data_recv (ms) is
# the eleventh of those
_LAST_DATA_RECV = 52
_TCP_INFO_LEN = _LAST_DATA_RECV + 4
RECEIVE_CHUNK = 1 << 16  # what one read of a connection takes
UNPROVEN_CHUNK = 4 << 10  # of a peer that has not proven the key yet

class RawStream(trio.abc.AsyncResource):
    """An accepted connection's stream: the standard library's socket and what rctld calls of a
    trio stream on it (send_all, receive_some, aclose). trio.SocketStream wraps a trio socket
    that wraps this one, with a conflict detector, three objects with a dict each: about 300
    bytes of every node's connection, 3 MB at 10,000 nodes (issue 47). Sends are serialised by
    the connection's own lock (ctld/rpc/connection.py)."""

    __slots__ = ("socket",)

    def __init__(self, sock: _socket.socket) -> None:
        sock.setblocking(False)  # as trio's socket does: every wait goes through trio
        with contextlib.suppress(OSError):  # as trio.SocketStream does: frames leave at once
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        self.socket = sock

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        sock = self.socket
        while view:
            fd = sock.fileno()
            if fd < 0:
                raise trio.ClosedResourceError("socket was closed")
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
            except OSError as exc:
                raise trio.BrokenResourceError(f"send failed: {exc}") from exc
        await trio.lowlevel.checkpoint_if_cancelled()

    async def receive_some(self, max_bytes: int) -> bytes:
        return await receive(self.socket, max_bytes)

    def close(self) -> None:
        """Close the socket now; a task waiting on it is woken with ClosedResourceError."""
        sock = self.socket
        if sock.fileno() >= 0:
            trio.lowlevel.notify_closing(sock)
        sock.close()

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()


class StreamIO:
    """The raw side of one stream. For a RawStream or a trio.SocketStream it uses the
    descriptor; any other stream (the in-memory ones of tests) goes through the stream's own
    methods. The stream still owns the socket and closes it."""

    __slots__ = ("sock", "stream")

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.sock = (stream.socket if isinstance(stream, RawStream | trio.SocketStream)
                     else None)

    def try_send(self, data: bytes) -> int:
        """Write what the kernel takes now, without waiting: the number of bytes written."""
        if self.sock is None:
            return 0
        fd = self.sock.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("socket was closed")
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise trio.BrokenResourceError(f"send failed: {exc}") from exc

    def unread(self) -> int:
        """Bytes received by the kernel and not yet read (0 for other streams)."""
        return 0 if self.sock is None else unread_bytes(self.sock.fileno())

    def waited(self) -> float:
        """Seconds since the kernel last received data for us (TCP_INFO's tcpi_last_data_recv;
        0.0 for other streams or when unknown): bytes read since, or still unread, have waited
        at least this long on this side."""
        if self.sock is None:
            return 0.0
        try:
            raw = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
        except (OSError, ValueError, AttributeError):
            return 0.0
        if len(raw) < _TCP_INFO_LEN:
            return 0.0
        return int.from_bytes(raw[_LAST_DATA_RECV:_TCP_INFO_LEN], sys.byteorder) / 1000.0

    def read_now(self, max_bytes: int) -> bytes | None:
        """What the kernel holds for us now, without waiting: None when nothing is there (or
        the stream is not a socket), b"" at end of stream. A command's request is nearly always
        in the kernel by the time its connection is accepted: reading it at once spares the
        wait for readability (an epoll registration and a pass of the scheduler)."""
        sock = self.sock
        if sock is None:
            return None
        fd = sock.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("socket was closed")
        try:
            return os.read(fd, max_bytes)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise trio.BrokenResourceError(f"receive failed: {exc}") from exc

    async def wait_readable(self) -> bool:
        """Wait until a read would not block; False when this stream has no descriptor to wait
        on (its own receive_some waits)."""
        sock = self.sock
        if sock is None:
            return False
        await trio.lowlevel.wait_readable(sock)
        return True

    async def receive_some(self, max_bytes: int) -> bytes:
        """Like SocketStream.receive_some: b"" at end of stream, BrokenResourceError on a reset,
        ClosedResourceError once the socket is closed."""
        sock = self.sock
        if sock is None:
            return await self.stream.receive_some(max_bytes)
        return await receive(sock, max_bytes)


async def receive(sock: Any, max_bytes: int) -> bytes:
    """What socket `sock` holds, once it has something (see StreamIO.receive_some)."""
    while True:
        if sock.fileno() < 0:
            raise trio.ClosedResourceError("socket was closed")
        await trio.lowlevel.wait_readable(sock)
        fd = sock.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("socket was closed")
        try:
            return os.read(fd, max_bytes)
        except BlockingIOError:  # woken without data (it happens): wait again
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(f"receive failed: {exc}") from exc


def unread_bytes(fd: int) -> int:
    """Bytes the kernel holds for socket `fd` that nobody has read yet (FIONREAD; 0 when the
    descriptor is closed or the call fails)."""
    if fd < 0:
        return 0
    try:
        buf = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except (OSError, ValueError):
        return 0
    return int.from_bytes(buf, sys.byteorder, signed=True)
