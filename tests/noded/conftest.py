"""Shared fixtures of the node tests."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ranch.noded import jobstore
from ranch.noded.runningjob import alive


@pytest.fixture(autouse=True)
def _no_stray_jobs(tmp_path: Path) -> Iterator[None]:
    """A failed test must not leave its jobs waiting forever: kill every job it started."""
    yield
    for pids_file in tmp_path.rglob("jobs/*/pids.json"):
        pids = jobstore.read_json(pids_file) or {}
        if not {"shim_pid", "shim_start"} <= pids.keys():
            continue
        if not alive(int(pids["shim_pid"]), int(pids["shim_start"])):
            continue
        try:
            shim = psutil.Process(int(pids["shim_pid"]))
            for proc in [*shim.children(recursive=True), shim]:
                proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
