"""Run the power-save programs (Suspend/Resume/ResumeFailProgram) the way Slurm calls them.

argv[1] is the hostlist of the nodes; the environment is built fresh (PATH, SLURM_CONF,
RANCH_CONF, and what the caller adds, e.g. SLURM_RESUME_FILE); the program starts with every
signal unblocked and at its default disposition and with no descriptor of rctld's but its
stdin (/dev/null) and the output pipe (Slurm's inherit blocked signals, so daemons they start
ignore SIGTERM); stdout and stderr are captured and logged line by line (Slurm's are lost, which is
its users' most common power-save complaint); the whole process group is killed at the timeout.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys

import attrs
import trio

from ctld import logs

MAX_OUTPUT = 64 * 1024  # bytes of output kept per run


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
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**program_env(conf_path), **(env or {})},
            start_new_session=True,  # its own process group, so a timeout kills its children too
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
    chunks: list[bytes] = []
    kept = 0
    timed_out = False

    async def read_output() -> None:
        nonlocal kept
        assert proc.stdout is not None
        while data := await proc.stdout.receive_some(65536):
            if kept < MAX_OUTPUT:
                chunks.append(data[: MAX_OUTPUT - kept])
                kept += len(chunks[-1])

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_output)
            with trio.move_on_after(timeout) as scope:
                await proc.wait()
            if scope.cancelled_caught:
                timed_out = True
                _kill_group(proc)
                await proc.wait()
                nursery.cancel_scope.cancel()  # a grandchild may hold the pipe open
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        if proc.stdout is not None:
            await trio.aclose_forcefully(proc.stdout)
    output = b"".join(chunks).decode("utf-8", "replace")
    result = ProgramResult(kind, argv, proc.returncode, output, timed_out)
    _log_result(result, program, hostlist, timeout)
    return result


def _kill_group(proc: trio.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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
