"""rnoded's lock on its spool dir: one daemon per node and spool, as rctld allows one per state."""

from __future__ import annotations

import os

from ranch.protocol import pidlock

LOCK_FILE = "rnoded.lock"


class SpoolBusy(Exception):
    """Another rnoded holds the spool dir."""


def lock_spool(spool_dir: str) -> int:
    """Take the spool dir's lock (flock, held until this process exits; protocol/pidlock.py),
    the lock file naming this process; returns its descriptor, which the caller keeps open. Two
    rnoded on one spool took the node from each other once a second for ever, each adopting
    the other's jobs. Raises SpoolBusy naming the holder, OSError when the dir cannot be made
    or opened."""
    os.makedirs(spool_dir, mode=0o700, exist_ok=True)
    try:
        return pidlock.take(os.path.join(spool_dir, LOCK_FILE))
    except pidlock.Held as held:
        raise SpoolBusy(f"spool dir {spool_dir} is in use by another rnoded ({held.holder})"
                        ) from None
