"""rrun's side of a step's I/O: each node of the step connects to rrun's listener and sends its
tasks' output and exits (frames signed with the step's key); rrun prints them (labelled, by
line), feeds its stdin to the tasks, forwards signals, and works out srun's exit code.

Ctrl-C as srun 22.05: one prints the tasks' status; two within a second send the tasks SIGINT
(exit 130 where it ends them); a third ends the step (SIGKILL).

One poll loop over plain sockets, not trio: importing trio alone cost rrun about 200 ms of CPU
(issue 35), several times srun's whole run. The frames are ranch.protocol.rawframe's with JSON
bodies
in the codec's shape (protocol/stepmessages.py), so rnoded sees what it always saw.
"""

from __future__ import annotations

import _socket
import os
import select
import sys
import time

from ranch.cli.slurm_names import prog
from ranch.cli.step_frames import FrameReader, Nonces, StepFrameError, pack
from ranch.cli.step_output import Output, ranges

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import signal as _signal
    from collections.abc import Callable
    from typing import Any
else:
    import _signal  # the C module: `signal` imports enum

HELLO_TIMEOUT = 60.0  # every node of the step connects within this (it launches in milliseconds)
# A node's connection that closes before its tasks ended: rnoded restarting (systemctl restart,
# an upgrade) reconnects within seconds and carries on; its tasks count as lost only after this.
RECONNECT_WAIT = 60.0
SIGINT, SIGKILL, SIGTERM = _signal.SIGINT, _signal.SIGKILL, _signal.SIGTERM
FORWARDED = (_signal.SIGUSR1, _signal.SIGUSR2, _signal.SIGCONT, _signal.SIGALRM)
# srun 22.05 does not pass these on: they end the step (SIGKILL to its tasks), exit 137
ENDING = (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT)
REPORT_DELAY = 0.1  # a node's tasks that end within this of its first are said on one line
STDIN_CHUNK = 1 << 16
# Stop reading rrun's stdin while a node has this much of it unsent (a slow reader there).
STDIN_BACKLOG = 1 << 20
READ_CHUNK = 1 << 16
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


