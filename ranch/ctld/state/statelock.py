"""One controller per state directory: an exclusive flock on StateSaveLocation/rctld.lock."""

# The file names its holder (host, pid). The kernel drops the lock with the holder's last
# descriptor, so a lock left by a dead process never blocks (no pid guessing, no cleanup).

from __future__ import annotations

import fcntl
import os
import socket

LOCK_FILE = "rctld.lock"


class StateDirBusy(Exception):
    """Another live process holds the lock; str() is the one line rctld prints."""


def acquire(state_dir: str) -> int:
    """The lock's descriptor, held (never closed) for the life of the process; StateDirBusy
    naming the holder when another process has it, OSError when the file cannot be made."""
    path = os.path.join(state_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise StateDirBusy(
            f"state directory {state_dir} is in use by another rctld ({holder}; lock file "
            f"{path}); stop it first, or give this one another StateSaveLocation") from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"host={socket.gethostname()} pid={os.getpid()}\n".encode(), 0)
    return fd


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "holder not yet named"
