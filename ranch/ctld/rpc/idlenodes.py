"""Registered nodes between frames, parked on one epoll of the server's with no task each.

A node sends a frame every few seconds and its connection waits the rest of the time. A trio
task parked in wait_readable holds its coroutines, a cancel scope and trio's wait bookkeeping:
about 3.5 KB a node, 36 MB of rctld at 10,000 nodes (issue 35). Here a node's reader with
nothing to read is handed over and its task ends; this poller, one task, waits on an epoll of
the parked sockets (one-shot: each fires once). A socket with bytes is read at once, here: a
plain heartbeat is answered and the node parked again without a task (FrameReader.quick), and
so, with the file journal, is one whose reply waits for the write (`settle`, after the wake-up's
frames); anything else starts a task, which reads on as the reader did. The kernel keeps the
readiness, so nothing is missed between the park and the wait. trio offers no wait on many
sockets in one task; the standard library's select.epoll does (Linux, as rctld).

A busy poller (its last two wake-ups less than BUSY apart) takes its sockets at most once every
GATHER: at 10,000 nodes (1,000 beats a second) each wake-up found one socket, and trio's pass,
the wait's two epoll_ctl and the poll were paid per beat. Gathering five milliseconds' worth cut
rctld's CPU there by a fifth (docs/benchmarks.md, issue 50). A gather that found LONG_FROM
sockets or more is followed by a longer one (GATHER_LONG: some twenty sockets a wake-up at
10,000 nodes, a tenth less of rctld's CPU again); one that found fewer, by the short one. So
only a poller that many nodes keep busy answers up to 20 ms late (heartbeats are seconds apart,
timeouts seconds long). A quiet poller takes a frame at once and waits again at once: a gather
after each of a few nodes' beats was a wake-up of rctld's for nothing. So was one after a
single node's two frames in quick succession (a job's start, then its end, some milliseconds
later): two wake-ups for the same one socket do not make the poller busy.
"""

from __future__ import annotations

import math
import select
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import trio

if TYPE_CHECKING:
    from ranch.ctld.rpc.fastio import StreamIO


class Conn(Protocol):
    """What the poller reaches of a connection (ctld/rpc/connection.py Connection)."""

    io: StreamIO
    ready: bool


class Settle(Protocol):
    """Answer readers' held replies once the journal's write is done (readnow.settle_nodes);
    `spawn` starts the task of one that cannot be finished there."""

    def __call__(self, readers: list[Any], spawn: Callable[..., Any]) -> Awaitable[None]: ...


class Reader(Protocol):
    """A connection's reader (ctld/rpc/reading.py FrameReader)."""

    @property
    def conn(self) -> Conn: ...
    async def run(self) -> None: ...
    def quick(self) -> bool: ...
    def only_held(self) -> bool: ...

# EPOLLRDHUP: a peer that closed is woken too (its reader reads the end and leaves)
_WATCH = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLONESHOT
MAX_EVENTS = 1024  # sockets taken per wake-up of the poller; more wait for the next one
GATHER = 0.005  # seconds from one wake-up to the next, at the least, when busy
BUSY = 0.02  # two wake-ups closer than this: busy
GATHER_LONG = 0.02  # the same after a gather that found LONG_FROM sockets or more
LONG_FROM = 4
# frames acted on in the poller's own task between two yields to the rest of rctld: a storm's
# wake-up may find a thousand (~0.1 ms each), the loop's steps stay a few ms (issue 50)
QUICK_SLICE = 64


