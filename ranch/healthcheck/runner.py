"""Run a HealthCheckProgram under trio: clean environment, bounded output, hard timeout, and
nothing left behind (healthcheck/reaper.py); turn its exit status into a HealthReport (0 ok,
2 fail, anything else drain)."""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping

import attrs
import trio

from ranch.healthcheck import reaper
from ranch.protocol.messages import HealthReport

log = logging.getLogger("rnoded.healthcheck")
SAFE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# Variables copied from rnoded's own environment, so fake-GPU demos and verdict files work.
PASS_THROUGH = ("RANCH_FAKE_GPUS", "RANCH_FAKE_GPU_FAULTS", "RANCH_HC_VERDICT_FILE")
WARNING_PREFIX = "WARNING:"
MAX_MESSAGE = 256  # a reason is a one-liner in rinfo -R, not a log
MAX_WARNINGS = 16
EXIT_FAIL = 2
READ_CHUNK = 16384
DRAIN_AFTER_EXIT = 0.5  # how long to keep reading after the program exited
LAUNCHER_SLACK = 2.0  # beyond the kill grace, how long the launcher may take to clean up


@attrs.frozen
class HealthRun:
    """One run in full: the verdict plus what to log."""

    report: HealthReport
    output: str
    returncode: int | None  # None when it never started; negative: killed by that signal
    duration: float
    timed_out: bool = False
    truncated: bool = False


