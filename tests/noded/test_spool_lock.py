"""A second rnoded on the same spool dir is refused (flock), naming the holder; the lock goes
with the holder, so the next rnoded starts. Two running together took the node from each other
once a second, for ever, with nothing above INFO in either log."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ranch.protocol.auth import create_key

REPO = Path(__file__).resolve().parents[2]


def _rnoded(tmp: Path, spool: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO), RANCH_KEY_FILE=str(tmp / "key"))
    # no controller at this port: the daemon keeps trying, holding its spool meanwhile
    return subprocess.Popen([sys.executable, "-m", "ranch.noded", "--server",
                             "127.0.0.1:9", "--name", "n1", "--spool-dir", str(spool)],
                            env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _wait_locked(spool: Path, pid: int) -> None:
    deadline = time.monotonic() + 20
    lock = spool / "rnoded.lock"
    while time.monotonic() < deadline:
        if lock.exists() and lock.read_text().strip().endswith(f" pid={pid}"):
            return
        time.sleep(0.05)
    raise AssertionError("the first rnoded never took its spool lock")


def test_second_rnoded_on_one_spool_is_refused(tmp_path: Path) -> None:
    create_key(str(tmp_path / "key"))
    spool = tmp_path / "spool"
    first = _rnoded(tmp_path, spool)
    try:
        _wait_locked(spool, first.pid)
        second = _rnoded(tmp_path, spool)
        out, _ = second.communicate(timeout=20)
        assert second.returncode == 1
        lines = out.strip().splitlines()
        assert lines == [f"rnoded: spool dir {spool} is in use by another rnoded "
                         f"(host={socket.gethostname()} pid={first.pid})"]
        assert first.poll() is None  # the holder runs on, undisturbed
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=20)
    # the lock went with its holder: the next daemon takes the spool
    third = _rnoded(tmp_path, spool)
    try:
        _wait_locked(spool, third.pid)
        assert third.poll() is None
    finally:
        third.send_signal(signal.SIGTERM)
        third.communicate(timeout=20)
