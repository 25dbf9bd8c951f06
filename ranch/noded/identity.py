"""The node credential rctld issued at this node's first admission: one file, mode 0600, in the
spool dir; presented in every Register (a rebuilt machine has none and must be let in again by
an admin: `rcontrol approve NodeName=...`)."""

from __future__ import annotations

import logging
from pathlib import Path

from ranch.protocol import durable

CRED_FILE = "node.credential"
MAX_CHARS = 1024
log = logging.getLogger("rnoded")


def load(spool_dir: str) -> str:
    """The kept credential, "" when there is none (a new or rebuilt node) or it is unusable."""
    path = Path(spool_dir) / CRED_FILE
    try:
        st = path.stat()
        if st.st_mode & 0o077:
            log.warning("node credential %s is readable by others (mode %04o): fixing it",
                        path, st.st_mode & 0o7777)
            path.chmod(0o600)
        text = path.read_text(encoding="ascii")[:MAX_CHARS].strip()
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        log.error("cannot read node credential %s: %s", path, exc)
        return ""
    return text


def save(spool_dir: str, credential: str) -> None:
    """Write it atomically, 0600, durably (lost, the node is refused until an admin lets it in)."""
    root = Path(spool_dir)
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    durable.write_atomic(root / CRED_FILE, (credential + "\n").encode("ascii"))
