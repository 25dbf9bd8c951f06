"""A running `make demo` (or examples/demo.py) for the demo tests: start it, wait until its
env file says the cluster is up, and find every process it started, to prove none is left."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import shlex
import shutil
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from tests.deadline import Deadline

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo.py"
UP_WITHIN = 150.0  # seconds: 13 Python daemons starting on a loaded 2-core machine
GONE_WITHIN = 60.0


def wait_for(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = Deadline(timeout)  # stretched as the machine gets busier
    while not deadline.passed():
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {deadline.elapsed():.1f} s waiting for {what}")


def cmdline(p: psutil.Process) -> list[str]:
    """A process's command line; [] once it has gone (it may go between listing and reading)."""
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _own_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty on stdin."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def clean_env(**extra: str) -> dict[str, str]:
    """Our environment without anything that would point a command at another cluster."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANCH_", "SLURM_")) and k != "VIRTUAL_ENV"}
    env.setdefault("USER", psutil.Process().username())
    env.update(extra)
    return env


class RunningDemo:
    """The demo started in a session of its own, like a terminal's foreground job, with its
    `demo-run` link in `where`. With `terminal=True` that session has a pseudo-terminal of its
    own as controlling terminal, which `hang_up` closes as a terminal window closes."""

    def __init__(self, where: Path, argv: list[str] | None = None, *,
                 terminal: bool = False, user: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.where = where
        self.link = where / "demo-run"
        self.out = where / "demo.out"
        argv = argv or [sys.executable, str(DEMO)]
        self.master: int | None = None
        if user is not None:  # `user` (root drops to it: CI runs as root) in the environment given
            assert not terminal
            with open(self.out, "wb") as out:
                self.proc = subprocess.Popen(argv, cwd=where, env=env, stdout=out,
                                             stderr=subprocess.STDOUT, user=user, group=user,
                                             extra_groups=[], stdin=subprocess.DEVNULL,
                                             start_new_session=True)
        elif terminal:
            self.master, slave = pty.openpty()
            self.proc = subprocess.Popen(argv, cwd=where, env=clean_env(), stdin=slave,
                                         stdout=slave, stderr=slave, preexec_fn=_own_terminal)
            os.close(slave)
            self._copying = threading.Thread(target=self._copy_terminal, daemon=True)
            self._copying.start()
        else:
            with open(self.out, "wb") as out:
                self.proc = subprocess.Popen(argv, cwd=where, env=clean_env(), stdout=out,
                                             stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True)
        self.seen: dict[int, float] = {}  # pid -> create_time of everything it started
        self.env: dict[str, str] = {}

    def _copy_terminal(self) -> None:
        """What the demo writes to its terminal, into demo.out (a full pty would block it)."""
        with open(self.out, "wb") as out:
            while self.master is not None:
                try:
                    ready, _, _ = select.select([self.master], [], [], 0.1)
                    if ready:
                        out.write(os.read(self.master, 65536))
                        out.flush()
                except (OSError, ValueError, TypeError):  # EIO: no writer left; fd closed
                    return

    def hang_up(self) -> None:
        """The terminal goes away: the kernel sends SIGHUP, and writes to it fail."""
        master, self.master = self.master, None
        self._copying.join(5)
        assert master is not None
        os.close(master)

    def output(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_up(self, within: float = UP_WITHIN) -> dict[str, str]:
        """The demo's env file (RANCH_SERVER, RANCH_KEY_FILE, RANCH_URL, ...), once written."""
        env_file = self.link / "env"

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"the demo exited ({self.proc.returncode}):\n"
                                     + self.output())
            return env_file.is_file()

        wait_for(ready, within, "the demo's env file")
        for line in env_file.read_text().splitlines():
            if line.startswith("export "):
                key, _, value = line[len("export "):].partition("=")
                self.env[key] = shlex.split(value)[0]
        self.note_processes()
        return self.env

    @property
    def dir(self) -> Path:
        return Path(self.env["RANCH_DEMO_DIR"])

    def note_processes(self) -> list[psutil.Process]:
        """Record every process below the demo now (its daemons, their jobs)."""
        try:
            procs = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(
                recursive=True)]
        except psutil.NoSuchProcess:
            return []
        for p in procs:
            with contextlib.suppress(psutil.Error):
                self.seen[p.pid] = p.create_time()
        return procs

    def command(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """A Ranch command against this demo, as the README's second terminal runs it."""
        done = subprocess.run([sys.executable, "-m", *argv], cwd=REPO, capture_output=True,
                              text=True, env=clean_env(**self.env), timeout=60)
        if check:
            assert done.returncode == 0, (argv, done.stdout, done.stderr)
        return done

    def survivors(self, markers: tuple[str, ...] = ()) -> list[str]:
        """What is still alive of what it started: a recorded process (same pid, same start
        time), or any process whose command line names its directory or one of `markers`."""
        out = []
        for pid, started in self.seen.items():
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                if p.create_time() == started and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(f"{pid} {' '.join(cmdline(p))}")
        needles = (str(self.dir), *markers) if self.env else markers
        for p in psutil.process_iter(["cmdline"]):
            cmd = " ".join(p.info["cmdline"] or ())
            if p.pid != os.getpid() and any(n in cmd for n in needles):
                with contextlib.suppress(psutil.Error):
                    if p.status() != psutil.STATUS_ZOMBIE:
                        out.append(f"{p.pid} {cmd}")
        return sorted(set(out))

    def kill_all(self) -> None:
        """After a failed test: nothing of it may outlive the test. The demo is asked first
        (SIGTERM: its own clean-up), then whatever is left of it is killed."""
        if self.master is not None:
            self.hang_up()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(GONE_WITHIN)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for line in self.survivors():
            with contextlib.suppress(psutil.Error, ValueError):
                psutil.Process(int(line.split()[0])).kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        if self.env:
            shutil.rmtree(self.dir, ignore_errors=True)