def health_environment(
    *,
    node_name: str,
    node_state: str,
    is_healthy: bool | None,
    parent_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment a health program sees; nothing else leaks from rnoded."""
    parent = os.environ if parent_env is None else parent_env
    env = {
        "PATH": SAFE_PATH,
        "RANCH_NODENAME": node_name,
        "SLURMD_NODENAME": node_name,
        "RANCH_NODE_STATE": node_state,
    }
    if is_healthy is not None:
        env["RANCH_NODE_IS_HEALTHY"] = "yes" if is_healthy else "no"
    for key in PASS_THROUGH:
        if key in parent:
            env[key] = parent[key]
    return env


def program_argv(program: str) -> list[str]:
    """A path that exists (spaces and all) runs as is; otherwise the string is split like a shell
    command line, so `HealthCheckProgram=/usr/bin/ranch-healthcheck --gpus 8` works."""
    program = program.strip()
    if not program:
        raise ValueError("HealthCheckProgram is empty")
    if os.path.exists(program) or not any(c.isspace() for c in program):
        return [program]
    argv = shlex.split(program)
    if not argv:
        raise ValueError(f"HealthCheckProgram {program!r} names no program")
    return argv


def classify(returncode: int, output: str) -> tuple[str, str, tuple[str, ...]]:
    """(verdict, message, warnings) for a program that ran to its end."""
    lines = [line.strip() for line in output.splitlines()]
    warnings = tuple(
        _clip(line[len(WARNING_PREFIX) :].strip())
        for line in lines
        if line.startswith(WARNING_PREFIX) and line[len(WARNING_PREFIX) :].strip()
    )[:MAX_WARNINGS]
    if returncode == 0:
        return "ok", "", warnings
    verdict = "fail" if returncode == EXIT_FAIL else "drain"
    first = next((line for line in lines if line), "")
    if first:
        text = first
    elif returncode < 0:
        text = f"killed by signal {_signal_name(-returncode)}"
    else:
        text = f"exited with status {returncode}"
    return verdict, _clip("HC: " + text), warnings


async def run_health_program(
    program: str,
    *,
    node_name: str,
    node_state: str,
    is_healthy: bool | None,
    timeout: float,
    output_limit: int = 65536,
) -> HealthReport:
    """Run the program once, log its captured output, and return its verdict (see
    run_health_program_detailed)."""
    run = await run_health_program_detailed(
        program,
        node_name=node_name,
        node_state=node_state,
        is_healthy=is_healthy,
        timeout=timeout,
        output_limit=output_limit,
    )
    quiet = run.report.verdict == "ok" and not run.report.warnings
    level = logging.DEBUG if quiet else logging.INFO
    log.log(
        level,
        "health check %s: %s (exit %s, %.1f s)%s%s",
        program,
        run.report.verdict,
        run.returncode,
        run.duration,
        " [output truncated]" if run.truncated else "",
        "".join(f"\n  | {line}" for line in run.output.splitlines()),
    )
    return run.report


async def run_health_program_detailed(
    program: str,
    *,
    node_name: str,
    node_state: str,
    is_healthy: bool | None,
    timeout: float,
    output_limit: int = 65536,
    kill_grace: float = 2.0,
) -> HealthRun:
    """Run the program once under healthcheck/reaper.py: on timeout (or when our caller is
    cancelled) SIGTERM then, after `kill_grace`, SIGKILL reach every process it started, and
    whatever it left running when it exited is killed too, `setsid` children included, so a
    check never leaves processes behind."""
    started = trio.current_time()
    try:
        argv = program_argv(program)
    except ValueError as exc:
        return _not_started(f"HC: {exc}")
    env = health_environment(node_name=node_name, node_state=node_state, is_healthy=is_healthy)
    try:
        proc = await trio.lowlevel.open_process(
            reaper.launcher_argv("all", kill_grace, argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        return _not_started(f"HC: cannot start the launcher: {exc.strerror or exc}")

    sink = _BoundedSink(output_limit)
    timed_out = await _supervise(proc, sink, timeout, kill_grace)
    if proc.returncode == 127 and sink.text().startswith(reaper.EXEC_FAILED):
        why = sink.text()[len(reaper.EXEC_FAILED):].strip()  # "PROGRAM: strerror"
        return _not_started(f"HC: cannot run {why}")
    output = sink.text()
    returncode = proc.returncode
    assert returncode is not None
    if timed_out:
        _, _, warnings = classify(returncode, output)
        verdict, message = "drain", f"HC: timed out after {_seconds(timeout)} s"
    else:
        verdict, message, warnings = classify(returncode, output)
    report = HealthReport(verdict=verdict, message=message, warnings=warnings, ran_at=time.time())
    return HealthRun(
        report=report,
        output=output,
        returncode=returncode,
        duration=trio.current_time() - started,
        timed_out=timed_out,
        truncated=sink.truncated,
    )


async def _supervise(proc: trio.Process, sink: _BoundedSink, timeout: float,
                     kill_grace: float) -> bool:
    """Read the program's output into `sink` until it exits, stopping it after `timeout` (or
    when our caller is cancelled); whether it timed out."""
    timed_out = False
    try:
        async with trio.open_nursery() as nursery:
            reader_done = trio.Event()
            nursery.start_soon(_read_all, proc.stdout, sink, reader_done)
            with trio.move_on_after(timeout) as scope:
                await proc.wait()
            if scope.cancelled_caught:
                timed_out = True
                await _stop(proc, kill_grace)
            with trio.move_on_after(DRAIN_AFTER_EXIT):
                await reader_done.wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:  # our caller was cancelled: the tree ends with us
                await _stop(proc, kill_grace)
            if proc.stdout is not None:
                await proc.stdout.aclose()
    return timed_out


class _BoundedSink:
    """Keeps the first `limit` bytes and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.data = bytearray()
        self.truncated = False

    def feed(self, chunk: bytes | bytearray) -> None:
        room = self.limit - len(self.data)
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(0, room)]
        self.data += chunk

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


async def _read_all(
    stream: trio.abc.ReceiveStream | None, sink: _BoundedSink, done: trio.Event
) -> None:
    # Reading continues past the limit so a chatty program never blocks on a full pipe.
    try:
        if stream is None:
            return
        while chunk := await stream.receive_some(READ_CHUNK):
            sink.feed(chunk)
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        pass
    finally:
        done.set()


async def _stop(proc: trio.Process, grace: float) -> None:
    """SIGTERM the launcher, which stops the whole tree (SIGKILL after `grace`); should it not
    be done in time, SIGKILL its group as a last resort."""
    try:
        proc.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        pass
    with trio.move_on_after(grace + LAUNCHER_SLACK):
        await proc.wait()
    if proc.returncode is None:
        _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already empty


def _not_started(message: str) -> HealthRun:
    report = HealthReport(verdict="drain", message=_clip(message), ran_at=time.time())
    return HealthRun(report=report, output="", returncode=None, duration=0.0)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _clip(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."
