"""Run rctld with its garbage-collector passes timed, to reproduce the GC figures of
docs/benchmarks.md:

    FLEET_CTLD=bench/fleet_lib/gcprobe.py FLEET_GC_OUT=/tmp/gc.txt \\
        [FLEET_GC_THRESHOLD=50000,20,100] .venv/bin/python bench/fleet.py --nodes 10000 ...

It writes per-generation counts, total and longest pause to FLEET_GC_OUT every 5 s (the
benchmark may SIGKILL a controller that does not stop), then runs `ranch.ctld.main` unchanged."""

from __future__ import annotations

import gc
import os
import runpy
import sys
import threading
import time
from pathlib import Path

OUT = Path(os.environ.get("FLEET_GC_OUT", "gcprobe.txt"))
pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
_started = [0.0]


def _on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
    else:
        pauses[info["generation"]].append(time.perf_counter() - _started[0])


def _write() -> None:
    lines = []
    for gen, xs in pauses.items():
        if xs:
            lines.append(f"gen{gen}: passes={len(xs)} total={sum(xs):.3f}s "
                         f"longest={max(xs) * 1000:.1f}ms")  # fmt: skip
    OUT.write_text("\n".join(lines) + "\n")


def _writer() -> None:
    while True:
        time.sleep(5)
        _write()


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    threshold = os.environ.get("FLEET_GC_THRESHOLD")
    if threshold:
        gc.set_threshold(*(int(x) for x in threshold.split(",")))
    gc.callbacks.append(_on_gc)
    threading.Thread(target=_writer, daemon=True).start()
    sys.argv = ["rctld", *sys.argv[1:]]
    try:
        runpy.run_module("ranch.ctld.main", run_name="__main__")
    finally:
        _write()


if __name__ == "__main__":
    main()
