"""A job's own memory cgroup (v2 or v1) when rnoded is root and the job asked for memory: the
limit is enforced like Slurm's task/cgroup, and an OOM kill is known exactly (oom_kill > 0).

Best effort: where the cgroup file system is missing or read-only the job runs without one and
OUT_OF_MEMORY falls back to the shim's heuristic (noded/jobshim.py). Blocking: call in a thread.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("rnoded.jobs")

V2_ROOT = Path("/sys/fs/cgroup")
V1_ROOT = Path("/sys/fs/cgroup/memory")
PARENT = "ranch.jobs"


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _parent(root: Path | None = None) -> tuple[Path, int] | None:
    """(parent dir for job cgroups, version), creating it; None when there is none to use."""
    if root is None:
        if (V2_ROOT / "cgroup.controllers").exists():
            root = V2_ROOT
        elif (V1_ROOT / "memory.limit_in_bytes").exists():
            root = V1_ROOT
        else:
            return None
    version = 2 if (root / "cgroup.controllers").exists() else 1
    parent = root / PARENT
    parent.mkdir(exist_ok=True)
    if version == 2:
        # Job cgroups need the memory controller delegated down to them.
        if "memory" not in (root / "cgroup.subtree_control").read_text().split():
            _write(root / "cgroup.subtree_control", "+memory")
        if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            _write(parent / "cgroup.subtree_control", "+memory")
    return parent, version


def create(name: str, mem_mib: int, root: Path | None = None) -> tuple[str, int] | None:
    """A cgroup limited to mem_mib (swap included where the kernel can say so), as
    (path, version); None (logged) when it cannot be made."""
    try:
        found = _parent(root)
        if found is None:
            return None
        parent, version = found
        path = parent / name
        path.mkdir(exist_ok=True)
        limit = str(mem_mib * 1024 * 1024)
        if version == 2:
            _write(path / "memory.max", limit)
            if (path / "memory.swap.max").exists():
                _write(path / "memory.swap.max", "0")
        else:
            _write(path / "memory.limit_in_bytes", limit)
            if (path / "memory.memsw.limit_in_bytes").exists():
                try:
                    _write(path / "memory.memsw.limit_in_bytes", limit)
                except OSError:
                    pass  # swap accounting off: RAM alone is limited
        return str(path), version
    except OSError as exc:
        log.warning("no memory cgroup for %s (%s): its memory limit is not enforced", name, exc)
        return None


def oom_kills(path: str, version: int) -> int:
    name = "memory.events" if version == 2 else "memory.oom_control"
    try:
        with open(os.path.join(path, name)) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def remove(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError as exc:
        log.debug("cannot remove cgroup %s: %s", path, exc)
