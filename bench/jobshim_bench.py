"""Launch cost of a job on a node: the shim's start-up (python -S -E noded/jobshim.py) up to its
"ok" line, with and without -S -E, and JobRunner.launch end to end (record files, shim, Ack).

    python bench/jobshim_bench.py [--runs N]"""

from __future__ import annotations

import argparse
import marshal
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ranch.noded.joblaunch import SHIM
from ranch.noded.jobs import JobRunner
from ranch.protocol.messages import JobSpec


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def shim_start(flags: list[str], runs: int, base: Path) -> list[float]:
    """Seconds from spawning the shim to its "ok" line (the script is /bin/true)."""
    base.mkdir(parents=True)
    times = []
    for i in range(runs):
        d = base / f"s{i}"
        d.mkdir()
        launch = {
            "drop": False,
            "uid": 0,
            "gid": 0,
            "groups": [],
            "env": {"PATH": os.defpath},
            "workdir": str(base),
            "stdout": os.devnull,
            "stderr": "",
            "append": False,
            "argv": ["/bin/true"],
        }
        (d / "launch.bin").write_bytes(marshal.dumps(launch))
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, *flags, SHIM, str(d)], stdout=subprocess.PIPE, start_new_session=True
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        times.append(time.perf_counter() - start)
        proc.wait()
        assert line.startswith(b"ok"), line
    return times


async def runner_launch(runs: int, base: Path) -> list[float]:
    base.mkdir(parents=True)
    runner = JobRunner(str(base / "spool"), "b1")
    times = []
    async with trio.open_nursery() as nursery:
        await nursery.start(runner.run)
        for i in range(runs):
            spec = JobSpec(
                i + 1,
                "b",
                "bench",
                os.getuid(),
                os.getgid(),
                "#!/bin/sh\ntrue\n",
                str(base),
                "/dev/null",
            )
            start = time.perf_counter()
            await runner.launch(spec)
            times.append(time.perf_counter() - start)
        while len(runner.endings()) < runs:
            await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    return times


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=50)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        rows = [
            ("shim start, python -S -E", shim_start(["-S", "-E"], args.runs, base / "a")),
            ("shim start, plain python", shim_start([], args.runs, base / "b")),
            ("JobRunner.launch (to Ack)", trio.run(runner_launch, args.runs, base / "c")),
        ]
    title = f"launch cost, {args.runs} runs"
    print(f"{title:34} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for name, times in rows:
        ms = [t * 1000 for t in times]
        print(f"{name:34} {pct(ms, 0.5):8.1f} {pct(ms, 0.99):8.1f} {statistics.mean(ms):8.1f}")


if __name__ == "__main__":
    main()
