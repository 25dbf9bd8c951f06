"""The controller's job history (StateSaveLocation/job_history/jobs.YYYYMMDD.jsonl, one sealed
JSON line per finished run: ctld/state/historyfiles.py) read as a workload, without the
controller's code: the simulator may not import ctld/, so the file format is read here."""

from __future__ import annotations

import glob
import json
import os
import zlib
from collections.abc import Iterable
from typing import Any

from ranch.sim.trace import TraceJob

DIR_NAME = "job_history"  # as ctld/state/historyfiles.py names it
SEAL = b'{"crc":"'  # a sealed line: the checksum of what follows '",' (ctld/state/integrity.py)
HEAD = len(SEAL) + 10


def _record(line: bytes) -> dict[str, Any] | None:
    """The record of one line, None for a torn or damaged one (skipped: a simulation reads
    what checks out; rctld's own start refuses damage)."""
    line = line.rstrip(b"\n")
    if not line:
        return None
    if line.startswith(SEAL):
        try:
            want = int(line[len(SEAL):HEAD - 2], 16)
        except ValueError:
            return None
        if line[HEAD - 2:HEAD] != b'",' or zlib.crc32(line[HEAD:]) != want:
            return None
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) and "job_id" in rec else None


def history_files(path: str) -> list[str]:
    """The day files under `path` (the history directory or the StateSaveLocation)."""
    if os.path.isdir(os.path.join(path, DIR_NAME)):
        path = os.path.join(path, DIR_NAME)
    return sorted(glob.glob(os.path.join(path, "jobs.*.jsonl")))


def read_records(path: str) -> list[dict[str, Any]]:
    """Every run's record, the newest copy of each (job id, restarts)."""
    runs: dict[tuple[int, int], dict[str, Any]] = {}
    for name in history_files(path):
        with open(name, "rb") as f:
            for line in f:
                rec = _record(line)
                if rec is not None:
                    runs[(int(rec["job_id"]), int(rec.get("restarts") or 0))] = rec
    return [runs[k] for k in sorted(runs)]


def jobs_of(records: Iterable[dict[str, Any]]) -> list[TraceJob]:
    """The runs that started, as a workload: submitted at their submit time (seconds from the
    first), running as long as they ran, on as many nodes and CPUs as they held. A requeued
    job's runs each count (each held the nodes)."""
    ran = [r for r in records if r.get("start_time") and r.get("end_time") is not None
           and r.get("submit_time") is not None]
    if not ran:
        return []
    t0 = min(float(r["submit_time"]) for r in ran)
    out = []
    for seq, r in enumerate(sorted(ran, key=lambda r: (r["submit_time"], r["job_id"])), 1):
        nodes = max(1, int(r.get("node_count") or 1))
        cpus = max(1, int(r.get("cpus") or 1))
        limit = r.get("time_limit")
        part = str(r.get("partition") or "").split(",")[0]
        out.append(TraceJob(
            id=seq, submit=float(r["submit_time"]) - t0,
            runtime=max(0.0, float(r["end_time"]) - float(r["start_time"])),
            time_limit=int(limit) if limit is not None else None, procs=cpus,
            uid=int(r.get("uid") or 0), account=str(r.get("account") or ""),
            partition=part, nodes=nodes, cpus_per_node=-(-cpus // nodes),
            user=str(r.get("user") or "")))
    return out
