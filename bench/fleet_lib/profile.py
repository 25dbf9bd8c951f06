"""Optional py-spy sampling of rctld during a phase of the run (--profile-ctld DIR), summarised
as the functions holding the most samples, by self time and by inclusive time."""

from __future__ import annotations

import shutil
import signal
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TypeVar

import trio

T = TypeVar("T")
IDLE_FRAMES = ("get_events", "_epoll_wait", "select", "poll ", "_work (")


def py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


@asynccontextmanager
async def sampled(pid: int | None, out_dir: Path | None, phase: str):
    """Sample `pid` with py-spy while the block runs; writes DIR/PHASE.raw and DIR/PHASE.txt."""
    tool = py_spy()
    if pid is None or out_dir is None or tool is None:
        yield
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = out_dir / f"{phase}.raw"
    argv = [tool, "record", "-p", str(pid), "-r", "200", "-f", "raw", "--nonblocking",
            "-o", str(raw)]
    run = partial(trio.run_process, argv, check=False, capture_stdout=True, capture_stderr=True)
    async with trio.open_nursery() as nursery:
        proc = await nursery.start(run)
        try:
            yield
        finally:
            proc.send_signal(signal.SIGINT)  # py-spy writes its file and exits
    if raw.exists():
        (out_dir / f"{phase}.txt").write_text(summarise(raw))


def summarise(raw: Path, top: int = 30) -> str:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = idle = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        if any(mark in frames[-1] for mark in IDLE_FRAMES):
            idle += n
            continue
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n
    lines = [f"busy samples {total}, idle samples {idle}", "", "self:"]
    lines += [f"{100 * n / max(total, 1):6.1f}%  {f}" for f, n in own.most_common(top)]
    lines += ["", "inclusive:"]
    lines += [f"{100 * n / max(total, 1):6.1f}%  {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(lines) + "\n"


def sample_stop(pid: int | None, out_dir: Path | None, stop: Callable[[], T]) -> T:
    """Call `stop()` (which ends process `pid`) while py-spy samples it; DIR/stop.txt."""
    tool = py_spy()
    if pid is None or out_dir is None or tool is None:
        return stop()
    import subprocess
    import time

    out_dir.mkdir(parents=True, exist_ok=True)
    raw = out_dir / "stop.raw"
    spy = subprocess.Popen(
        [tool, "record", "-p", str(pid), "-r", "200", "-f", "raw", "--nonblocking", "-o", str(raw)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # py-spy attaches
    try:
        return stop()
    finally:
        try:
            spy.wait(timeout=30)  # it ends with its target and writes the file
        except subprocess.TimeoutExpired:
            spy.kill()
        if raw.exists():
            (out_dir / "stop.txt").write_text(summarise(raw))
