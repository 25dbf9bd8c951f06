"""rctld with its event loop watched (fleet.py --loop-steps): every task step and collector pass
that held the loop for LONG_MS or more, with the wall time it began, written as JSON at exit.

    python bench/fleet_lib/loopsteps.py OUT.json -f fleet.conf ...   (rctld's own arguments)

A task step is the stretch between two of a task's awaits: while it runs no other task, frame
or timer is served, so the longest step of a phase is that phase's longest event-loop gap.
"""

from __future__ import annotations

import gc
import json
import runpy
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/, for fleet_lib

import trio

from fleet_lib.longsteps import LongSteps, where

LONG_MS = 20.0


class Steps(LongSteps):
    """Records (wall at start, ms, task, from, to) of each long step; ("gc", gen) for passes.
    Where each task stands, and each step's start, are LongSteps' bookkeeping."""

    def __init__(self) -> None:
        super().__init__()
        self.long: list[tuple[float, float, str, str, str]] = []

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        took = (time.perf_counter() - self._t) * 1000
        to = self._at[id(task)] = where(task)
        if took >= LONG_MS:
            self.long.append((time.time() - took / 1000, round(took, 1),
                              task.name.rsplit(".", 1)[-1], self._from, to))

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_t = time.perf_counter()
            return
        took = (time.perf_counter() - self._gc_t) * 1000
        if took >= LONG_MS:
            self.long.append((time.time() - took / 1000, round(took, 1), "gc",
                              f"generation {info['generation']}", ""))


def main() -> None:
    out, sys.argv = sys.argv[1], ["ranch.ctld.main", *sys.argv[2:]]
    steps = Steps()
    gc.callbacks.append(steps.on_gc)
    real_run = trio.run

    def run(*args: Any, **kwargs: Any) -> Any:
        kwargs["instruments"] = [*kwargs.get("instruments", ()), steps]
        return real_run(*args, **kwargs)

    trio.run = run  # type: ignore[assignment]
    try:
        runpy.run_module("ranch.ctld.main", run_name="__main__", alter_sys=True)
    finally:
        Path(out).write_text(json.dumps(steps.long))


if __name__ == "__main__":
    main()
