"""bench/sched_bench.py on a tiny cluster, so it never rots: its figures are there and sane,
never checked for speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sched_bench_prints_its_figures() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "sched_bench.py"), "--pending",
                          "40", "--nodes", "8", "--rounds", "1"], capture_output=True,
                         text=True, timeout=120, check=True, cwd=ROOT)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert (got["pending"], got["nodes"]) == (40, 8)
    for key in ("pass_start_ms", "pass_wait_ms", "pass_wait_again_ms", "core_wait_ms"):
        assert 0 <= got[key] < 60_000, (key, got)
