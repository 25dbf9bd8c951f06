"""A step's output on its way to rrun, kept in the step's directory until rrun says it has it, so
that no output is lost or said twice when rnoded is killed.

The shim holds the tasks' pipes, so what is still in a pipe survives rnoded; what rnoded had read
and not yet got to rrun (read and killed before sending it, or lost with the connection's unsent
bytes) would not. So each piece read is written here before it is sent (no fsync: only rnoded
dies, the machine and its page cache stay), and rrun counts the bytes of each stream it took
(protocol OutputAck): it says its counts in answer to each StepHello, and after every so much
output. A restarted rnoded waits for those counts, sends again what follows them here, and only
then reads the pipes on. What rrun has is let go a file at a time, and a stream that runs too far
ahead of rrun's word stops being read (its task blocks, as on a full pipe), so the spool stays
small. Only for steps whose rrun acknowledges (StepSpec.io_resume): an older one never would.

Files: out.TASK.FD.OFFSET, OFFSET the stream's byte the file starts at.
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import termios
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import trio

from ranch.protocol.messages import TaskOutput

log = logging.getLogger("rnoded.steps")

SEGMENT = 256 << 10  # a file holds this much before the next one starts
# a stream this far ahead of rrun's count is not read on until rrun acknowledges more (rrun
# acknowledges every 1 MiB it takes: cli/step_io.py ACK_EVERY; at least that, or they would
# wait for each other)
LIMIT = 4 << 20
HANG_UP = 10.0  # what is still queued for rrun at the end gets this long to reach it
CHUNK = 1 << 16  # one TaskOutput frame at most


class Spool:
    """One stream of one task (its stdout or stderr to rrun)."""

    def __init__(self, path: Path, task: int, fd: int) -> None:
        self.path = path
        self.key = (task, fd)
        self.prefix = f"out.{task}.{fd}."
        self.starts: list[int] = []  # each file's first byte, in order
        try:
            names = os.listdir(path)
        except OSError:
            names = []
        for name in names:
            rest = name[len(self.prefix):]
            if name.startswith(self.prefix) and rest.isdigit():
                self.starts.append(int(rest))
        self.starts.sort()
        self.end = 0  # the stream's bytes read from its pipe so far, by every rnoded
        if self.starts:
            self.end = self.starts[-1] + self._size(self.starts[-1])
        self.acked = self.starts[0] if self.starts else 0  # rrun has every byte before this
        self.resent = trio.Event()  # what rrun missed was sent again (or there was nothing)
        self._fd = -1
        self._broken = False

    def _file(self, start: int) -> Path:
        return self.path / f"{self.prefix}{start}"

    def _size(self, start: int) -> int:
        try:
            return os.stat(self._file(start)).st_size
        except OSError:
            return 0

    def append(self, data: bytes) -> None:
        """What was just read from the pipe, before it is sent. A page-cache write: not worth
        a thread. A failure (the spool's disk full) costs only the resending."""
        if self._broken:
            self.end += len(data)
            return
        try:
            if self._fd < 0 or self.end - self.starts[-1] >= SEGMENT:
                self._next_file()
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            log.warning("cannot spool the output of %s: %s (it is not sent again after an "
                        "rnoded restart)", self._file(self.end), exc)
            self._broken = True
        self.end += len(data)

    def _next_file(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if not self.starts or self.starts[-1] != self.end:
            self.starts.append(self.end)
        self._fd = os.open(self._file(self.starts[-1]),
                           os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def trim(self, received: int) -> None:
        """rrun has the stream's first `received` bytes: the files wholly before them go (the
        one being written stays)."""
        self.acked = max(self.acked, min(received, self.end))
        while len(self.starts) > 1 and self.starts[1] <= self.acked:
            try:
                os.unlink(self._file(self.starts.pop(0)))
            except OSError:
                pass

    def read(self, start: int) -> Iterator[bytes]:
        """The stream's bytes from `start` to its end, as the files still hold them."""
        for i, first in enumerate(self.starts):
            last = self.starts[i + 1] if i + 1 < len(self.starts) else self.end
            if last <= start:
                continue
            pos = max(start, first)
            try:
                with open(self._file(first), "rb") as f:
                    f.seek(pos - first)
                    while pos < last and (chunk := f.read(min(CHUNK, last - pos))):
                        pos += len(chunk)
                        yield chunk
            except OSError as exc:
                log.warning("cannot read spooled output %s: %s", self._file(first), exc)
                return

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class StepOutput:
    """The spools of a step's streams here, and rrun's word on them."""

    def __init__(self, path: Path, streams: list[tuple[int, int]], *, resuming: bool) -> None:
        self.spools = {(task, fd): Spool(path, task, fd) for task, fd in streams}
        self.received: dict[tuple[int, int], int] = {}  # rrun's counts, its last OutputAck's
        # rrun's first OutputAck on this connection, or the connection's end: a resumed stream
        # sends what rrun missed once it came
        self.answered = trio.Event()
        self._acked = trio.Event()  # set (and renewed) at each OutputAck
        if not resuming:  # a first connection: rrun has nothing yet
            for spool in self.spools.values():
                spool.resent.set()

    def took(self, received: tuple[tuple[int, int, int], ...]) -> None:
        """rrun's OutputAck."""
        for task, fd, count in received:
            self.received[(task, fd)] = count
            spool = self.spools.get((task, fd))
            if spool is not None:
                spool.trim(count)
        self.answered.set()
        acked, self._acked = self._acked, trio.Event()
        acked.set()

    async def room(self, spool: Spool, connected: Callable[[], bool]) -> None:
        """Wait while the stream is LIMIT ahead of rrun's count (and rrun is still there to
        say more: `connected()`)."""
        while spool.end - spool.acked >= LIMIT and connected():
            with trio.move_on_after(1.0):  # rrun's connection may go meanwhile
                await self._acked.wait()

    def missed(self, spool: Spool) -> Iterator[bytes]:
        """What rrun never got of this stream, by its counts."""
        return spool.read(self.received.get(spool.key, 0))

    async def all_resent(self, task: int) -> None:
        for (t, _), spool in self.spools.items():
            if t == task:
                await spool.resent.wait()

    def close(self) -> None:
        for spool in self.spools.values():
            spool.close()


async def pump(step: Any, task: int, fd: int, stream: Any, forward: bool,
               say: Callable[[Any, Any], Awaitable[None]]) -> None:
    """Read a task's pipe to its end (or its closing), each piece spooled (when rrun
    acknowledges) and sent to rrun by `say`; after a restart, what rrun never got first.
    `step`: a RunningStep (noded/steptasks.py, which imports this module)."""
    out = step.out
    spool = out.spools.get((task, fd)) if out is not None else None
    try:
        if spool is not None and not spool.resent.is_set():  # after a restart: rrun's word
            await out.answered.wait()  # on what it has, and what it never got, comes first
            start = out.received.get(spool.key, 0)
            if spool.end > start and step.fs is not None:
                log.info("step %d.%d: sending task %d's %s again from byte %d: %d bytes rrun "
                         "never got", step.spec.job_id, step.spec.step_id, task,
                         "stdout" if fd == 1 else "stderr", start, spool.end - start)
            for data in out.missed(spool):
                await say(step, TaskOutput(task, fd, data.decode("latin-1")))
            spool.resent.set()
        while True:
            if spool is not None:  # not too far ahead of what rrun acknowledged
                await out.room(spool, lambda: step.fs is not None)
            try:
                data = await stream.receive_some(CHUNK)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return
            if not data:
                return
            if forward:
                if spool is not None:  # before it is sent: a kill now loses none of it
                    spool.append(data)
                await say(step, TaskOutput(task, fd, data.decode("latin-1")))
    finally:
        if spool is not None:
            spool.resent.set()


async def hang_up(fs: Any) -> None:
    """Close the connection to rrun without losing what is still queued for it. A socket
    closed with rrun's frames unread (an OutputAck may come after the last frame read) is
    reset, and a reset drops what rrun's kernel had not yet taken (what it took stays, to be
    read): so first the end of ours, then rrun's frames read away until it took everything."""
    stream = fs.stream
    with trio.move_on_after(HANG_UP):
        try:
            if _queued(stream):  # as a rule nothing is: rrun's kernel took it all
                await stream.send_eof()
            while _queued(stream):
                with trio.move_on_after(0.01):
                    if not await stream.receive_some(1 << 16):
                        break  # rrun closed: nothing queued can reach it now
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    with trio.move_on_after(2):
        await fs.aclose()


def _queued(stream: Any) -> int:
    """Bytes sent on the socket that rrun's kernel has not acknowledged (SIOCOUTQ)."""
    sock = getattr(stream, "socket", None)
    if sock is None:
        return 0
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0))
    except OSError:
        return 0
    return int(struct.unpack("i", raw)[0])
