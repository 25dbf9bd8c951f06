"""racct's default window starts at today's local midnight (sacct's), found without datetime:
the same instant datetime gives, across a year, in zones with and without daylight saving."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CODE = """
import datetime as dt, sys, time
from types import SimpleNamespace
from ranch.cli.racct import window
args = SimpleNamespace(starttime=None, endtime=None, jobs=[], state=None)
for hour in range(0, 24 * 400, 7):
    now = 1_700_000_000 + hour * 3600.0
    want = dt.datetime.combine(dt.date.fromtimestamp(now), dt.time()).timestamp()
    assert window(args, now)[0] == want, (now, window(args, now)[0], want)
"""


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"])
def test_default_window_starts_at_local_midnight(zone: str) -> None:
    subprocess.run([sys.executable, "-c", CODE], cwd=REPO, check=True,
                   env={"TZ": zone, "PYTHONPATH": str(REPO)})
