"""What rrun prints of a step: its tasks' output (by line, labelled) and srun's names for a
group of tasks."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def ranges(ids: list[int]) -> str:
    """0-2,5: how srun names a group of tasks."""
    ids = sorted(ids)
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


class Output:
    """Task output to rrun's stdout/stderr: by whole lines (with --label, "N: " first) unless
    --unbuffered without a label."""

    def __init__(self, ntasks: int, label: bool, unbuffered: bool) -> None:
        self.width = len(str(max(0, ntasks - 1)))
        self.label = label
        self.by_line = label or not unbuffered
        self.partial: dict[tuple[int, int], bytes] = {}
        self.files = {1: sys.stdout.buffer, 2: sys.stderr.buffer}

    def write(self, task: int, fd: int, data: bytes) -> None:
        out = self.files.get(fd, self.files[2])
        if not self.by_line:
            out.write(data)
            out.flush()
            return
        data = self.partial.pop((task, fd), b"") + data
        head, sep, rest = data.rpartition(b"\n")
        if rest:
            self.partial[(task, fd)] = rest
        if sep:
            self._lines(out, task, head + sep)
            out.flush()

    def flush_task(self, task: int) -> None:
        for fd in (1, 2):
            rest = self.partial.pop((task, fd), b"")
            if rest:
                out = self.files[fd]
                self._lines(out, task, rest)
                out.flush()

    def _lines(self, out: Any, task: int, data: bytes) -> None:
        if not self.label:
            out.write(data)
            return
        prefix = f"{task:>{self.width}}: ".encode()
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        out.write(b"".join(prefix + line + b"\n" for line in lines))