class IdleNodes:
    """Owns the parked readers (by descriptor) and the epoll they wait on."""

    def __init__(self, ended: Callable[[Any], object], settle: Settle | None = None) -> None:
        """`ended`: the server forgets a connection and closes its socket (a parked one that is
        closed, or every parked one when the poller stops). `settle`: the wake-up's readers
        left with only replies that wait for the journal (a beat that carried a job's end),
        answered with one write in the poller's task (ctld/rpc/readnow.py settle_nodes); None
        (a write that waits on the network, etcd's): each gets its task."""
        self._ended = ended
        self._settle = settle
        self._epoll = select.epoll()
        self._parked: dict[int, Reader] = {}
        self.running = False

    def __len__(self) -> int:
        return len(self._parked)

    def park(self, reader: Reader) -> bool:
        """Hand `reader` over until its socket has bytes (its task then ends); False when it
        cannot be (the poller is not running, the socket is gone): the reader waits itself."""
        sock = reader.conn.io.sock
        if not self.running or sock is None:
            return False
        fd = sock.fileno()
        if fd < 0:
            return False
        try:
            try:
                self._epoll.modify(fd, _WATCH)  # parked before: registered, disarmed
            except FileNotFoundError:
                self._epoll.register(fd, _WATCH)
        except OSError:
            return False
        self._parked[fd] = reader
        return True

    def close(self, conn: Conn) -> bool:
        """Close `conn` now if it is parked (True); else its reader's task, running or about to
        start, sees it closing."""
        sock = conn.io.sock
        fd = sock.fileno() if sock is not None else -1
        reader = self._parked.get(fd)
        if reader is None or reader.conn is not conn:
            return False
        del self._parked[fd]
        self._forget(fd)
        self._ended(conn)
        return True

    def _forget(self, fd: int) -> None:
        try:
            self._epoll.unregister(fd)  # before the socket closes: its number may come back
        except OSError:
            pass

    async def run(self, nursery: trio.Nursery) -> None:
        """Start a task in `nursery` for each parked reader whose socket has bytes (or was
        closed by its peer); at the end (the server stops) close every parked connection."""
        self.running = True
        woke = -math.inf
        gather = 0.0  # how long after the last wake-up the next one waits for more sockets
        alone = -1  # the one socket the last wake-up found (-1: none, or more than one)
        try:
            while True:
                slept = bool(gather) and trio.current_time() < woke + gather
                if slept:  # busy: let a few more gather
                    await trio.sleep_until(woke + gather)
                # sockets found at once (after the gather, mostly): no wait in front of them
                # (trio's registration of the epoll, a step of its loop)
                ready = self._epoll.poll(0, MAX_EVENTS)
                if not ready:
                    await trio.lowlevel.wait_readable(self._epoll.fileno())
                    ready = self._epoll.poll(0, MAX_EVENTS)
                elif not slept:  # each pass yields once: a busy poller never holds rctld up
                    await trio.lowlevel.checkpoint()
                before, woke = woke, trio.current_time()
                # one node's frames in quick succession (a job's start, then its end) are no
                # sign of many nodes: a gather after them was a wake-up for nothing
                last, alone = alone, ready[0][0] if len(ready) == 1 else -1
                busy = before > woke - BUSY and (alone == -1 or alone != last)
                gather = (GATHER_LONG if slept and len(ready) >= LONG_FROM
                          else GATHER if busy else 0.0)
                quick = 0
                held: list[Reader] = []
                for fd, _ in ready:
                    reader = self._parked.pop(fd, None)
                    if reader is None:
                        continue
                    reader.conn.ready = True  # read at once, without a wait
                    if not reader.quick():  # a heartbeat, answered here; else a task
                        if self._settle is not None and reader.only_held():
                            held.append(reader)
                        else:
                            nursery.start_soon(reader.run, name="rpc connection")
                        continue
                    quick += 1
                    if quick % QUICK_SLICE == 0:  # a storm's batch: let the others run
                        await trio.lowlevel.checkpoint()
                if held and self._settle is not None:
                    await self._settle(held, nursery.start_soon)
        finally:
            self.running = False
            parked, self._parked = self._parked, {}
            for fd, reader in parked.items():
                self._forget(fd)
                self._ended(reader.conn)
            self._epoll.close()
