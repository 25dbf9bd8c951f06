"""Launch cost of a job on a node: the shim's start-up (python -S -E noded/jobshim.py) up to its
"ok" line, with and without -S -E, and JobRunner.launch end to end (record files, shim, Ack),
with the supervisors' fork server (noded/spareshim.py: every job after the first is forked) and
without it (every job's supervisor a Python start).

    python bench/jobshim_bench.py [--runs N]

Wall times per launch, and CPU per job (until every job ended: this process, the shims and the
jobs) from a cpuacct group where this machine lets us make one (root, cgroup v1), else
RUSAGE_CHILDREN, which misses the forked supervisors (the server's children, reaped by the
kernel) and so is given for the cold starts alone."""

from __future__ import annotations

import argparse
import marshal
import os
import resource
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


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class Cpu:
    """CPU ms of this process and its children: a cpuacct group of our own, else rusage."""

    def __init__(self) -> None:
        self.group: Path | None = CPUACCT / f"bench-jobshim-{os.getpid()}"
        try:
            self.group.mkdir()
            (self.group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            self.group = None

    def ms(self) -> float:
        if self.group is not None:
            return int((self.group / "cpuacct.usage").read_text()) / 1e6
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        s = resource.getrusage(resource.RUSAGE_SELF)
        return (r.ru_utime + r.ru_stime + s.ru_utime + s.ru_stime) * 1000

    def close(self) -> None:
        if self.group is not None:
            (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            self.group.rmdir()


async def runner_launch(runs: int, base: Path, server: bool = True) -> list[float]:
    base.mkdir(parents=True)
    runner = JobRunner(str(base / "spool"), "b1")
    times = []
    async with trio.open_nursery() as nursery:
        await nursery.start(runner.run)
        if not server:
            await runner.spare.close()  # every supervisor a Python start
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


def measured(cpu: Cpu, run) -> tuple[list[float], float]:
    """(wall times, CPU ms) of one row."""
    c0 = cpu.ms()
    times = run()
    return times, cpu.ms() - c0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=50)
    args = p.parse_args()
    cpu = Cpu()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            rows = [
                ("shim start, python -S -E", measured(
                    cpu, lambda: shim_start(["-S", "-E"], args.runs, base / "a"))),
                ("shim start, plain python", measured(
                    cpu, lambda: shim_start([], args.runs, base / "b"))),
                ("JobRunner.launch, no server", measured(
                    cpu, lambda: trio.run(runner_launch, args.runs, base / "c", False))),
                ("JobRunner.launch (to Ack)", measured(
                    cpu, lambda: trio.run(runner_launch, args.runs, base / "d"))),
            ]
    finally:
        cpu.close()
    title = f"launch cost, {args.runs} runs"
    print(f"{title:34} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'CPU/job':>8}")
    for name, (times, used) in rows:
        ms = [t * 1000 for t in times]
        exact = cpu.group is not None or "JobRunner" not in name or "no server" in name
        cost = f"{used / args.runs:8.1f}" if exact else f"{'-':>8}"
        print(f"{name:34} {pct(ms, 0.5):8.1f} {pct(ms, 0.99):8.1f} {statistics.mean(ms):8.1f} "
              f"{cost}")


if __name__ == "__main__":
    main()
