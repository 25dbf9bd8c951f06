"""What rrun makes of a step's tasks: their output (by line, labelled), which node runs which,
how each ended, srun's lines about them and its exit code, and what the signals rrun gets do to
the step; cli/step_io.py moves the bytes.

Ctrl-C as srun 22.05: one prints the tasks' status; two within a second send the tasks SIGINT
(exit 130 where it ends them); a third ends the step (SIGKILL).
"""

from __future__ import annotations

import sys
import time

from ranch.cli.slurm_names import prog

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import signal as _signal
    from collections.abc import Callable
    from typing import Any
else:
    import _signal  # the C module: `signal` imports enum

# A node's connection that closes before its tasks ended: rnoded restarting (systemctl restart,
# an upgrade) reconnects within seconds and carries on; its tasks count as lost only after this.
RECONNECT_WAIT = 60.0
SIGINT, SIGKILL, SIGTERM = _signal.SIGINT, _signal.SIGKILL, _signal.SIGTERM
FORWARDED = (_signal.SIGUSR1, _signal.SIGUSR2, _signal.SIGCONT, _signal.SIGALRM)
# srun 22.05 does not pass these on: they end the step (SIGKILL to its tasks), exit 137
ENDING = (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT)
REPORT_DELAY = 0.1  # a node's tasks that end within this of its first are said on one line


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


class StepTasks:
    """The step's tasks and their ends, as the nodes report them; what rrun says of them and
    the signals it sends (through `send`, the connections')."""

    def __init__(self, granted: dict, args: argparse.Namespace, send: Callable[[str, dict], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.job_id = granted["job_id"]
        self.step_id = granted["step_id"]
        self.name = f"{self.job_id}.{self.step_id}"
        self.nodes: list[str] = list(granted["nodes"])
        self.tasks_of = {n: list(t) for n, t in zip(self.nodes, granted["tasks"], strict=True)}
        self.node_of = {t: n for n, ts in self.tasks_of.items() for t in ts}
        self.ntasks = len(self.node_of)
        self.args = args
        self.send = send  # a frame to every node still connected (StepIO.send_all)
        self.clock = clock
        self.out = Output(self.ntasks, args.label, args.unbuffered)
        self.exits: dict[int, tuple[int, int]] = {}
        self.gone: set[str] = set()  # nodes whose connection closed
        self.lost_at: dict[str, float] = {}  # node -> until when its reconnection is awaited
        self.finished = False
        self.killed = False
        self.aborted = False  # rrun itself ended the step (SIGTERM/HUP/QUIT, Ctrl-C thrice)
        self.terminating = False  # -K sent its SIGTERM
        self.interrupted = False  # Ctrl-C twice: the tasks were sent SIGINT
        self.last_int = -10.0
        self.kill_wait = int(granted.get("kill_wait", 30))
        self.unsaid: dict[str, list[int]] = {}  # node -> its ended tasks not reported yet
        self.report_at: dict[str, float] = {}  # node -> when its unsaid exits are said anyway
        # (task, fd) -> the bytes of its output taken, over every connection of its node: what
        # a restarted rnoded sends again starts there (OutputAck)
        self.received: dict[tuple[int, int], int] = {}
        self.unacked: dict[str, int] = {}  # node -> bytes taken since its last OutputAck
        self.prog = prog("rrun")

    def say(self, text: str) -> None:
        print(f"{self.prog}: {text}", file=sys.stderr, flush=True)

    # -- what the nodes send ---------------------------------------------------------------------

    def take(self, node: str, kind: str, body: dict) -> None:
        task = body.get("task")
        if type(task) is not int or self.node_of.get(task) != node:
            return
        if kind == "TaskOutput":
            fd, data = body.get("fd"), body.get("data")
            if type(fd) is int and isinstance(data, str):
                self.out.write(task, fd, data.encode("latin-1", "replace"))
                self.received[(task, fd)] = self.received.get((task, fd), 0) + len(data)
                self.unacked[node] = self.unacked.get(node, 0) + len(data)
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

    # -- the signals rrun gets and sends ------------------------------------------------------

    def send_signal(self, signum: int) -> None:
        if signum == SIGKILL:
            self.killed = True
        self.send("StepSignal", {"signal": signum})

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

    def exit_code(self) -> int:
        """srun's: the highest task exit code, or 128 + the highest signal that killed one."""
        worst = 0
        for code, sig in self.exits.values():
            worst = max(worst, 128 + sig if sig else code)
        return worst


def _signal_text(signum: int) -> str:
    try:
        return _signal.strsignal(signum) or f"Signal {signum}"
    except ValueError:
        return f"Signal {signum}"
