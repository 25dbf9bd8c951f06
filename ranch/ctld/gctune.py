"""How rctld sets Python's garbage collector and the C heap for a large, long-lived heap.

Every heartbeat replaces a node's metrics, a dozen small tracked objects that live long enough to
reach the oldest generation. Under the default thresholds (700, 10, 10) full collections over
the whole heap then follow one another: at 19,900 nodes they paused the event loop for up to
1.8 s (heartbeat p99 1.2 s, detection lag 2.2 s; docs/benchmarks.md, hot spot 1). rctld makes
no reference cycles of its own on the hot path, so collecting rarely costs nothing but a little
memory held a little longer.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Iterator

# Young collections every 50,000 net allocations instead of 700; middle ones every 20 young
# ones; the oldest generation only every 100 middle ones (and, as always in CPython, only when
# it grew by a quarter since the last full pass).
THRESHOLDS = (50_000, 20, 100)


# glibc's mallopt parameters: the number of heaps ("arenas") threads may allocate from, and the
# size from which a block gets pages of its own
M_ARENA_MAX = -8
M_MMAP_THRESHOLD = -3
# Blocks this large or larger are mapped on their own and unmapped when freed. glibc's default
# threshold starts at 128 KB but rises to the largest block freed (up to 32 MB), so after the
# first snapshot every 3-8 MB snapshot body, its frame and orjson's buffer came from the heap;
# freed between larger live blocks they stayed resident: 20-60 MB of free heap at 10,000 nodes
# (bench/fleet_lib/tracemem.py, issue 47). Fixed, it no longer rises.
MMAP_THRESHOLD = 256 << 10


def configure() -> None:
    gc.set_threshold(*THRESHOLDS)
    one_malloc_heap()


def one_malloc_heap() -> None:
    """All threads allocate from the main C heap, and blocks of MMAP_THRESHOLD or more from
    pages of their own. glibc gives each thread that allocates its own
    heap, and rctld's worker threads (state saves, blocking calls) built bytes the event loop
    then kept: memory freed later in those heaps served nobody else. At 10,000 nodes two such
    heaps held 60 MB; with one heap the steady RSS fell by 20 MB (bench/fleet.py, issue 35).
    The threads are few and brief, so sharing one heap's lock costs nothing measurable. Only
    before any thread starts; elsewhere (not glibc) nothing."""
    mallopt = _libc_function("mallopt")
    if mallopt is not None:
        mallopt(M_ARENA_MAX, 1)
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)  # and large blocks never in it (see above)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No collection while a backfill cycle holds its snapshot: at 50,000 pending the
    snapshot's views and the plan's tables are some 10^5 young tracked objects, and a young or
    middle pass that came due between two of the cycle's 20 ms slices walked them all at once
    (158 ms, the cycle's longest event-loop stall: bench/backfill_bench.py --loop). They are
    freed by reference count when the cycle ends, before the collector runs again; the cycle
    makes no reference cycles, so nothing is left for a pass to find."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def freeze_startup_heap() -> None:
    """Move everything alive now (the parsed config, the restored state, imported modules) out
    of the collector's sight: it never becomes garbage, so full passes need not walk it."""
    gc.collect()
    gc.freeze()


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim; elsewhere
    nothing). A burst of submissions leaves each job's request and environment waiting for a
    snapshot, and those freed chunks kept the controller's RSS up long after (62 MB instead
    of 50 with 5,000 jobs queued; docs/benchmarks.md, issue 23). Called after each snapshot:
    a walk of the free lists, a millisecond or two."""
    trim = _libc_function("malloc_trim")
    if trim is not None:
        trim(0)


@functools.cache
def _libc_function(name: str):  # -> the C function, or None
    try:
        import ctypes

        return getattr(ctypes.CDLL("libc.so.6"), name)
    except (OSError, AttributeError):
        return None
