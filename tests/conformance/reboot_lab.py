"""A reboot as a test can have one, for slurmd and rnoded alike: RebootProgram marks the node, the
daemon stops (SlurmdParameters=shutdown_on_reboot), and the lab starts it again a moment later
with `-b`, so that it reports its own start as the node's boot time. A node marked `noreturn`
stays off: its reboot never comes back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

SCRIPT = """#!/bin/sh
# RebootProgram of the conformance suite's reboot lab (tests/conformance/reboot_lab.py)
date +%s.%N >> "$REBOOT_LAB_DIR/$REBOOT_LAB_NODE.reboot"
env > "$REBOOT_LAB_DIR/$REBOOT_LAB_NODE.env"
"""


class RebootLab:
    def __init__(self, directory: Path, nodes: tuple[str, ...], delay: float = 3.0) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o755)
        self.program = self.dir / "reboot.sh"
        self.program.write_text(SCRIPT)
        self.program.chmod(0o755)
        self.nodes = nodes
        self.delay = delay  # the "boot": long enough for a poll to see `boot^`
        self.reboots: dict[str, int] = dict.fromkeys(nodes, 0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def conf(self, resume_timeout: int) -> str:
        return (f"RebootProgram={self.program}\nResumeTimeout={resume_timeout}\n"
                "SlurmdParameters=shutdown_on_reboot\n")

    def env(self, node: str) -> dict[str, str]:
        return {"REBOOT_LAB_DIR": str(self.dir), "REBOOT_LAB_NODE": node}

    def never_returns(self, node: str) -> None:
        (self.dir / f"{node}.noreturn").touch()

    def supervise(self, exited: Callable[[str], bool], restart: Callable[[str], None],
                  stop: Callable[[str], None] | None = None, grace: float = 15.0) -> None:
        """Watch in a thread: a node whose RebootProgram ran and whose daemon stopped is
        started again after `delay` (unless it never returns). `stop`, where given, ends a
        daemon still up `grace` seconds after its RebootProgram ran, as the machine going down
        would: slurmd 22.05 under a loaded suite once never finished its shutdown_on_reboot
        (the program ran, slurmd logged nothing more for 60 s)."""

        def loop() -> None:
            marked: dict[str, float] = {}  # node -> when its RebootProgram's mark was seen
            while not self._stop.wait(0.2):
                for node in self.nodes:
                    mark = self.dir / f"{node}.reboot"
                    if not mark.exists():
                        marked.pop(node, None)
                        continue
                    if not exited(node):
                        since = marked.setdefault(node, time.monotonic())
                        if stop is not None and time.monotonic() - since > grace:
                            stop(node)
                        continue
                    marked.pop(node, None)
                    if (self.dir / f"{node}.noreturn").exists():
                        continue
                    mark.unlink()
                    self.reboots[node] += 1
                    if self._stop.wait(self.delay):
                        return
                    restart(node)

        self._thread = threading.Thread(target=loop, name="reboot-lab", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def wait(pred: Callable[[], object], timeout: float, what: str, interval: float = 0.2) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
