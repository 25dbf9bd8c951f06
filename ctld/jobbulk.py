"""A job's bulk, its script and environment, in files of its own under the state directory
(StateSaveLocation/jobs/hash.N/job.ID/, as slurmctld keeps script and environment): written
once, read when the job launches, never held in memory nor rewritten by a state save.

A submission's journal record holds the bulk until then; before a snapshot lets that record's
segment go, the snapshot writes (and fsyncs) the bulk files of every job new since the last one.
"""

from __future__ import annotations

import contextlib
import os
import shutil

import orjson

from ctld import statefile


def job_dir(state_dir: str, job_id: int) -> str:
    return os.path.join(state_dir, "jobs", f"hash.{job_id % 10}", f"job.{job_id}")


def write(state_dir: str, job_id: int, script: str, env: tuple[tuple[str, str], ...]) -> None:
    """Blocking (the snapshot's thread): script and environment, each written whole and
    fsync'd, then the directory."""
    path = job_dir(state_dir, job_id)
    os.makedirs(path, mode=0o700, exist_ok=True)
    statefile.write_atomic(os.path.join(path, "script"), script.encode("utf-8", "surrogateescape"))
    statefile.write_atomic(os.path.join(path, "environment"), orjson.dumps(env))


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
