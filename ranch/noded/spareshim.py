"""A job supervisor started ahead of its job, so that a launch does not wait for Python's start."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import trio

log = logging.getLogger("rnoded.jobs")

SPARE = "-"  # noded/jobshim.py's SPARE: its job directory comes on stdin
CLOSE_WAIT = 5.0  # a spare told to go exits at once; this only bounds a wedged one


class SpareShim:
    """At most one jobshim process waiting for a job (`python -S -E jobshim.py -`). Python's
    start is most of a batch job's launch on the node (10-40 ms on a loaded machine against a
    few for the rest), so once a node has run a job it keeps the next job's supervisor
    started: `take` hands the waiting one a job directory, `refill` (in the runner's nursery)
    starts the next. Nothing of a job is in a spare: the job's exactly-once rules (the claim,
    pids.json before "ok") are the shim's, unchanged."""

    def __init__(self, python: str, shim: str) -> None:
        self.python = python
        self.shim = shim
        self._proc: trio.Process | None = None
        self._starting = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pid(self) -> int | None:
        """The waiting spare's pid (None when there is none)."""
        return None if self._proc is None else self._proc.pid

    async def refill(self) -> None:
        """Start a spare unless one waits or is being started."""
        if self._proc is not None or self._starting or self._closed:
            return
        self._starting = True
        try:
            proc = await trio.lowlevel.open_process(
                [self.python, "-S", "-E", self.shim, SPARE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,  # its job's shim.log once it has one
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", os.defpath)},
                cwd="/",
            )
        except OSError as exc:  # the next launch starts its supervisor itself
            log.warning("cannot start a spare job supervisor: %s", exc)
            return
        finally:
            self._starting = False
        if self._closed:  # the runner stopped meanwhile
            await _dismiss(proc)
        else:
            self._proc = proc

    async def take(self, jobdir: Path) -> trio.Process | None:
        """The waiting spare, told to supervise the job of `jobdir`; None when there is none
        (or it died): the caller starts one itself."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return None
        assert proc.stdin is not None
        try:
            await proc.stdin.send_all(f"{jobdir}\n".encode())
            await proc.stdin.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await _dismiss(proc)
            return None
        return proc

    async def close(self) -> None:
        """No more spares; the waiting one (if any) is told to go and reaped."""
        self._closed = True
        proc, self._proc = self._proc, None
        if proc is not None:
            await _dismiss(proc)


async def _dismiss(proc: trio.Process) -> None:
    """End a spare that has no job: end of file on its stdin, SIGKILL if it lingers."""
    with trio.CancelScope(shield=True):
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                await stream.aclose()
        with trio.move_on_after(CLOSE_WAIT):
            await proc.wait()
            return
        proc.kill()
        await proc.wait()
