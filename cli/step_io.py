"""rrun's side of a step's I/O: each node of the step connects to rrun's listener and sends its
tasks' output and exits (frames signed with the step's key); rrun prints them (labelled, by
line), feeds its stdin to the tasks, forwards signals, and works out srun's exit code.

Ctrl-C as srun 22.05: one prints the tasks' status; two within a second send the tasks SIGINT
(exit 130 where it ends them); a third ends the step (SIGKILL).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from typing import Any

import trio

from cli.slurm_names import prog
from protocol.errors import ProtocolError
from protocol.messages import StepHello, StepSignal, TaskExit, TaskInput, TaskOutput
from protocol.tcp import FramedStream, PeerClosed

HELLO_TIMEOUT = 60.0  # every node of the step connects within this (it launches in milliseconds)
FORWARDED = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT, signal.SIGALRM)
# srun 22.05 does not pass these on: they end the step (SIGKILL to its tasks), exit 137
ENDING = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
LOST = (PeerClosed, trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def ranges(ids: list[int]) -> str:
    """0-2,5: how srun names a group of tasks."""
    ids = sorted(ids)
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


class Output:
    """Task output to rrun's stdout/stderr: by whole lines (with --label, "N: " first) unless
    --unbuffered without a label."""

    def __init__(self, ntasks: int, label: bool, unbuffered: bool) -> None:
        self.width = len(str(max(0, ntasks - 1)))
        self.label = label
        self.by_line = label or not unbuffered
        self.partial: dict[tuple[int, int], bytes] = {}
        self.files = {1: sys.stdout.buffer, 2: sys.stderr.buffer}

    def write(self, task: int, fd: int, data: bytes) -> None:
        out = self.files.get(fd, self.files[2])
        if not self.by_line:
            out.write(data)
            out.flush()
            return
        data = self.partial.pop((task, fd), b"") + data
        head, sep, rest = data.rpartition(b"\n")
        if rest:
            self.partial[(task, fd)] = rest
        if sep:
            self._lines(out, task, head + sep)
            out.flush()

    def flush_task(self, task: int) -> None:
        for fd in (1, 2):
            rest = self.partial.pop((task, fd), b"")
            if rest:
                out = self.files[fd]
                self._lines(out, task, rest)
                out.flush()

    def _lines(self, out: Any, task: int, data: bytes) -> None:
        if not self.label:
            out.write(data)
            return
        prefix = f"{task:>{self.width}}: ".encode()
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        out.write(b"".join(prefix + line + b"\n" for line in lines))


class StepIO:
    def __init__(self, granted: dict, args: argparse.Namespace) -> None:
        self.job_id = granted["job_id"]
        self.step_id = granted["step_id"]
        self.name = f"{self.job_id}.{self.step_id}"
        self.key = bytes.fromhex(granted["key"])
        self.nodes: list[str] = list(granted["nodes"])
        self.tasks_of = {n: list(t) for n, t in zip(self.nodes, granted["tasks"], strict=True)}
        self.node_of = {t: n for n, ts in self.tasks_of.items() for t in ts}
        self.ntasks = len(self.node_of)
        self.args = args
        self.out = Output(self.ntasks, args.label, args.unbuffered)
        self.conns: dict[str, FramedStream] = {}
        self.exits: dict[int, tuple[int, int]] = {}
        self.gone: set[str] = set()  # nodes whose connection closed
        self.all_connected = trio.Event()
        self.finished = trio.Event()
        self.killed = False
        self.aborted = False  # rrun itself ended the step (SIGTERM/HUP/QUIT, Ctrl-C thrice)
        self.terminating = False  # -K sent its SIGTERM
        self.interrupted = False  # Ctrl-C twice: the tasks were sent SIGINT
        self.kill_wait = int(granted.get("kill_wait", 30))
        self.unsaid: dict[str, list[int]] = {}  # node -> its ended tasks not reported yet
        self.prog = prog("rrun")

    def say(self, text: str) -> None:
        print(f"{self.prog}: {text}", file=sys.stderr, flush=True)

    # -- the nodes' connections ------------------------------------------------------------------

    async def serve(self, stream: trio.SocketStream) -> None:
        fs = FramedStream(stream, self.key)
        node = None
        try:
            with trio.move_on_after(HELLO_TIMEOUT) as scope:
                frame = await fs.receive()
            if scope.cancelled_caught:
                return
            hello = frame.msg
            if not isinstance(hello, StepHello) or (hello.job_id, hello.step_id) != (
                    self.job_id, self.step_id) or hello.node not in self.tasks_of \
                    or hello.node in self.conns:
                return
            node = hello.node
            self.conns[node] = fs
            if len(self.conns) == len(self.nodes):
                self.all_connected.set()
            async for msg in fs.messages():
                self.take(node, msg)
        except LOST:
            pass
        except ProtocolError:
            pass  # not signed with the step's key: not one of our nodes
        finally:
            if node is not None:
                self.gone.add(node)
                self.node_closed(node)
            with trio.move_on_after(1):
                await fs.aclose()

    def take(self, node: str, msg: Any) -> None:
        if isinstance(msg, TaskOutput) and self.node_of.get(msg.task) == node:
            self.out.write(msg.task, msg.fd, msg.data.encode("latin-1"))
        elif isinstance(msg, TaskExit) and self.node_of.get(msg.task) == node:
            self.out.flush_task(msg.task)
            self.exits[msg.task] = (msg.exit_code, msg.signal)
            # srun reports a node's tasks that end together on one line ("tasks 0-1"): a
            # node's exits are said once all its tasks ended, or a moment after the first
            waiting = self.unsaid.setdefault(node, [])
            waiting.append(msg.task)
            if all(t in self.exits for t in self.tasks_of[node]):
                self.report(node)
            elif len(waiting) == 1:
                self.nursery.start_soon(self.report_soon, node)
            if len(self.exits) == self.ntasks:
                self.finished.set()

    async def report_soon(self, node: str) -> None:
        await trio.sleep(0.1)
        self.report(node)

    def report(self, node: str) -> None:
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
            self.kill_soon(signal.SIGTERM)  # srun -K: SIGTERM to the rest

    def node_closed(self, node: str) -> None:
        missing = [t for t in self.tasks_of[node] if t not in self.exits]
        if missing:  # the node went away with tasks we never heard end of
            self.say(f"error: {node}: tasks {ranges(missing)}: Unknown exit status "
                     "(node connection lost)")
            for t in missing:
                self.exits[t] = (1, 0)
        if len(self.gone) == len(self.nodes) or len(self.exits) == self.ntasks:
            self.finished.set()

    # -- what rrun sends ---------------------------------------------------------------------

    def kill_soon(self, signum: int) -> None:
        if signum == signal.SIGKILL:
            self.killed = True
        self.nursery.start_soon(self.send_all, StepSignal(signum))

    async def send_all(self, msg: Any) -> None:
        for fs in list(self.conns.values()):
            try:
                await fs.send(msg, 0)
            except LOST:
                pass

    async def signals(self) -> None:
        last_int = -10.0
        with trio.open_signal_receiver(signal.SIGINT, *FORWARDED, *ENDING) as received:
            async for signum in received:
                if signum in ENDING:
                    if signum == signal.SIGQUIT:
                        self.say("Quit")
                    self.abort(waiting=True)
                    continue
                if signum != signal.SIGINT:
                    self.kill_soon(signum)
                    continue
                now = trio.current_time()
                if self.interrupted and (now - last_int <= 1.0 or self.killed):
                    self.abort(waiting=False)
                    continue
                if now - last_int <= 1.0:
                    self.interrupted = True
                    last_int = now
                    self.say(f"sending Ctrl-C to StepId={self.name}")
                    self.kill_soon(signal.SIGINT)
                    continue
                last_int = now
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
        self.kill_soon(signal.SIGKILL)

    async def stdin(self) -> None:
        """rrun's stdin to the tasks that read it (-i all or a task id), then end of file."""
        mode = self.args.input or "all"
        if mode == "none" or not (mode == "all" or mode.isdigit()):
            return
        await self.all_connected.wait()
        while True:
            try:
                data = await trio.to_thread.run_sync(os.read, 0, 1 << 16,
                                                     abandon_on_cancel=True)
            except OSError:
                data = b""
            await self.send_all(TaskInput(data.decode("latin-1"), eof=not data))
            if not data:
                return

    async def main(self, listener: socket.socket) -> int:
        sock = trio.socket.from_stdlib_socket(listener)
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            nursery.start_soon(trio.serve_listeners, self.serve,
                               [trio.SocketListener(sock)])
            nursery.start_soon(self.signals)
            nursery.start_soon(self.stdin)
            with trio.move_on_after(HELLO_TIMEOUT) as scope:
                await self.all_connected.wait()
            if scope.cancelled_caught:
                late = [n for n in self.nodes if n not in self.conns]
                self.say(f"error: nodes {','.join(late)} did not start their tasks of "
                         f"StepId={self.name} within {HELLO_TIMEOUT:g} s")
                for n in late:
                    for t in self.tasks_of[n]:
                        self.exits.setdefault(t, (1, 0))
                if len(self.exits) == self.ntasks:
                    self.finished.set()
                self.kill_soon(signal.SIGKILL)
            await self.finished.wait()
            for node in list(self.unsaid):
                self.report(node)
            nursery.cancel_scope.cancel()
        if self.interrupted and not self.aborted:
            self.say("forcing job termination")  # srun says it once the Ctrl-C'd step ended
        elif not self.aborted and any(sig for _, sig in self.exits.values()):
            self.say(f"Force Terminated StepId={self.name}")
        return self.exit_code()

    def exit_code(self) -> int:
        """srun's: the highest task exit code, or 128 + the highest signal that killed one."""
        worst = 0
        for code, sig in self.exits.values():
            worst = max(worst, 128 + sig if sig else code)
        return worst


def _signal_text(signum: int) -> str:
    try:
        return signal.strsignal(signum) or f"Signal {signum}"
    except ValueError:
        return f"Signal {signum}"


def run(listener: socket.socket, granted: dict, args: argparse.Namespace) -> int:
    return trio.run(StepIO(granted, args).main, listener)
