"""ralloc's command on this host, as salloc 22.05 runs it: in its own process group (given the
terminal when ralloc has it), watched until it exits while the allocation is looked at now and
then; the allocation released with how the command ended.

Signals to ralloc meanwhile do what they do to salloc: SIGHUP goes on to the command's group
and ralloc stops waiting; SIGINT, SIGTERM, SIGQUIT, SIGUSR1/2 and SIGPIPE end the allocation
(CANCELLED) and ralloc waits on for the command. A revoked allocation (rcancel, time limit,
node failure) leaves the command running unless -K/--kill-command named a signal for it.
"""

from __future__ import annotations

import os
import select
import time

from ranch.cli.allocation import Allocation
from ranch.cli.controller import CliError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from typing import Any
else:
    import _signal as signal  # signal's own module imports enum (and more): a tenth of the start

LOOK_INTERVAL = 1.0  # seconds between looks at the allocation while the command runs
RELEASE_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGUSR1,
                   signal.SIGUSR2, signal.SIGPIPE)
JOB_CONTROL = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
# salloc's exit status for a command killed by these: 0, "most likely sent from the user"
USER_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGKILL)


def interactive() -> bool:
    """salloc's test: stdin is a terminal and ralloc's process group has it."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _child_setup(tty: bool) -> None:
    """In the command's process, before exec: its own group, the terminal when ralloc had it,
    and default job-control signals (an ignored signal would stay ignored past exec)."""
    os.setpgid(0, 0)
    if tty:
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not take it
        os.tcsetpgrp(0, os.getpgrp())
    for sig in (*JOB_CONTROL, signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except OSError:
        pass  # the group has just gone


class _Watch:
    """The signals ralloc takes while the command runs, read through a wakeup pipe (so they
    interrupt the select at once), with the previous handlers put back afterwards."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.saved: dict[int, Any] = {}
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)
        self.old_wakeup = -1

    def __enter__(self) -> _Watch:
        for sig in (*RELEASE_SIGNALS, signal.SIGHUP):
            self.saved[sig] = signal.signal(sig, lambda s, f: None)  # the pipe says which
        if self.tty:
            for sig in JOB_CONTROL:
                self.saved[sig] = signal.signal(sig, signal.SIG_IGN)
        self.old_wakeup = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        return self

    def received(self) -> list[int]:
        try:
            return list(os.read(self.read_fd, 512))
        except BlockingIOError:
            return []

    def __exit__(self, *exc: object) -> None:
        signal.set_wakeup_fd(self.old_wakeup)
        for sig, old in self.saved.items():
            signal.signal(sig, old)
        os.close(self.read_fd)
        os.close(self.write_fd)


def _exit_status(returncode: int | None) -> tuple[int, int, int]:
    """(ralloc's exit code, the job's exit code, the job's signal) from the command's end."""
    if returncode is None:  # SIGHUP: ralloc stopped waiting
        return 1, 0, 0
    if returncode >= 0:
        return returncode, returncode, 0
    sig = -returncode
    return (0 if sig in USER_SIGNALS else 1), 0, sig


def run_command(alloc: Allocation, argv: list[str], env: dict[str, str], cwd: str,
                kill: int = 0) -> int:
    """Run `argv` in the allocation until it exits; release the allocation; its exit code.
    Whatever goes wrong here, the allocation is not left behind."""
    tty = interactive()
    try:
        with _Watch(tty) as watch:
            try:
                child = _start(argv, env, cwd, tty)
            except OSError as exc:
                alloc.error(f'_fork_command: Unable to exec command "{argv[0]}": '
                            f"{exc.strerror or exc}")
                _relinquish(alloc, 1, 0)
                return 1
            if tty:
                _give_terminal(child.pid)
            alloc.alive()  # at once: rctld fails an allocation its holder never claims
            returncode = _watch(alloc, child, watch, kill)
            if tty:
                _give_terminal(os.getpgrp())
    except BaseException:
        alloc.cancel()
        raise
    rc, code, sig = _exit_status(returncode)
    if not alloc.released:
        _relinquish(alloc, code, sig)
    return alloc.exit_status(rc)


