"""How a command proves who runs it: the cluster key when it may read it, else (or when the
config says AuthType=auth/munge) a MUNGE credential from the local munged, as Slurm's commands do.

`signer(target)` -> (key, munge): `munge` is None for the cluster key, else the munged socket
("" for MUNGE's default) and `key` is then unused.
"""

from __future__ import annotations

import os

from ranch.cli.controller import CliError


def signer(target) -> tuple[bytes, str | None]:
    from ranch.protocol.auth import KeyFileError, load_key

    if target.munge is not None:
        return b"", target.munge
    try:
        return load_key(target.key_path), None
    except KeyFileError as exc:
        fallback = _munge_fallback(target.key_path)
        if fallback is None:
            raise CliError(str(exc)) from None
        return b"", fallback


def _munge_fallback(key_path: str) -> str | None:
    """An ordinary user may not read the cluster key: when munged is there, use it (its socket
    from RANCH_MUNGE_SOCKET or MUNGE's default), as the controller would tell them to."""
    try:
        os.stat(key_path)
        readable = os.access(key_path, os.R_OK)
    except (FileNotFoundError, PermissionError):
        readable = False
    except OSError:
        readable = True
    if readable:
        return None  # the key is there and ours, but unusable: its own error says why
    from ranch.protocol import munge

    socket = munge.socket_path()
    if not munge.available() or not os.path.exists(socket):
        return None
    return os.environ.get(munge.SOCKET_ENV, "")


def munge_errors(munge: str | None) -> tuple[type[Exception], ...]:
    """What a request signed by munge may raise from munged (nothing when it is not)."""
    if munge is None:
        return ()
    from ranch.protocol.munge import MungeError

    return (MungeError,)


def munge_error(exc: Exception) -> CliError:
    return CliError(f"cannot get a MUNGE credential (AuthType=auth/munge): {exc}")


def user_name() -> str:
    """getpass.getuser()'s answer (LOGNAME, USER, LNAME, USERNAME, then the password database)
    without importing getpass, which brings termios and contextlib to every command."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if user := os.environ.get(name):
            return user
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, OSError):
        return str(os.getuid())


def known_user(text: str) -> bool:
    """uid_from_string's test (scancel -u, sacct -u): a user name, or the uid of one, that
    this host's password database holds; the caller's own name and uid always count (Ranch
    takes the caller's name from the login environment, as user_name() reads it)."""
    import pwd

    if text and (text == user_name() or text == str(os.getuid())):
        return True
    try:
        if text.isdigit():
            pwd.getpwuid(int(text))
        else:
            pwd.getpwnam(text)
    except (KeyError, OverflowError):
        return False
    return True