class StepIO:
    """The step's I/O, run by `run()` in one poll loop: the nodes' connections, rrun's stdin,
    the signals rrun gets (through a wakeup pipe) and timers. `alive`, when given (rrun in an
    allocation of its own), says the allocation's holder still runs, once a second
    (cli/alive.py), from the same loop (its first word was said before the step was asked
    for)."""

    def __init__(self, granted: dict, args: argparse.Namespace, *, alive: Any = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.job_id = granted["job_id"]
        self.step_id = granted["step_id"]
        self.name = f"{self.job_id}.{self.step_id}"
        self.key = bytes.fromhex(granted["key"])
        self.nodes: list[str] = list(granted["nodes"])
        self.tasks_of = {n: list(t) for n, t in zip(self.nodes, granted["tasks"], strict=True)}
        self.node_of = {t: n for n, ts in self.tasks_of.items() for t in ts}
        self.ntasks = len(self.node_of)
        self.args = args
        self.alive = alive
        self.clock = clock
        self.out = Output(self.ntasks, args.label, args.unbuffered)
        self.conns: dict[str, Conn] = {}  # node -> its connection, once it said hello
        self.socks: dict[int, Conn] = {}  # fd -> every open connection
        self.seen = Nonces()  # of the frames taken on every connection (replay guard)
        self.exits: dict[int, tuple[int, int]] = {}
        self.gone: set[str] = set()  # nodes whose connection closed
        self.lost_at: dict[str, float] = {}  # node -> until when its reconnection is awaited
        self.all_connected = False
        self.finished = False
        self.killed = False
        self.aborted = False  # rrun itself ended the step (SIGTERM/HUP/QUIT, Ctrl-C thrice)
        self.terminating = False  # -K sent its SIGTERM
        self.interrupted = False  # Ctrl-C twice: the tasks were sent SIGINT
        self.last_int = -10.0
        self.kill_wait = int(granted.get("kill_wait", 30))
        self.unsaid: dict[str, list[int]] = {}  # node -> its ended tasks not reported yet
        self.report_at: dict[str, float] = {}  # node -> when its unsaid exits are said anyway
        mode = args.input or "all"
        self.stdin_open = mode != "none" and (mode == "all" or mode.isdigit())
        self.prog = prog("rrun")

    def say(self, text: str) -> None:
        print(f"{self.prog}: {text}", file=sys.stderr, flush=True)

    # -- what the nodes send ---------------------------------------------------------------------

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
        return True

    def take(self, node: str, kind: str, body: dict) -> None:
        task = body.get("task")
        if type(task) is not int or self.node_of.get(task) != node:
            return
        if kind == "TaskOutput":
            fd, data = body.get("fd"), body.get("data")
            if type(fd) is int and isinstance(data, str):
                self.out.write(task, fd, data.encode("latin-1", "replace"))
        elif kind == "TaskExit":
            code, sig = body.get("exit_code", 0), body.get("signal", 0)
            if type(code) is not int or type(sig) is not int or task in self.exits:
                return  # said again by a restarted rnoded
            self.out.flush_task(task)
            self.exits[task] = (code, sig)
            # srun reports a node's tasks that end together on one line ("tasks 0-1"): a
            # node's exits are said once all its tasks ended, or a moment after the first
            waiting = self.unsaid.setdefault(node, [])
            waiting.append(task)
            if all(t in self.exits for t in self.tasks_of[node]):
                self.report(node)
            elif len(waiting) == 1:
                self.report_at[node] = self.clock() + REPORT_DELAY
            if len(self.exits) == self.ntasks:
                self.finished = True

    def report(self, node: str) -> None:
        self.report_at.pop(node, None)
        tasks = self.unsaid.pop(node, [])
        groups: dict[tuple[int, int], list[int]] = {}
        for t in tasks:
            groups.setdefault(self.exits[t], []).append(t)
        bad = False
        for (code, sig), ids in groups.items():
            if not code and not sig:
                continue
            bad = True
            what = _signal_text(sig) if sig else f"Exited with exit code {code}"
            word = "task" if len(ids) == 1 else "tasks"
            self.say(f"error: {node}: {word} {ranges(ids)}: {what}")
        if bad and self.args.kill_on_bad_exit and not self.killed and not self.terminating:
            self.terminating = True
            self.say(f"launch/slurm: _step_signal: Terminating StepId={self.name}")
            self.send_signal(SIGTERM)  # srun -K: SIGTERM to the rest

    def node_closed(self, node: str) -> None:
        missing = [t for t in self.tasks_of[node] if t not in self.exits]
        if missing and not self.aborted and node not in self.lost_at:
            self.lost_at[node] = self.clock() + RECONNECT_WAIT  # wait for its rnoded's return
            return
        self.lost_at.pop(node, None)
        if missing:  # the node went away with tasks we never heard end of
            self.say(f"error: {node}: tasks {ranges(missing)}: Unknown exit status "
                     "(node connection lost)")
            for t in missing:
                self.exits[t] = (1, 0)
        if len(self.gone) == len(self.nodes) or len(self.exits) == self.ntasks:
            self.finished = True

    def expire_lost(self, now: float) -> None:
        """Nodes whose rnoded did not come back within RECONNECT_WAIT: their tasks are lost."""
        for node, at in list(self.lost_at.items()):
            if now >= at and node in self.gone:
                self.node_closed(node)

    # -- what rrun sends ---------------------------------------------------------------------

    def send_signal(self, signum: int) -> None:
        if signum == SIGKILL:
            self.killed = True
        self.send_all("StepSignal", {"signal": signum})

    def send_all(self, kind: str, body: dict) -> None:
        for conn in self.conns.values():
            if conn.fd in self.socks:
                conn.outbox += pack(kind, body, self.key)

    def on_signal(self, signum: int) -> None:
        if signum in ENDING:
            if signum == _signal.SIGQUIT:
                self.say("Quit")
            self.abort(waiting=True)
            return
        if signum != SIGINT:
            self.send_signal(signum)
            return
        now = self.clock()
        if self.interrupted and (now - self.last_int <= 1.0 or self.killed):
            self.abort(waiting=False)
            return
        if now - self.last_int <= 1.0:
            self.interrupted = True
            self.last_int = now
            self.say(f"sending Ctrl-C to StepId={self.name}")
            self.send_signal(SIGINT)
            return
        self.last_int = now
        self.say("interrupt (one more within 1 sec to abort)")
        running = [t for t in self.node_of if t not in self.exits]
        done = [t for t in self.node_of if t in self.exits]
        if running:
            self.say(f"StepId={self.name} tasks {ranges(running)}: running")
        if done:
            self.say(f"StepId={self.name} tasks {ranges(done)}: exited")

    def abort(self, *, waiting: bool) -> None:
        """End the step: SIGKILL to every task (srun's SIGTERM/SIGHUP/SIGQUIT, Ctrl-C thrice)."""
        if not self.aborted:
            self.aborted = True
            self.say("forcing job termination")
            if waiting:
                self.say(f"Job step aborted: Waiting up to {self.kill_wait + 2} seconds for "
                         "job step to finish.")
        self.send_signal(SIGKILL)
        # a node whose rnoded is away cannot be told: it gets the wait srun gives the tasks
        until = self.clock() + self.kill_wait + 2
        for node, at in self.lost_at.items():
            self.lost_at[node] = min(at, until)

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
                # a _socket.socket (cli/rrun.py): no accept(); typeshed leaves _accept out
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
            if self.alive is not None and now >= alive_at:
                self.alive.send()
                alive_at = now + self.alive.every
            for node, at in list(self.report_at.items()):
                if now >= at:
                    self.report(node)
            self.expire_lost(now)
            if not self.all_connected and now >= hello_by:
                hello_by = float("inf")
                self.late()
                continue
            for conn in list(self.socks.values()):
                if conn.node is None and now - conn.opened_at >= HELLO_TIMEOUT:
                    self.close(conn)  # connected, never said hello
            # what to wait for, and until when
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
            deadlines = [*self.report_at.values(), *self.lost_at.values(),
                         *(c.opened_at + HELLO_TIMEOUT for c in self.socks.values()
                           if c.node is None)]
            if not self.all_connected:
                deadlines.append(hello_by)
            if self.alive is not None:
                deadlines.append(alive_at)
            wait = max(0.0, min(deadlines) - now) if deadlines else None
            try:
                events = poller.poll(None if wait is None else wait * 1000 + 1)
            except InterruptedError:
                events = []
            for fd, ev in events:
                if fd == wake_r:
                    for signum in _drain(wake_r):
                        self.on_signal(signum)
                elif fd == lfd:
                    self.accept(listener)
                elif wanted.get(fd) == "stdin":
                    self.read_stdin()
                elif wanted.get(fd) == "alive":
                    self.alive.receive()
                else:
                    ready = self.socks.get(fd)
                    if ready is None:
                        continue
                    if ev & POLLOUT:
                        self.flush(ready)
                    if ev & (POLLIN | POLLGONE):
                        self.receive(ready)
        for node in list(self.unsaid):
            self.report(node)

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

    def exit_code(self) -> int:
        """srun's: the highest task exit code, or 128 + the highest signal that killed one."""
        worst = 0
        for code, sig in self.exits.values():
            worst = max(worst, 128 + sig if sig else code)
        return worst


def _ignore(signum: int, frame: object) -> None:
    """The handler while the loop runs: the wakeup pipe tells the loop which signal came."""


def _drain(fd: int) -> bytes:
    try:
        return os.read(fd, 512)
    except (BlockingIOError, InterruptedError):
        return b""


def _signal_text(signum: int) -> str:
    try:
        return _signal.strsignal(signum) or f"Signal {signum}"
    except ValueError:
        return f"Signal {signum}"


def run(listener: _socket.socket, granted: dict, args: argparse.Namespace, *,
        alive: Any = None) -> int:
    return StepIO(granted, args, alive=alive).run(listener)
