"""Stopping the demo in any way ends everything it started, running jobs included (they run in
sessions of their own, outside any process group of the demo), and removes its directory."""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path

import psutil
import pytest

from tests.demo.running import GONE_WITHIN, RunningDemo, cmdline, wait_for

# How each way of stopping reaches the demo: Ctrl-C goes to the terminal's foreground process
# group, `kill` to the process, and a terminal that closes sends SIGHUP and fails every write.
WAYS = {
    "SIGINT": lambda demo: os.killpg(demo.proc.pid, signal.SIGINT),
    "SIGTERM": lambda demo: demo.proc.send_signal(signal.SIGTERM),
    "terminal closed": RunningDemo.hang_up,
    # its own error: the controller it depends on dies under it
    "rctld killed": lambda demo: _rctld(demo).kill(),
}


def _rctld(demo: RunningDemo) -> psutil.Process:
    return next(p for p in psutil.Process(demo.proc.pid).children()
                if "ranch.ctld" in cmdline(p))


@pytest.mark.parametrize("way", list(WAYS))
def test_stopping_the_demo_leaves_nothing(tmp_path: Path, way: str) -> None:
    demo = RunningDemo(tmp_path, terminal=way == "terminal closed")
    try:
        demo.wait_up()
        marker = f"{600 + secrets.randbelow(10**6)}.25"  # this job's sleep, and no other's
        done = demo.command("ranch.cli.rbatch", "-D", str(demo.dir), "-t", "30:00",
                            "--wrap", f"sleep {marker}")
        assert done.stdout.startswith("Submitted batch job 1"), done.stdout
        job = wait_for(lambda: [p for p in demo.note_processes()
                                if cmdline(p) == ["sleep", marker]], 60, "the job's sleep")
        # The job runs in a session of its own (noded/jobshim.py): no signal to the demo's
        # group or session reaches it.
        assert os.getsid(job[0].pid) not in (os.getsid(demo.proc.pid), demo.proc.pid)
        assert len(demo.seen) >= 1 + 1 + 12 + 3  # demo, rctld, the nodes, shim/sh/sleep

        WAYS[way](demo)
        demo.proc.wait(GONE_WITHIN)
        assert demo.proc.returncode == (1 if way == "rctld killed" else 0), demo.output()
        # It exits only once everything is gone: nothing to wait for.
        assert not demo.survivors((f"sleep {marker}",)), demo.output()
        assert not demo.dir.exists(), sorted(os.listdir(demo.dir))
        assert not demo.link.is_symlink() and not demo.link.exists()
        if way != "terminal closed":  # (nobody reads what it says after that)
            # rnoded leaves its jobs running when it stops (as slurmd does): the demo ends them.
            assert "stopped rctld, 12 nodes and " in demo.output(), demo.output()
    finally:
        demo.kill_all()
