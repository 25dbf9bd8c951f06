"""The longest task steps of a trio run, each named by where its task stood before and after
(the stretch of code that held the event loop), and the collector's passes among them."""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

import trio


def where(task: trio.lowlevel.Task) -> str:
    """The innermost three frames the task is suspended in ("file:line > ...")."""
    frames = []
    coro: Any = task.coro
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        frames.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return " > ".join(frames[-3:]) or "(ended)"


class LongSteps(trio.abc.Instrument):
    """Keeps the `keep` longest steps: (ms, task, from, to); and each collector pass (gen, ms)."""

    def __init__(self, keep: int = 5) -> None:
        self.keep = keep
        self.steps: list[tuple[float, str, str, str]] = []
        self.gc: list[tuple[int, float]] = []
        self._at: dict[int, str] = {}
        self._t = self._gc_t = 0.0
        self._from = ""

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._from = self._at.get(id(task), "(start)")
        self._t = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        ms = (time.perf_counter() - self._t) * 1000
        to = where(task)
        self._at[id(task)] = to
        if len(self.steps) < self.keep or ms > self.steps[-1][0]:
            self.steps.append((round(ms, 1), task.name.rsplit(".", 1)[-1], self._from, to))
            self.steps.sort(reverse=True)
            del self.steps[self.keep:]

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_t = time.perf_counter()
        else:
            self.gc.append((info["generation"],
                            round((time.perf_counter() - self._gc_t) * 1000, 1)))

    def __enter__(self) -> LongSteps:
        trio.lowlevel.add_instrument(self)
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        trio.lowlevel.remove_instrument(self)
        gc.callbacks.remove(self._on_gc)

    def report(self) -> dict[str, Any]:
        full = [ms for gen, ms in self.gc if gen == 2]
        return {"longest_steps": [list(s) for s in self.steps],
                "gc_passes": len(self.gc), "gc_full_ms": full,
                "gc_longest_ms": max((ms for _, ms in self.gc), default=0.0)}
