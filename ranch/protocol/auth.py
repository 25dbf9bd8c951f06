"""The cluster key: a file of random bytes readable by its owner only; finding, loading, creating.

Every program takes --key-file, then RANCH_KEY_FILE, then the config's AuthKeyFile.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

DEFAULT_KEY_FILE = "/etc/ranch/ranch.key"
KEY_ENV = "RANCH_KEY_FILE"
KEY_BYTES = 32
MIN_KEY_BYTES = 16
MAX_SECRET_BYTES = 1 << 20  # a key or token file larger than this is not one


class KeyFileError(Exception):
    """The key file is missing, unsafe or unusable; the message says which and what to do."""


def resolve_key_path(
    cli_value: str | None,
    config_value: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> str:
    """--key-file beats RANCH_KEY_FILE beats AuthKeyFile beats the default path."""
    environ = os.environ if env is None else env
    for candidate in (cli_value, environ.get(KEY_ENV), config_value):
        if candidate:
            return os.path.expanduser(candidate)
    return DEFAULT_KEY_FILE


def load_key(path: str) -> bytes:
    """The key bytes of `path`; refuses a file that group or others may read or write."""
    try:
        key = read_private(path, "key file")
    except FileNotFoundError:
        raise KeyFileError(
            f"key file {path} does not exist (rctld creates it at AuthKeyFile on first start; "
            f"give nodes and commands the same file with --key-file or {KEY_ENV})"
        ) from None
    if len(key) < MIN_KEY_BYTES:
        raise KeyFileError(
            f"key file {path} holds {len(key)} bytes; at least {MIN_KEY_BYTES} are needed"
        )
    return key


def read_private(path: str, what: str) -> bytes:
    """The bytes of a secret file (`what` names it in messages): a regular file that neither
    group nor others may access, else KeyFileError saying the chmod to run.
    FileNotFoundError passes through so callers can say how to create theirs."""
    try:
        # O_NONBLOCK: a FIFO put where the key should be must not hang the program
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise KeyFileError(f"cannot open {what} {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise KeyFileError(f"cannot read {what} {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise KeyFileError(f"{what} {path} is {kind}; give the path of the {what} itself")
    with os.fdopen(fd, "rb") as f:
        if st.st_mode & 0o077:
            raise KeyFileError(
                f"{what} {path} is accessible by group or others "
                f"(mode {stat.S_IMODE(st.st_mode):04o}); run: chmod 600 {path}"
            )
        data = f.read(MAX_SECRET_BYTES + 1)
    if len(data) > MAX_SECRET_BYTES:
        raise KeyFileError(f"{what} {path} is {st.st_size:,} bytes; a secret file holds at most "
                           f"{MAX_SECRET_BYTES:,} (is it the right file?)")
    return data


def create_key(path: str) -> bytes:
    """Write a new random key to `path` (mode 0600, parents created) atomically; never
    overwrites an existing file (FileExistsError)."""
    import secrets  # here: random and base64 would cost every command's start

    from ranch.protocol import durable

    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, mode=0o700, exist_ok=True)
    key = secrets.token_bytes(KEY_BYTES)
    # replace=False: fails instead of replacing a key someone else made meanwhile
    durable.write_atomic(path, key, replace=False)
    return key
