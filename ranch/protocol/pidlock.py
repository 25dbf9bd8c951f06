"""One daemon per directory: an exclusive flock on a lock file that names its holder.

The kernel drops the lock with the holder's last descriptor, so a lock left by a dead process
never blocks (no pid guessing, no cleanup). rctld's state directory and rnoded's spool use it.
"""

from __future__ import annotations

import fcntl
import os
import socket


class Held(Exception):
    """Another live process holds the lock; `holder` is what its file says of it."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def take(path: str) -> int:
    """The lock's descriptor, held (never closed) for the life of the process, the file naming
    this process (host=H pid=P); Held when another process has it, OSError when the file cannot
    be made."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise Held(holder) from None
    except BaseException:
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
