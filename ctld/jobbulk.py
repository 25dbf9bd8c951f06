"""A job's bulk, its script and environment, in files of its own under the state directory
(StateSaveLocation/jobs/hash.N/job.ID/, as slurmctld keeps script and environment): written
once, read when the job launches, never held in memory nor rewritten by a state save.

A submission's journal record holds the bulk until then; before a snapshot lets that record's
segment go, the snapshot writes (and fsyncs) the bulk files of every job new since the last one.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil

import orjson


def job_dir(state_dir: str, job_id: int) -> str:
    return os.path.join(state_dir, "jobs", f"hash.{job_id % 10}", f"job.{job_id}")


def write_many(state_dir: str, items: list[tuple[int, str, tuple[tuple[str, str], ...]]]) -> None:
    """Blocking (the snapshot's thread): each job's script and environment, then one sync of
    the file system for them all. An fsync per file made the journal's own fsyncs wait behind
    thousands of them (a job's end took 250 ms to acknowledge under load)."""
    if not items:
        return
    for job_id, script, env in items:
        path = job_dir(state_dir, job_id)
        os.makedirs(path, mode=0o700, exist_ok=True)
        _write(os.path.join(path, "script"), script.encode("utf-8", "surrogateescape"))
        _write(os.path.join(path, "environment"), orjson.dumps(env))
    sync_filesystem(state_dir)


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def sync_filesystem(path: str) -> None:
    """syncfs(2) on the file system holding `path` (every file written there so far reaches
    the disk), or sync(2) where libc has no syncfs."""
    fd = os.open(path, os.O_RDONLY)
    try:
        libc = _libc()
        if libc is None or libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


@functools.cache
def _libc():
    try:
        import ctypes
        import ctypes.util

        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except (OSError, AttributeError):
        return None


def read(state_dir: str, job_id: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The job's script and environment; OSError/ValueError if they are gone or unreadable."""
    path = job_dir(state_dir, job_id)
    with open(os.path.join(path, "script"), "rb") as f:
        script = f.read().decode("utf-8", "surrogateescape")
    with open(os.path.join(path, "environment"), "rb") as f:
        env = tuple((str(k), str(v)) for k, v in orjson.loads(f.read()))
    return script, env


def remove(state_dir: str, job_id: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(job_dir(state_dir, job_id))
