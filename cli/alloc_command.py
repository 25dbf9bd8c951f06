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
import signal
import subprocess
import time
from typing import Any

from cli.allocation import Allocation
from cli.controller import CliError

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
                child = subprocess.Popen(argv, env=env, cwd=cwd,
                                         preexec_fn=lambda: _child_setup(tty))
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


def _give_terminal(pgid: int) -> None:
    try:
        os.tcsetpgrp(0, pgid)
    except OSError:
        pass  # the command took it itself, or has just exited


def _relinquish(alloc: Allocation, code: int, sig: int) -> None:
    alloc.say(f"Relinquishing job allocation {alloc.job_id}")
    alloc.release(code, sig)
    # salloc hears of the job's end from the controller while its release is answered, and
    # says so (every salloc 22.05 run ends with this line)
    alloc.say(f"Job allocation {alloc.job_id} has been revoked.")


def _watch(alloc: Allocation, child: subprocess.Popen, watch: _Watch, kill: int
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


def _look(alloc: Allocation, child: subprocess.Popen, kill: int) -> None:
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


def _revoked(alloc: Allocation, child: subprocess.Popen, kill: int, *, timeout: bool) -> None:
    if timeout:
        alloc.say(f"Job {alloc.job_id} has exceeded its time limit and its allocation has "
                  "been revoked.")
    else:
        alloc.say(f"Job allocation {alloc.job_id} has been revoked.")
    if kill and child.poll() is None:
        _signal_group(child.pid, signal.SIGCONT)
        _signal_group(child.pid, kill)
