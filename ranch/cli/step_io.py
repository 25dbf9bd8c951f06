"""rrun's side of a step's I/O: each node of the step connects to rrun's listener and sends its
tasks' output and exits (frames signed with the step's key); rrun prints them (labelled, by
line; cli/step_tasks.py keeps the tasks' account), feeds its stdin to the tasks, forwards
signals, and works out srun's exit code.

One poll loop over plain sockets, not trio: importing trio alone cost rrun about 200 ms of CPU
(issue 35), several times srun's whole run. The frames are ranch.protocol.rawframe's with JSON
bodies
in the codec's shape (protocol/stepmessages.py), so rnoded sees what it always saw.
"""

from __future__ import annotations

import _socket
import os
import select
import time

from ranch.cli.step_frames import FrameReader, Nonces, StepFrameError, pack
from ranch.cli.step_tasks import ENDING, FORWARDED, SIGINT, SIGKILL, StepTasks

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import signal as _signal
    from collections.abc import Callable
    from typing import Any
else:
    import _signal  # the C module: `signal` imports enum

HELLO_TIMEOUT = 60.0  # every node of the step connects within this (it launches in milliseconds)
STDIN_CHUNK = 1 << 16
# Stop reading rrun's stdin while a node has this much of it unsent (a slow reader there).
STDIN_BACKLOG = 1 << 20
READ_CHUNK = 1 << 16
# A node hears how much output rrun took (OutputAck) after this much more of it: it keeps what
# it sent until then, to send again after an rnoded restart (noded/stepspool.py)
ACK_EVERY = 1 << 20
POLLIN, POLLOUT = select.POLLIN, select.POLLOUT
POLLGONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


class Conn:
    """One node's I/O connection: bytes in (framed), frames out (buffered until it takes them)."""

    __slots__ = ("fd", "node", "opened_at", "outbox", "reader", "sock")

    def __init__(self, sock: _socket.socket, key: bytes, opened_at: float,
                 seen: Nonces) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.node: str | None = None  # known once its StepHello checked out
        self.opened_at = opened_at
        self.reader = FrameReader(key, seen)
        self.outbox = bytearray()


