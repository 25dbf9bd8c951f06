"""A step's tasks on this node behind their supervisor (noded/stepshim.py): starting them, and
finding them again after an rnoded restart (the shim's records and its open pipes).

rnoded keeps the read ends of the tasks' output pipes, and so does the shim; rnoded dying leaves
the pipes open (the tasks block once one is full, they never get SIGPIPE), and the next rnoded
reopens the shim's ends through /proc/PID/fd/N, so no output is lost. A task's stdin pipe is
rnoded's alone: it reaches end of file when rnoded stops.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import trio

from ranch.noded import stepstore
from ranch.noded.joblaunch import LaunchError
from ranch.noded.runningjob import alive
from ranch.noded.stepspool import hang_up
from ranch.noded.taskenv import (
    OpenError,
    exec_error,
    expand,
    open_out,
    task_argv,
    task_environment,
)
from ranch.protocol.messages import StepEnd, StepSpec

log = logging.getLogger("rnoded.steps")

STEPSHIM = str(Path(__file__).with_name("stepshim.py"))
SHIM_TIMEOUT = 30.0  # the shim answers within milliseconds; this only bounds a wedged start
LEFTOVERS_TIMEOUT = 10.0  # the shim's kill of what the tasks left behind, once they ended


@attrs.frozen(eq=False)
class Held:
    """What rnoded holds of a step's tasks: their record, their shim (its process when this
    rnoded started it), its stdout and the tasks' output pipes, the tasks' pids."""

    path: Path
    shim: tuple[int, int]  # (pid, start ticks)
    pids: dict[int, int]  # task -> its pid (its process group)
    outputs: list[tuple[int, int, trio.abc.ReceiveStream, bool]]
    status: trio.abc.ReceiveStream | None
    proc: trio.Process | None = None


@attrs.define(eq=False)
class RunningStep:
    spec: StepSpec
    started_at: float
    held: Held | None = None  # its shim and pipes, once it has some
    exits: dict[int, tuple[int, int]] = attrs.Factory(dict)  # task -> (exit code, signal)
    fs: Any = None  # the FramedStream to rrun
    ending: str = ""  # CANCELLED once it was asked to end
    done: trio.Event = attrs.Factory(trio.Event)
    stdin: dict[int, trio.abc.SendStream] = attrs.Factory(dict)
    pumps: dict[int, int] = attrs.Factory(dict)  # task -> its output pipes still open
    drained: dict[int, trio.Event] = attrs.Factory(dict)  # task -> its pipes reached EOF
    opened: set[str] = attrs.Factory(set)  # -o/-e files this step opened here
    failed: dict[int, tuple[str, int]] = attrs.Factory(dict)  # task -> (what to say, code)
    adopted: bool = False  # found in the spool by a restarted rnoded
    out: Any = None  # its output's spools (noded/stepspool.py) when rrun acknowledges it

    @property
    def path(self) -> Path | None:
        return self.held.path if self.held is not None else None

    @property
    def running(self) -> bool:
        """A task of it has not exited: only such a step ends CANCELLED when asked to end."""
        return len(self.exits) < len(self.spec.tasks)

    @property
    def pids(self) -> dict[int, int]:
        return self.held.pids if self.held is not None else {}


class LineReader:
    """Lines of the shim's stdout; None at end of file."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream, self.buf = stream, b""

    async def readline(self) -> str | None:
        while b"\n" not in self.buf:
            try:
                data = await self.stream.receive_some(4096)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                return None
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode(errors="replace")

    def take(self) -> bytes:
        """What was read beyond the last line."""
        data, self.buf = self.buf, b""
        return data


