"""rnoded's lock on its spool dir: one daemon per node and spool, as rctld allows one per state."""

from __future__ import annotations

import fcntl
import os

LOCK_FILE = "rnoded.lock"


class SpoolBusy(Exception):
    """Another rnoded holds the spool dir."""


def lock_spool(spool_dir: str) -> int:
    """Take the spool dir's lock (flock, held until this process exits) and write our pid into
    the lock file; returns its descriptor, which the caller keeps open. Two rnoded on one spool
    took the node from each other once a second for ever, each adopting the other's jobs.
    Raises SpoolBusy naming the holder's pid, OSError when the dir cannot be made or opened."""
    os.makedirs(spool_dir, mode=0o700, exist_ok=True)
    path = os.path.join(spool_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        finally:
            os.close(fd)
        raise SpoolBusy(f"spool dir {spool_dir} is in use by another rnoded (pid {holder})"
                        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
