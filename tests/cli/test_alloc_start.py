"""How ralloc starts its command without a terminal (cli/alloc_command.py `_start`:
posix_spawn instead of subprocess): what subprocess.Popen with _child_setup gave it, kept."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from ranch.cli.alloc_command import Child, _start

PROBE = """\
import os, signal, sys
print(os.getpid() == os.getpgrp(), os.getcwd(), signal.getsignal(signal.SIGINT) is
      signal.default_int_handler, ",".join(os.listdir("/proc/self/fd")))
"""


def finish(child: Child, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while child.poll() is None:
        assert time.monotonic() < deadline, "the command did not end"
        time.sleep(0.01)
    return child.returncode


def test_the_command_runs_in_its_own_group_and_directory_without_our_descriptors(
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    leaked = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(leaked, True)  # as a descriptor ralloc's caller left open would be
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # an ignored SIGINT is not passed on
    here = os.getcwd()
    try:
        child = _start(["sh", "-c", f'exec "$0" -c "$1" > {out}', sys.executable, PROBE],
                       dict(os.environ), str(tmp_path), tty=False)
        assert os.getcwd() == here
        assert finish(child) == 0
    finally:
        signal.signal(signal.SIGINT, old)
        os.close(leaked)
    own_group, cwd, default_int, fds = out.read_text().split(" ", 3)
    assert (own_group, cwd, default_int) == ("True", str(tmp_path), "True")
    assert str(leaked) not in fds.strip().split(",")


def test_the_command_is_found_on_its_environments_path_and_its_status_read(
        tmp_path: Path) -> None:
    (tmp_path / "hello").write_text("#!/bin/sh\nexit 7\n")
    (tmp_path / "hello").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'nothing'}:{tmp_path}"}
    assert finish(_start(["hello"], env, os.getcwd(), tty=False)) == 7
    child = _start(["sleep", "30"], dict(os.environ), os.getcwd(), tty=False)
    os.kill(child.pid, signal.SIGTERM)
    assert finish(child) == -signal.SIGTERM  # Popen's sign for a signal


def test_a_command_that_cannot_run_says_why(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("not a program\n")
    env = {**os.environ, "PATH": str(tmp_path)}
    with pytest.raises(FileNotFoundError):
        _start(["no-such-command"], env, os.getcwd(), tty=False)
    with pytest.raises(PermissionError):
        _start(["plain"], env, os.getcwd(), tty=False)
    with pytest.raises(PermissionError):
        _start([str(tmp_path / "plain")], env, os.getcwd(), tty=False)
