"""The node's job records in its spool dir (SPOOL/jobs/JOBID.RESTARTS/): what rnoded needs to
re-adopt a running job after its own restart, and endings kept until the controller has them.

Files of one job directory: spec.json (the JobSpec), launch.bin (marshal, for the shim), script,
pids.json and status.json (written by the shim), claim (taken by the shim before it starts the
script, or by a restarted rnoded to stop a start it gave up), ending.json (why rnoded is killing
it), end.json (the JobEnd, until acknowledged), shim.log. All blocking: call through a thread.
"""

from __future__ import annotations

import marshal
import os
import shutil
from pathlib import Path
from typing import Any

import orjson

from ranch.protocol import durable
from ranch.protocol.codec import converter
from ranch.protocol.messages import JobEnd, JobSpec

JOBS = "jobs"


def jobs_root(spool_dir: str) -> Path:
    return Path(spool_dir) / JOBS


def job_dir(spool_dir: str, spec: JobSpec) -> Path:
    # One directory per run: a requeued job that comes back here never meets its old records.
    return jobs_root(spool_dir) / f"{spec.job_id}.{spec.restarts}"


def write_json(path: Path, data: Any) -> None:
    durable.write_atomic(path, orjson.dumps(data))


def read_json(path: Path) -> Any | None:
    """The file's data; None when it does not exist or is not whole (a crash mid-write)."""
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def create(spool_dir: str, spec: JobSpec, launch: dict, owner: tuple[int, int] | None) -> Path:
    """Make the job's directory with its spec, script and launch record. `owner` (uid, gid): the
    script's owner when jobs run as other users; the directories then let them through (0711)."""
    root = jobs_root(spool_dir)
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if owner is not None:
        for d in (Path(spool_dir), root):
            os.chmod(d, os.stat(d).st_mode & 0o7777 | 0o011)
    path = job_dir(spool_dir, spec)
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(mode=0o711 if owner is not None else 0o700)
    script = path / "script"
    fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
    with os.fdopen(fd, "w") as f:
        f.write(spec.script)
    if owner is not None:
        os.chown(script, *owner)
    os.chmod(script, 0o700)
    write_json(path / "spec.json", converter.unstructure(spec))
    launch = dict(launch, argv=[str(script), *spec.argv])
    data = marshal.dumps(launch)
    with open(path / "launch.bin", "wb") as f:
        f.write(data)
    return path


def load_spec(path: Path) -> JobSpec | None:
    data = read_json(path / "spec.json")
    if data is None:
        return None
    try:
        return converter.structure(data, JobSpec)
    except Exception:  # a record from an incompatible version: not ours to run
        return None


def save_end(path: Path, end: JobEnd) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)  # a launch can fail before create()
    write_json(path / "end.json", converter.unstructure(end))


def load_end(path: Path) -> JobEnd | None:
    data = read_json(path / "end.json")
    if data is None:
        return None
    try:
        return converter.structure(data, JobEnd)
    except Exception:
        return None


CLAIM = "claim"  # noded/jobshim.py's CLAIM


def claim(path: Path) -> bool:
    """Take the run's claim file before its shim does (O_EXCL): True when the shim had not
    taken it, so its script never started and never will (the shim then refuses to)."""
    try:
        os.close(os.open(path / CLAIM, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False
    return True


def save_ending(path: Path, state: str, silent: bool) -> None:
    write_json(path / "ending.json", {"state": state, "silent": silent})


def load_ending(path: Path) -> tuple[str, bool]:
    data = read_json(path / "ending.json") or {}
    return str(data.get("state", "")), bool(data.get("silent", False))


def list_dirs(spool_dir: str) -> list[Path]:
    root = jobs_root(spool_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir())


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
