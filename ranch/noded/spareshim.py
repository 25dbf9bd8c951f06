"""The job supervisors' fork server: started once, it forks each job's supervisor, so that a launch
neither waits for Python's start nor pays for it."""

from __future__ import annotations

import array
import logging
import os
import signal
import socket
import subprocess
from pathlib import Path

import trio

log = logging.getLogger("rnoded.jobs")

SERVER = "+"  # noded/jobshim.py's SERVER: job directories come on its stdin socket
CLOSE_WAIT = 5.0  # a server told to go exits at once; this only bounds a wedged one
FORK_WAIT = 5.0  # the server answers a fork within milliseconds; past this it is taken for dead


class Forked:
    """A job supervisor the server forked: its pid, its answer pipe, and (its parent being the
    server, not us) a pidfd to signal and wait on it."""

    def __init__(self, pid: int, answer: int) -> None:
        self.pid = pid
        self.stdout = trio.lowlevel.FdStream(answer)
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:  # gone already (its answer says how it went), or no pidfd here
            self._pidfd = None

    def kill(self) -> None:
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        except OSError:
            pass

    async def wait(self) -> None:
        if self._pidfd is not None:
            await trio.lowlevel.wait_readable(self._pidfd)
        self.close()

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class SpareShim:
    """A jobshim process kept started (`python -S -E jobshim.py +`) that forks each job's
    supervisor. Python's start is most of a batch job's launch on the node (10-40 ms of wall
    on a loaded machine, 8-10 ms of CPU, against about one for a fork of the server), so once a
    node has run a job it keeps the server: `take` hands it a job directory and the write end of
    the job's answer pipe and gets the child's pid back, `refill` (in the runner's nursery)
    starts a server where none runs. Nothing of a job is in the server: the job's exactly-once
    rules (the claim, pids.json before "ok") are the forked shim's, as a cold start's."""

    def __init__(self, python: str, shim: str) -> None:
        self.python = python
        self.shim = shim
        self._proc: trio.Process | None = None
        self._sock: trio.socket.SocketType | None = None
        self._lock = trio.Lock()  # one fork at a time: answers come back in order
        self._starting = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pid(self) -> int | None:
        """The server's pid (None when there is none)."""
        return None if self._proc is None else self._proc.pid

    async def refill(self) -> None:
        """Start a server unless one runs or is being started."""
        if self._proc is not None or self._starting or self._closed:
            return
        self._starting = True
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = await trio.lowlevel.open_process(
                [self.python, "-S", "-E", self.shim, SERVER],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # each child's is its job's shim.log
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", os.defpath)},
                cwd="/",
            )
        except OSError as exc:  # the next launch starts its supervisor itself
            log.warning("cannot start the job supervisors' server: %s", exc)
            ours.close()
            return
        finally:
            theirs.close()
            self._starting = False
        self._proc, self._sock = proc, trio.socket.from_stdlib_socket(ours)
        if self._closed:  # the runner stopped meanwhile
            await self.close()

    async def take(self, jobdir: Path) -> Forked | None:
        """A supervisor forked for the job of `jobdir`; None when there is no server (or it
        died, or wedged: it is then dismissed): the caller starts one itself."""
        if self._sock is None or self._proc is None or self._proc.poll() is not None:
            await self._drop()
            return None
        read, write = os.pipe2(os.O_CLOEXEC)
        reply = b""
        try:
            async with self._lock:
                with trio.move_on_after(FORK_WAIT):
                    fds = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [write]))]
                    await self._sock.sendmsg([os.fsencode(jobdir)], fds)
                    reply = await self._sock.recv(64)
        except OSError:
            pass
        finally:
            os.close(write)
        if not reply.isdigit():
            os.close(read)
            log.warning("the job supervisors' server did not answer; starting one afresh")
            await self._drop()
            return None
        return Forked(int(reply), read)

    async def _drop(self) -> None:
        proc, sock, self._proc, self._sock = self._proc, self._sock, None, None
        if proc is not None:
            await _dismiss(proc, sock)

    async def close(self) -> None:
        """No more servers; the running one (if any) is told to go and reaped. The supervisors
        it forked run on: their jobs outlive rnoded."""
        self._closed = True
        await self._drop()


async def _dismiss(proc: trio.Process, sock: trio.socket.SocketType | None) -> None:
    """End a server: end of file on its socket, SIGKILL if it lingers."""
    with trio.CancelScope(shield=True):
        if sock is not None:
            sock.close()
        with trio.move_on_after(CLOSE_WAIT):
            await proc.wait()
            return
        proc.kill()
        await proc.wait()
