"""Run the power-save programs (Suspend/Resume/ResumeFailProgram) the way Slurm calls them.

argv[1] is the hostlist of the nodes; the environment is built fresh (PATH, SLURM_CONF,
RANCH_CONF, and what the caller adds, e.g. SLURM_RESUME_FILE); the program starts with every
signal unblocked and at its default disposition and with no descriptor of rctld's but its
stdin (/dev/null) and the output pipe (Slurm's inherit blocked signals, so daemons they start
ignore SIGTERM); stdout and stderr are captured and logged line by line (Slurm's are lost, which is
its users' most common power-save complaint).

Each runs under healthcheck/reaper.py in its `detached` mode: at the timeout (and when rctld
stops waiting, e.g. at shutdown) the whole tree is killed, `setsid` children included; when the
program exits by itself, what it left still holding the output pipe is killed, and a daemon it
started fully detached (its own output, as examples/resume.sh starts rnoded) is left running,
as Slurm leaves it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys

import attrs
import trio

from ranch.ctld import logs
from ranch.healthcheck import reaper

MAX_OUTPUT = 64 * 1024  # bytes of output kept per run
KILL_GRACE = 0.0  # at the timeout: SIGKILL at once, as before (the program's status is -9)
LAUNCHER_SLACK = 2.0  # how long the launcher may take to take the tree down
DRAIN_AFTER_EXIT = 1.0  # output still read after the program ended


@attrs.frozen
class ProgramResult:
    kind: str
    argv: tuple[str, ...]
    returncode: int | None  # None: could not start; -9 when killed at the timeout
    output: str
    timed_out: bool = False
    error: str = ""


def program_env(conf_path: str) -> dict[str, str]:
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    bindir = os.path.dirname(sys.executable)  # so scripts find rcontrol of this installation
    if bindir not in path.split(os.pathsep):
        path = bindir + os.pathsep + path
    return {
        "PATH": path,
        "SLURM_CONF": conf_path,
        "RANCH_CONF": conf_path,
    }


def clean_signals() -> None:
    """In the child, before exec: unblock every signal and undo inherited SIG_IGN (exec keeps
    both; restore_signals only resets SIGPIPE and SIGXFSZ)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass


async def run_program(
    kind: str, program: str, hostlist: str, *, conf_path: str, timeout: float,
    env: dict[str, str] | None = None,
) -> ProgramResult:
    """Run `program hostlist`, log what happened, never raise for the program's faults."""
    argv = (program, hostlist)
    logs.event("power program start", kind=kind, program=program, nodes=hostlist)
    try:
        proc = await trio.lowlevel.open_process(
            reaper.launcher_argv("detached", KILL_GRACE, list(argv)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**program_env(conf_path), **(env or {})},
            start_new_session=True,
            close_fds=True,
            restore_signals=True,
            preexec_fn=clean_signals,
        )
    except OSError as exc:
        result = ProgramResult(kind, argv, None, "", error=f"cannot run {program}: {exc}")
        logs.event(
            "power program failed to start", logging.ERROR, kind=kind, program=program,
            nodes=hostlist, error=result.error,
        )
        return result
    output, timed_out = await _wait(proc, timeout)
    if proc.returncode == 127 and output.startswith(reaper.EXEC_FAILED):
        why = output[len(reaper.EXEC_FAILED):].strip()  # "PROGRAM: strerror"
        result = ProgramResult(kind, argv, None, "", error=f"cannot run {why}")
        logs.event("power program failed to start", logging.ERROR, kind=kind, program=program,
                   nodes=hostlist, error=result.error)
        return result
    result = ProgramResult(kind, argv, proc.returncode, output, timed_out)
    _log_result(result, program, hostlist, timeout)
    return result


async def _wait(proc: trio.Process, timeout: float) -> tuple[str, bool]:
    """(its output, the first MAX_OUTPUT bytes; whether it was stopped for running past
    `timeout`), once it ended, or was ended."""
    chunks: list[bytes] = []
    kept = 0
    timed_out = False

    reader_done = trio.Event()

    async def read_output() -> None:
        nonlocal kept
        assert proc.stdout is not None
        try:
            while data := await proc.stdout.receive_some(65536):
                if kept < MAX_OUTPUT:
                    chunks.append(bytes(data[: MAX_OUTPUT - kept]))
                    kept += len(chunks[-1])
        finally:
            reader_done.set()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_output)
            with trio.move_on_after(timeout) as scope:
                await proc.wait()
            if scope.cancelled_caught:
                timed_out = True
                await _stop(proc)
            with trio.move_on_after(DRAIN_AFTER_EXIT):
                await reader_done.wait()
            nursery.cancel_scope.cancel()  # whatever still holds the pipe is not waited for
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:  # rctld stops waiting: the tree ends now
                await _stop(proc)
            if proc.stdout is not None:
                await trio.aclose_forcefully(proc.stdout)
    return b"".join(chunks).decode("utf-8", "replace"), timed_out


async def _stop(proc: trio.Process) -> None:
    """SIGTERM the launcher, which kills the program's whole tree; should it not be done in
    time, SIGKILL its group as a last resort."""
    try:
        proc.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        pass
    with trio.move_on_after(KILL_GRACE + LAUNCHER_SLACK):
        await proc.wait()
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        await proc.wait()


def _log_result(result: ProgramResult, program: str, hostlist: str, timeout: float) -> None:
    ok = result.returncode == 0
    level = logging.INFO if ok else logging.ERROR
    for line in result.output.splitlines():
        if line.strip():
            logs.event("power program output", level, kind=result.kind, nodes=hostlist, line=line)
    if result.timed_out:
        logs.event(
            "power program killed", logging.ERROR, kind=result.kind, program=program,
            nodes=hostlist, rc=result.returncode, error=f"timed out after {timeout:g} s",
        )
    else:
        logs.event(
            "power program done", level, kind=result.kind, program=program, nodes=hostlist,
            rc=result.returncode,
        )
