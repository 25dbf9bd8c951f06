"""One controller per state directory: an exclusive flock on StateSaveLocation/rctld.lock."""

# The file names its holder (host, pid): ranch/protocol/pidlock.py.

from __future__ import annotations

import os

from ranch.protocol import pidlock

LOCK_FILE = "rctld.lock"


class StateDirBusy(Exception):
    """Another live process holds the lock; str() is the one line rctld prints."""


def acquire(state_dir: str) -> int:
    """The lock's descriptor, held (never closed) for the life of the process; StateDirBusy
    naming the holder when another process has it, OSError when the file cannot be made."""
    path = os.path.join(state_dir, LOCK_FILE)
    try:
        return pidlock.take(path)
    except pidlock.Held as held:
        raise StateDirBusy(
            f"state directory {state_dir} is in use by another rctld ({held.holder}; lock "
            f"file {path}); stop it first, or give this one another StateSaveLocation") from None
