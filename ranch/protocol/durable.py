"""Durable files: the one home of the rule that the controller's state, rnoded's spool and the
cluster key all follow: write a temporary file, fsync it, rename it over the name, fsync the
directory, so that a crash leaves the old file or the new one, whole, and never a mix."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial

# what may be written: bytes, or pieces written in order (a large file is never joined in memory)
Buffers = bytes | memoryview | Sequence[bytes | memoryview]


def write_all(fd: int, data: Buffers) -> None:
    """Write every byte of `data` (or of its pieces, in order) to `fd` (os.write may take less
    than asked)."""
    for piece in (data,) if isinstance(data, (bytes, memoryview)) else data:
        view = memoryview(piece)
        while view:
            view = view[os.write(fd, view) :]


def write_all_fsync(fd: int, data: Buffers) -> None:
    """write_all, then fsync."""
    write_all(fd, data)
    os.fsync(fd)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make the names in `directory` (a file created or renamed there) durable."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_atomic(path: str | os.PathLike[str], data: Buffers, *, mode: int = 0o600,
                 replace: bool = True) -> None:
    """Put `data` at `path` whole and durably. `replace=False` creates the file only where
    none is (FileExistsError otherwise): a link, unlike a rename, never replaces what another
    process made meanwhile. The temporary name is unique, so two writers never share one."""
    write_atomic_by(path, partial(write_all, data=data), mode=mode, replace=replace)


def write_atomic_by(path: str | os.PathLike[str], fill: Callable[[int], None], *,
                    mode: int = 0o600, replace: bool = True) -> None:
    """write_atomic of what `fill` writes to the temporary file's descriptor (a file made as it
    is written, never whole in memory); the fsync is this function's, so no fill can forget it."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}."
                                  f"{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            fill(fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(directory)
