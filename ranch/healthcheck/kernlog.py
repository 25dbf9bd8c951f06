"""Read the kernel log for XID lines: /dev/kmsg first, then `journalctl -k`, then
/var/log/kern.log; the first source that can be read is the one used."""

from __future__ import annotations

import errno
import os
import subprocess

import attrs

from ranch.healthcheck.xid import XidEvent, parse_xid_lines

KMSG = "/dev/kmsg"
KERN_LOG = "/var/log/kern.log"
MAX_BYTES = 32 * 1024 * 1024  # the ring buffer is far smaller; this bounds a runaway file
JOURNAL_TIMEOUT = 15.0


@attrs.frozen
class KernelLog:
    source: str
    lines: tuple[str, ...]


def read_kmsg(path: str = KMSG) -> list[str] | None:
    """Every record in the ring buffer, read without blocking; None when it cannot be read.
    Each read() of /dev/kmsg returns one record; a plain file (tests) returns chunks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    chunks: list[bytes] = []
    total = 0
    try:
        while total < MAX_BYTES:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break  # end of the ring buffer
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # a record was overwritten while we read; carry on
                if chunks:
                    break
                return None  # EPERM (dmesg_restrict) and the like
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace").splitlines()


def read_journal(since: float) -> list[str] | None:
    """Kernel messages of this boot since the given wall time, stamped in epoch seconds."""
    argv = ["journalctl", "-k", "-q", "--no-pager", "-o", "short-unix", "--since", f"@{int(since)}"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=JOURNAL_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout[:MAX_BYTES].decode("utf-8", errors="replace").splitlines()


def read_text_file(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_BYTES:
                handle.seek(size - MAX_BYTES)  # the newest part is what matters
            data = handle.read(MAX_BYTES)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def read_kernel_log(since: float, *, path: str | None = None) -> KernelLog | None:
    """The first readable source, or only `path` when given (a kmsg dump or a syslog file)."""
    if path is not None:
        lines = read_text_file(path)
        return None if lines is None else KernelLog(path, tuple(lines))
    if (lines := read_kmsg()) is not None:
        return KernelLog(KMSG, tuple(lines))
    if (lines := read_journal(since)) is not None:
        return KernelLog("journalctl -k", tuple(lines))
    if (lines := read_text_file(KERN_LOG)) is not None:
        return KernelLog(KERN_LOG, tuple(lines))
    return None


def recent_xids(log: KernelLog, *, window: float, now: float, boot_time: float | None
                ) -> list[XidEvent]:
    """XID events of this boot no older than `window` seconds; undated lines count as recent."""
    oldest = now - window
    if boot_time is not None:
        oldest = max(oldest, boot_time - 1.0)  # a syslog file spans reboots; a reset GPU is new
    events = parse_xid_lines(log.lines, boot_time=boot_time, now=now)
    return [e for e in events if e.time is None or e.time >= oldest]