async def start_tasks(step: RunningStep, job: Any, *, node: str, spool_dir: str,
                      ident: dict | Exception, python: str = sys.executable) -> Held | None:
    """Open each task's files and pipes, then start the step's shim; returns once the tasks run
    (those that could not start: step.failed; None when none could). LaunchError: the shim
    itself could not start (its record is gone then)."""
    spec, js = step.spec, job.spec
    theirs: list[Any] = []  # descriptors and files the shim gets; ours closed once it runs
    outputs: list[list] = []  # [task, fd, our read end, forwarded to rrun]
    try:
        tasks = _open_tasks(step, js, node, ident, theirs, outputs)
        if not tasks:  # none started: the pipes made for them have no reader
            for o in outputs:
                os.close(o[2])
            return None
        assert not isinstance(ident, Exception)
        launch = {"tasks": tasks, "cwd": spec.cwd, "drop": ident["drop"], "uid": ident["uid"],
                  "gid": ident["gid"], "groups": ident["groups"],
                  "hold": [o[2] for o in outputs], "outputs": outputs,
                  "failed": {t: code for t, (_, code) in step.failed.items()}}
        path, log = await trio.to_thread.run_sync(_record, spool_dir, spec, step.started_at,
                                                  launch)
        passed = sorted({fd for t in tasks for fd in t[3:] if fd >= 0} | set(launch["hold"]))
        try:
            proc = await trio.lowlevel.open_process(
                [python, "-S", "-E", STEPSHIM, str(path)], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=log, pass_fds=passed, start_new_session=True)
        except OSError as exc:
            await trio.to_thread.run_sync(stepstore.remove, path)
            raise LaunchError(f"cannot start the step's supervisor on {node}: {exc}") from None
        finally:
            log.close()
    except BaseException:
        for o in outputs:
            os.close(o[2])
        raise
    finally:
        for f in theirs:
            os.close(f) if isinstance(f, int) else f.close()
    streams: list[tuple[int, int, trio.abc.ReceiveStream, bool]] = [
        (t, fd, trio.lowlevel.FdStream(r), fwd) for t, fd, r, fwd in outputs]
    assert proc.stdout is not None
    reader = LineReader(proc.stdout)
    line = None
    with trio.move_on_after(SHIM_TIMEOUT):
        line = await reader.readline()
    pids = await trio.to_thread.run_sync(stepstore.load_pids, path)
    if line != "ok" or pids is None:
        with trio.CancelScope(shield=True):
            why = await _abandon(step, proc, streams, pids, path)
        raise LaunchError(f"the step's supervisor on {node} failed: {why}")
    _failures(step, pids, node)
    return Held(path, _shim_of(pids), _pids_of(pids), streams, _Rest(reader), proc)


def _open_tasks(step: RunningStep, js: Any, node: str, ident: dict | Exception, theirs: list,
                outputs: list) -> list[list]:
    """Each task's [task, argv, env, stdin, stdout, stderr] for the shim; a task that cannot
    start goes into step.failed instead. Sets up each task's output drain."""
    spec = step.spec
    tasks: list[list] = []
    for local, task in enumerate(spec.tasks):
        env = task_environment(spec, node, local, task, js.cpus)
        try:
            if isinstance(ident, Exception):
                raise ident
            argv = task_argv(spec, env)
            fds = _task_fds(step, task, js, node, theirs, outputs)
        except (OSError, LaunchError) as exc:
            code = 1 if isinstance(exc, OpenError) else 2  # slurmstepd: exit 1, execve: 2
            step.failed[task] = (exec_error(spec, exc, node), code)
            continue
        if fds[0] == -2:  # stdin from rrun
            r, w = os.pipe()
            theirs.append(r)
            step.stdin[task] = trio.lowlevel.FdStream(w)
            fds[0] = r
        tasks.append([task, argv, env, *fds])
    for task in spec.tasks:
        step.drained[task] = trio.Event()
        step.pumps[task] = sum(1 for o in outputs if o[0] == task)
        if not step.pumps[task]:
            step.drained[task].set()
    return tasks


