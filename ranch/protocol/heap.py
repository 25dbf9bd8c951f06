"""The daemons' heap: glibc's malloc on transparent huge pages, chosen by one re-exec at start.

Why: a daemon woken every few to tens of milliseconds finds its memory cold, and CPython's own
allocator spreads a request's objects over arenas of 4 KiB pages: every page touched cold is a
TLB miss. glibc's malloc with `glibc.malloc.hugetlb=1` asks for 2 MiB pages for its heap: rctld's
CPU per job run fell 10 % beside Slurm, per held submission 40 a second apart 43 % in process
(docs/benchmarks.md, thirteenth pass). The interpreter reads PYTHONMALLOC and glibc reads
GLIBC_TUNABLES only when a process starts, hence the one re-exec (same pid: systemd and pid files
see one process); the re-executed daemon puts its environment back as it found it, so what it
starts (jobs, shims, programs) never inherits either. An admin who sets PYTHONMALLOC (`pymalloc`
is CPython's default) keeps it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

MARK = "RANCH_HEAP"  # present in the re-executed daemon's environment only, taken out at once
WAS = "RANCH_HEAP_TUNABLES"  # the GLIBC_TUNABLES it started with, when there were any
TUNABLE = "glibc.malloc.hugetlb=1"
THP_FILE = "/sys/kernel/mm/transparent_hugepage/enabled"
GLIBC_MIN = (2, 35)  # the first glibc with glibc.malloc.hugetlb


def thp_mode(text: str) -> str:
    """The chosen mode of the kernel's THP file ("always [madvise] never" -> "madvise")."""
    _, bracket, rest = text.partition("[")
    return rest.partition("]")[0].strip() if bracket else ""


def glibc_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of os.confstr's "glibc 2.36"; None for another C library.
    (No `re` here: this runs before the re-exec, where every import is paid twice.)"""
    name, _, number = (text or "").partition(" ")
    parts = number.split(".")
    if name != "glibc" or len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def plan(environ: Mapping[str, str], *, platform: str, libc: str, thp: str
         ) -> dict[str, str] | None:
    """The environment to re-execute with, or None to run as started: not Linux, not a glibc
    that knows the tunable, huge pages off (`never`), PYTHONMALLOC chosen by whoever started us,
    or this process being the re-executed one."""
    if MARK in environ or "PYTHONMALLOC" in environ or platform != "linux":
        return None
    version = glibc_version(libc)
    if version is None or version < GLIBC_MIN or thp not in ("always", "madvise"):
        return None
    env = dict(environ, PYTHONMALLOC="malloc", **{MARK: "1"})
    had = environ.get("GLIBC_TUNABLES")
    if had is not None:
        env[WAS] = had
    if "glibc.malloc.hugetlb=" not in (had or ""):
        env["GLIBC_TUNABLES"] = f"{had}:{TUNABLE}" if had else TUNABLE
    return env


def restore(environ: MutableMapping[str, str]) -> bool:
    """In the re-executed daemon: the environment put back as the daemon was started with
    (the heap stays as chosen: both variables were read at start). False when not re-executed."""
    if environ.pop(MARK, None) is None:
        return False
    environ.pop("PYTHONMALLOC", None)
    had = environ.pop(WAS, None)
    if had is None:
        environ.pop("GLIBC_TUNABLES", None)
    else:
        environ["GLIBC_TUNABLES"] = had
    return True


def facts() -> tuple[str, str]:
    """(the C library's name and version, the kernel's THP mode) of this host; "" where unknown."""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):  # a C library without the name (musl)
        libc = ""
    try:
        with open(THP_FILE) as f:
            thp = thp_mode(f.read())
    except OSError:
        thp = ""
    return libc, thp


def relaunch() -> None:
    """Called first by a daemon's entry point: re-executes the same command line with the heap
    chosen (returns only when there is nothing to change, or in the re-executed process)."""
    if restore(os.environ):
        return
    libc, thp = facts()
    env = plan(os.environ, platform=sys.platform, libc=libc, thp=thp)
    if env is None or not sys.executable or not sys.orig_argv:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, sys.orig_argv, env)
    except OSError:  # run on CPython's allocator rather than not at all
        return
