"""A step's records in the spool dir (SPOOL/steps/JOB.RESTARTS.STEP/): what the next rnoded needs
to carry on with a step after a restart, and its end until the controller has it.

Files: spec.json (the StepSpec and when it started), launch.bin (for noded/stepshim.py),
pids.bin and exit.TASK (written by the shim: how each task ended and the CPU it used), end.json
(the StepEnd, until acknowledged), shim.log; out.TASK.FD.OFFSET are noded/stepspool.py's. All
blocking: call through a thread.
"""

from __future__ import annotations

import marshal
import os
import shutil
from pathlib import Path
from typing import Any

import orjson

from ranch.noded.jobstore import read_json
from ranch.protocol.codec import converter
from ranch.protocol.messages import StepEnd, StepSpec

STEPS = "steps"


def step_dir(spool_dir: str, spec: StepSpec) -> Path:
    return Path(spool_dir) / STEPS / f"{spec.job_id}.{spec.restarts}.{spec.step_id}"


def create(spool_dir: str, spec: StepSpec, started_at: float, launch: dict) -> Path:
    """The step's directory with its spec and the shim's launch record. The directory lets
    the tasks' users through (0711), as the jobs' does: a task's cwd may be anywhere, but
    nothing of the step's is theirs to read."""
    root = Path(spool_dir) / STEPS
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = step_dir(spool_dir, spec)
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(mode=0o700)
    # no fsync: these serve an rnoded restart, not the machine's (its tasks die with it)
    with open(path / "spec.json.tmp", "wb") as f:
        f.write(orjson.dumps({"spec": converter.unstructure(spec), "started_at": started_at}))
    os.replace(path / "spec.json.tmp", path / "spec.json")
    with open(path / "launch.bin", "wb") as f:
        f.write(marshal.dumps(launch))
    return path


def load_spec(path: Path) -> tuple[StepSpec, float] | None:
    data = read_json(path / "spec.json")
    if data is None:
        return None
    try:
        return converter.structure(data["spec"], StepSpec), float(data["started_at"])
    except Exception:  # a record from an incompatible version
        return None


def read_marshal(path: Path) -> Any | None:
    try:
        return marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None


def load_pids(path: Path) -> dict | None:
    return read_marshal(path / "pids.bin")


def load_exit(path: Path, task: int) -> tuple[int, int, float, tuple[float, float] | None] | None:
    """(exit code, signal, when, (user s, system s) of its rusage) of a task the shim reaped;
    the CPU is None in the record of a shim from before issue 48 (three fields)."""
    data = read_marshal(path / f"exit.{task}")
    if not isinstance(data, tuple) or len(data) not in (3, 5):
        return None
    cpu = (float(data[3]), float(data[4])) if len(data) == 5 else None
    return int(data[0]), int(data[1]), float(data[2]), cpu


def save_end(path: Path, end: StepEnd) -> None:
    """Not synced: it serves an rnoded restart (the machine's would take the tasks along, and
    without it the next rnoded works the same end out from the shim's records)."""
    tmp = path / "end.json.tmp"
    tmp.write_bytes(orjson.dumps(converter.unstructure(end)))
    os.replace(tmp, path / "end.json")


def load_end(path: Path) -> StepEnd | None:
    data = read_json(path / "end.json")
    if data is None:
        return None
    try:
        return converter.structure(data, StepEnd)
    except Exception:
        return None


def list_dirs(spool_dir: str) -> list[Path]:
    root = Path(spool_dir) / STEPS
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir())


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