async def _abandon(step: RunningStep, proc: trio.Process, streams: list, pids: dict | None,
                   path: Path) -> str:
    """A shim that did not say ok: it, its pipes and any task it started end, its record goes;
    returns why it failed (its log's last line)."""
    assert proc.stdout is not None
    proc.kill()
    await proc.wait()
    await proc.stdout.aclose()
    for _, _, stream, _ in streams:
        await stream.aclose()
    for pipe in step.stdin.values():  # rrun's stdin for tasks that never ran
        await pipe.aclose()
    step.stdin.clear()
    for task_pid in (_pids_of(pids).values() if pids is not None else ()):
        try:  # tasks the shim started before it failed: in sessions of their own
            os.killpg(task_pid, signal.SIGKILL)
        except OSError:
            pass
    why = _shim_log(path) or "no answer"
    await trio.to_thread.run_sync(stepstore.remove, path)
    return why


def _task_fds(step: RunningStep, task: int, js: Any, node: str, theirs: list,
              outputs: list) -> list[int]:
    """[stdin, stdout, stderr] of one task as descriptors for the shim (stdin -1: /dev/null,
    -2: a pipe from rrun); pipes to rnoded for what goes to rrun."""
    spec = step.spec

    def path(pattern: str) -> str:  # %A %a: the array's, when the job is an array task
        return expand(pattern, spec, node, task, js.name, js.array_job_id, js.array_task_id)

    def opened(which: str, name: str, how: Any) -> int:
        try:
            f = how(name)
        except OSError as exc:
            raise OpenError(which, name, exc) from None
        theirs.append(f)
        return f.fileno()

    def pipe(fd: int) -> int:
        r, w = os.pipe()
        theirs.append(w)
        outputs.append([task, fd, r, True])
        return w

    out = err = -1
    if spec.stdout:
        out = err = opened("stdout", path(spec.stdout),
                           lambda p: open_out(p, spec.stdout, step.opened))
    if spec.stderr:
        err = opened("stderr", path(spec.stderr), lambda p: open_out(p, spec.stderr, step.opened))
    if out < 0:
        out = pipe(1)
    if err < 0:
        err = pipe(2)
    wants_input = spec.input in ("", "all") or spec.input == str(task)
    if spec.input not in ("", "all", "none") and not spec.input.isdigit():
        stdin = opened("stdin", path(spec.input), lambda p: open(p, "rb"))
    else:
        stdin = -2 if wants_input else -1
    return [stdin, out, err]


def _record(spool_dir: str, spec: StepSpec, started_at: float, launch: dict) -> tuple[Path, Any]:
    path = stepstore.create(spool_dir, spec, started_at, launch)
    return path, open(path / "shim.log", "wb")


def _shim_log(path: Path) -> str:
    try:
        return (path / "shim.log").read_text(errors="replace").strip()[-500:]
    except OSError:
        return ""


def _shim_of(pids: dict) -> tuple[int, int]:
    return int(pids["shim_pid"]), int(pids["shim_start"])


def _pids_of(pids: dict) -> dict[int, int]:
    return {int(t): int(p) for t, p in pids["tasks"].items()}


def _failures(step: RunningStep, pids: dict, node: str) -> None:
    """The tasks the shim could not start, and what slurmstepd says of them."""
    for task, text in pids["failed"].items():
        code, _, why = text.partition(" ")
        exc = OSError(int(code), why) if code.isdigit() and int(code) else OSError(why)
        step.failed[int(task)] = (exec_error(step.spec, exc, node), 2)


class _Rest(trio.abc.ReceiveStream):
    """The shim's stdout after its first line, the bytes already read coming first."""

    def __init__(self, reader: LineReader) -> None:
        self.reader = reader

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        data = self.reader.take()
        if data:
            return bytes(data)
        return bytes(await self.reader.stream.receive_some(max_bytes))

    async def aclose(self) -> None:
        await self.reader.stream.aclose()