class StepIO(StepTasks):
    """The step's I/O, run by `run()` in one poll loop: the nodes' connections, rrun's stdin,
    the signals rrun gets (through a wakeup pipe) and timers. `alive`, when given (rrun in an
    allocation of its own), says the allocation's holder still runs, once a second
    (cli/alive.py), from the same loop (its first word was said before the step was asked
    for)."""

    def __init__(self, granted: dict, args: argparse.Namespace, *, alive: Any = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(granted, args, self.send_all, clock)
        self.key = bytes.fromhex(granted["key"])
        self.alive = alive
        self.conns: dict[str, Conn] = {}  # node -> its connection, once it said hello
        self.socks: dict[int, Conn] = {}  # fd -> every open connection
        self.seen = Nonces()  # of the frames taken on every connection (replay guard)
        self.all_connected = False
        mode = args.input or "all"
        self.stdin_open = mode != "none" and (mode == "all" or mode.isdigit())

    def hello(self, conn: Conn, kind: str, body: dict) -> bool:
        """A connection's first frame: True when it is one of the step's nodes, not yet seen."""
        node = body.get("node")
        if kind != "StepHello" or (body.get("job_id"), body.get("step_id")) != (
                self.job_id, self.step_id) or not isinstance(node, str) \
                or node not in self.tasks_of:
            return False
        old = self.conns.get(node)
        if old is not None:
            # a restarted rnoded carrying on with the step (signed with the step's key): the
            # old connection, if rrun has not yet seen it close, is done with
            if self.socks.get(old.fd) is old:  # (a closed one's fd may be this one's now)
                del self.socks[old.fd]
                old.sock.close()
            self.gone.discard(node)
            self.lost_at.pop(node, None)
            conn.outbox += old.outbox  # a signal or stdin not yet sent there
        conn.node = node
        self.conns[node] = conn
        if len(self.conns) == len(self.nodes):
            self.all_connected = True
        self.ack(node)  # where a restarted rnoded sends on from (none on a first connection)
        return True

    def ack(self, node: str) -> None:
        """OutputAck to `node`: the output of its tasks taken so far (an rnoded from before
        it skips the frame)."""
        conn = self.conns[node]
        tasks = self.tasks_of[node]
        counts = [[t, fd, n] for (t, fd), n in self.received.items() if t in tasks]
        conn.outbox += pack("OutputAck", {"received": counts}, self.key)
        self.unacked[node] = 0

    # -- what rrun sends ---------------------------------------------------------------------

    def send_all(self, kind: str, body: dict) -> None:
        for conn in self.conns.values():
            if conn.fd in self.socks:
                conn.outbox += pack(kind, body, self.key)

    def read_stdin(self) -> None:
        """A piece of rrun's stdin to the tasks that read it (-i all or a task id); at its end,
        end of file."""
        try:
            data = os.read(0, STDIN_CHUNK)
        except OSError:
            data = b""
        self.send_all("TaskInput", {"data": data.decode("latin-1"), "eof": not data})
        if not data:
            self.stdin_open = False

    # -- the loop ----------------------------------------------------------------------------

    def accept(self, listener: _socket.socket) -> None:
        while True:
            try:
                # a _socket.socket (cli/step_launch.py): no accept(); typeshed leaves _accept out
                fd, _ = listener._accept()  # type: ignore[attr-defined]
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # out of descriptors, a connection reset before it was taken
            sock = _socket.socket(fileno=fd)
            sock.setblocking(False)
            conn = Conn(sock, self.key, self.clock(), self.seen)
            self.socks[conn.fd] = conn

    def receive(self, conn: Conn) -> None:
        try:
            data = conn.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.close(conn)
            return
        conn.reader.feed(data)
        while conn.fd in self.socks:
            try:
                got = conn.reader.next_frame()
            except StepFrameError as exc:
                if exc.fatal or conn.node is None:
                    self.close(conn)  # out of sync, or not one of our nodes
                continue  # a refused frame that leaves the stream in sync is skipped
            if got is None:
                return
            if conn.node is None:
                if not self.hello(conn, *got):
                    self.close(conn)
            else:
                self.take(conn.node, *got)
                if self.unacked.get(conn.node, 0) >= ACK_EVERY:
                    self.ack(conn.node)

    def flush(self, conn: Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbox)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            conn.outbox.clear()  # the node went away: what it would have got is moot
            return
        del conn.outbox[:sent]

    def close(self, conn: Conn) -> None:
        if self.socks.pop(conn.fd, None) is None:
            return
        conn.sock.close()
        if conn.node is not None:
            self.gone.add(conn.node)
            self.node_closed(conn.node)

    def run(self, listener: _socket.socket) -> int:
        listener.setblocking(False)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        saved = {sig: _signal.signal(sig, _ignore) for sig in (SIGINT, *FORWARDED, *ENDING)}
        old_wakeup = _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        try:
            self.loop(listener, wake_r)
        finally:
            _signal.set_wakeup_fd(old_wakeup)
            for sig, old in saved.items():
                _signal.signal(sig, old)
            os.close(wake_r)
            os.close(wake_w)
            for conn in list(self.socks.values()):
                self.flush(conn)  # a last signal or eof, where the node still takes it
                conn.sock.close()
            self.socks.clear()
            if self.alive is not None:
                self.alive.close()
        if self.interrupted and not self.aborted:
            self.say("forcing job termination")  # srun says it once the Ctrl-C'd step ended
        elif not self.aborted and any(sig for _, sig in self.exits.values()):
            self.say(f"Force Terminated StepId={self.name}")
        return self.exit_code()

    def loop(self, listener: _socket.socket, wake_r: int) -> None:
        start = self.clock()
        hello_by = start + HELLO_TIMEOUT
        alive_at = start + (self.alive.every if self.alive is not None else 0.0)  # after first()
        lfd = listener.fileno()
        while not self.finished:
            now = self.clock()
            alive_at = self.timers(now, alive_at)
            if not self.all_connected and now >= hello_by:
                hello_by = float("inf")
                self.late()
                continue
            for conn in list(self.socks.values()):
                if conn.node is None and now - conn.opened_at >= HELLO_TIMEOUT:
                    self.close(conn)  # connected, never said hello
            poller, wanted = self.poller(lfd, wake_r)
            wait = self.wait(now, hello_by, alive_at)
            try:
                events = poller.poll(None if wait is None else wait * 1000 + 1)
            except InterruptedError:
                events = []
            for fd, ev in events:
                self.event(fd, ev, wanted, listener, wake_r)
        for node in list(self.unsaid):
            self.report(node)

    def timers(self, now: float, alive_at: float) -> float:
        """What is due by `now`: the holder's alive word, exits to report, lost nodes; returns
        when the next alive word is due."""
        if self.alive is not None and now >= alive_at:
            self.alive.send()
            alive_at = now + self.alive.every
        for node, at in list(self.report_at.items()):
            if now >= at:
                self.report(node)
        self.expire_lost(now)
        return alive_at

    def poller(self, lfd: int, wake_r: int) -> tuple[select.poll, dict[int, Any]]:
        """What to wait for: the listener, the wakeup pipe, each connection (and its outbox),
        rrun's stdin while the nodes keep up, the alive word's answer; fd -> what it is."""
        wanted: dict[int, Any] = {lfd: None, wake_r: None}
        poller = select.poll()
        poller.register(lfd, POLLIN)
        poller.register(wake_r, POLLIN)
        for fd, conn in self.socks.items():
            poller.register(fd, POLLIN | (POLLOUT if conn.outbox else 0))
            wanted[fd] = conn
        backlog = max((len(c.outbox) for c in self.socks.values()), default=0)
        if self.stdin_open and self.all_connected and backlog < STDIN_BACKLOG:
            poller.register(0, POLLIN)
            wanted[0] = "stdin"
        alive_fd = self.alive.fileno() if self.alive is not None else -1
        if alive_fd >= 0:
            poller.register(alive_fd, POLLIN)
            wanted[alive_fd] = "alive"
        return poller, wanted

    def wait(self, now: float, hello_by: float, alive_at: float) -> float | None:
        """Seconds until the next deadline (None: none, wait for an event)."""
        deadlines = [*self.report_at.values(), *self.lost_at.values(),
                     *(c.opened_at + HELLO_TIMEOUT for c in self.socks.values()
                       if c.node is None)]
        if not self.all_connected:
            deadlines.append(hello_by)
        if self.alive is not None:
            deadlines.append(alive_at)
        return max(0.0, min(deadlines) - now) if deadlines else None

    def event(self, fd: int, ev: int, wanted: dict[int, Any], listener: _socket.socket,
              wake_r: int) -> None:
        """One descriptor the poll found ready."""
        if fd == wake_r:
            for signum in _drain(wake_r):
                self.on_signal(signum)
        elif fd == listener.fileno():
            self.accept(listener)
        elif wanted.get(fd) == "stdin":
            self.read_stdin()
        elif wanted.get(fd) == "alive":
            self.alive.receive()
        else:
            ready = self.socks.get(fd)
            if ready is None:
                return
            if ev & POLLOUT:
                self.flush(ready)
            if ev & (POLLIN | POLLGONE):
                self.receive(ready)

    def late(self) -> None:
        """Not every node connected within HELLO_TIMEOUT: their tasks count as failed."""
        late = [n for n in self.nodes if n not in self.conns]
        self.say(f"error: nodes {','.join(late)} did not start their tasks of "
                 f"StepId={self.name} within {HELLO_TIMEOUT:g} s")
        for n in late:
            for t in self.tasks_of[n]:
                self.exits.setdefault(t, (1, 0))
        if len(self.exits) == self.ntasks:
            self.finished = True
        self.send_signal(SIGKILL)


def _ignore(signum: int, frame: object) -> None:
    """The handler while the loop runs: the wakeup pipe tells the loop which signal came."""


def _drain(fd: int) -> bytes:
    try:
        return os.read(fd, 512)
    except (BlockingIOError, InterruptedError):
        return b""


def run(listener: _socket.socket, granted: dict, args: argparse.Namespace, *,
        alive: Any = None) -> int:
    return StepIO(granted, args, alive=alive).run(listener)