class Child:
    """The command's process, started by posix_spawn: what of subprocess.Popen ralloc uses
    (pid, poll, returncode), without subprocess's import (threading, selectors, locale...:
    a fifth of ralloc's start)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _start(argv: list[str], env: dict[str, str], cwd: str, tty: bool) -> Any:
    """The command in its own process group with default job-control signals. With the
    terminal to hand over, subprocess's preexec hook does it in the child, before exec;
    without, posix_spawn (searching the command's PATH as execvpe does) is enough."""
    if tty:
        import subprocess

        return subprocess.Popen(argv, env=env, cwd=cwd, preexec_fn=lambda: _child_setup(tty))
    # what Popen's close_fds did: descriptors ralloc was given do not reach the command
    close = [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited_fds()]
    here = os.getcwd()
    if cwd != here:
        os.chdir(cwd)  # posix_spawn has no chdir of its own before Python 3.13
    try:
        return Child(os.posix_spawn(
            _find(argv[0], env), argv, env, file_actions=close, setpgroup=0,
            setsigdef=(*JOB_CONTROL, signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE)))
    finally:
        if cwd != here:
            os.chdir(here)


def _find(name: str, env: dict[str, str]) -> str:
    """The file execvpe would run for `name`, looked up on the command's PATH before the
    spawn: a spawn per PATH entry tried (as execvpe tries them) costs a process each. The
    first executable file; else the first that exists (its spawn says why it cannot run);
    else FileNotFoundError."""
    if "/" in name:
        return name
    found = ""
    # os.get_exec_path's answer, without its warnings import
    for d in env.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(d or ".", name)
        if os.path.isfile(path):
            if os.access(path, os.X_OK):
                return path
            found = found or path
    if found:
        return found
    raise FileNotFoundError(2, os.strerror(2), name)


def _inherited_fds() -> list[int]:
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return []
    out = []
    for fd in fds:
        try:
            if fd > 2 and os.get_inheritable(fd):
                out.append(fd)
        except OSError:
            pass  # the listing's own descriptor, closed since
    return out


def _give_terminal(pgid: int) -> None:
    try:
        os.tcsetpgrp(0, pgid)
    except OSError:
        pass  # the command took it itself, or has just exited


def _relinquish(alloc: Allocation, code: int, sig: int) -> None:
    alloc.say(f"Relinquishing job allocation {alloc.job_id}")
    alloc.release(code, sig)
    # salloc 22.05 says "Job allocation N has been revoked." after this only when slurmctld's
    # word of the job's end beats its own note that it released the job (a race it mostly
    # loses, measured: issue 35); so nothing more is said here


def _watch(alloc: Allocation, child: Any, watch: _Watch, kill: int
           ) -> int | None:
    """Wait for the command; the returncode, or None when SIGHUP made ralloc stop waiting."""
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        pidfd = -1  # no pidfd here: the look interval bounds how late an exit is seen
    next_look = time.monotonic() + LOOK_INTERVAL
    try:
        while True:
            if child.poll() is not None:
                return child.returncode
            fds = [watch.read_fd] + ([pidfd] if pidfd >= 0 else [])
            wait = max(0.0, next_look - time.monotonic())
            if pidfd < 0:
                wait = min(wait, 0.1)
            ready, _, _ = select.select(fds, [], [], wait)
            if watch.read_fd in ready:
                for signum in watch.received():
                    if signum == signal.SIGHUP:
                        _signal_group(child.pid, signal.SIGHUP)
                        return None
                    if not alloc.released:  # salloc: slurm_complete_job(NO_VAL)
                        alloc.cancel()
                        _revoked(alloc, child, kill, timeout=False)
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + LOOK_INTERVAL
                if not alloc.released:
                    _look(alloc, child, kill)
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _look(alloc: Allocation, child: Any, kill: int) -> None:
    """Say the command is alive (rctld's InactiveLimit); read the job only when it ended, or
    when the controller did not answer that (away, or too old to know the word)."""
    if alloc.alive():
        return
    try:
        state = alloc.fetch().get("state")
    except CliError:
        return  # the controller is away: look again later
    if state not in ("RUNNING", "CONFIGURING"):
        alloc.released = True
        _revoked(alloc, child, kill, timeout=state == "TIMEOUT")


def _revoked(alloc: Allocation, child: Any, kill: int, *, timeout: bool) -> None:
    if timeout:
        alloc.say(f"Job {alloc.job_id} has exceeded its time limit and its allocation has "
                  "been revoked.")
    else:
        alloc.say(f"Job allocation {alloc.job_id} has been revoked.")
    if kill and child.poll() is None:
        _signal_group(child.pid, signal.SIGCONT)
        _signal_group(child.pid, kill)