async def found(path: Path, node: str) -> RunningStep | StepEnd | None:
    """A step record in the spool as a restarted rnoded finds it: its end, not yet acknowledged;
    or the step, to carry on with; or None, a start cut short (the record goes)."""
    end = await trio.to_thread.run_sync(stepstore.load_end, path)
    if end is not None:
        return end
    spec = await trio.to_thread.run_sync(stepstore.load_spec, path)
    pids = await trio.to_thread.run_sync(stepstore.load_pids, path)
    launch = await trio.to_thread.run_sync(stepstore.read_marshal, path / "launch.bin")
    if spec is None or pids is None or launch is None:
        # rnoded stopped while starting it: nothing of it is known to run
        log.warning("dropping the record of a step whose start was cut short: %s", path)
        await trio.to_thread.run_sync(stepstore.remove, path)
        return None
    return _reopen(*spec, path, pids, launch)


def _reopen(spec: StepSpec, started_at: float, path: Path, pids: dict, launch: dict
            ) -> RunningStep:
    """The step with the shim's stdout and the tasks' output pipes, reopened through the
    shim's descriptors while it runs. Tasks whose pipes are gone (the shim with them) count
    as drained; those that never started as ended (the rnoded that started them said so)."""
    exits = {int(t): (2, 0) for t in pids["failed"]}
    exits.update({int(t): (int(code), 0) for t, code in launch.get("failed", {}).items()})
    pid, start = _shim_of(pids)
    status = None
    outputs: list[tuple[int, int, trio.abc.ReceiveStream, bool]] = []
    if alive(pid, start):
        try:
            status = trio.lowlevel.FdStream(os.open(f"/proc/{pid}/fd/1", os.O_RDONLY))
        except OSError as exc:
            if exc.errno != errno.ENOENT:  # ENOENT: closed, every task ended
                raise
        for task, fd, held, forward in launch["outputs"]:
            try:
                r = os.open(f"/proc/{pid}/fd/{held}", os.O_RDONLY)
            except OSError:
                continue
            if not alive(pid, start):  # the pid is another process's now
                os.close(r)
                continue
            outputs.append((task, fd, trio.lowlevel.FdStream(r), forward))
    pumps = {t: sum(1 for o in outputs if o[0] == t) for t in spec.tasks}
    drained = {t: trio.Event() for t in spec.tasks}
    for t, n in pumps.items():
        if not n:
            drained[t].set()
    held = Held(path, (pid, start), _pids_of(pids), outputs, status)
    return RunningStep(spec, started_at, held=held, exits=exits, pumps=pumps, drained=drained,
                       adopted=True)


def says_cancelled(step: RunningStep) -> bool:
    """slurmstepd's rule for its "*** STEP ... CANCELLED AT ***" line when srun ends a step
    (req.c, _handle_signal_container): only the step's first node says it, once, and only
    while a task there still runs. Every node saying it, even after its tasks ended, made the
    line depend on which node's tasks the SIGKILL still found running."""
    spec = step.spec
    return (spec.node_index == 0 and bool(spec.tasks) and not step.ending
            and len(step.exits) < len(spec.tasks))


async def let_go(step: RunningStep) -> None:
    """The shim holds the pipes until rnoded has read them to the end: now it may go;
    and so does the connection to rrun, which has heard of every task's end."""
    with trio.CancelScope(shield=True):
        await _let_go(step)


async def _let_go(step: RunningStep) -> None:
    if step.fs is not None:
        await hang_up(step.fs)
    held = step.held
    if held is not None:
        if held.status is not None:  # its end of file: what the tasks left behind is gone
            with trio.move_on_after(LEFTOVERS_TIMEOUT):
                try:
                    while await held.status.receive_some(4096):
                        pass
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
        if held.proc is not None:
            held.proc.kill()
            await held.proc.wait()
        elif alive(*held.shim):
            try:
                os.kill(held.shim[0], signal.SIGKILL)
            except OSError:
                pass
        for _, _, stream, _ in held.outputs:
            await stream.aclose()
        if held.status is not None:
            await held.status.aclose()
    for pipe in step.stdin.values():
        await pipe.aclose()
