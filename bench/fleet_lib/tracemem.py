"""Run rctld under tracemalloc, to see where its memory per node goes (issues 35 and 47):

    FLEET_CTLD=bench/fleet_lib/tracemem.py FLEET_MEM_OUT=/tmp/mem [FLEET_MEM_EVERY=20] \\
        .venv/bin/python bench/fleet.py --nodes 10000 ...

Every FLEET_MEM_EVERY seconds it writes FLEET_MEM_OUT/NNN.txt: RSS, the C heap's totals
(glibc mallinfo2: in use and free), the Python heap tracemalloc sees, and its largest
allocation sites by line and by file. tracemalloc keeps one frame per allocation (the line that
allocated), so rctld runs about twice as slow: compare dumps of one run (2,000 nodes against
10,000), not its CPU figures. Then it runs `ranch.ctld.main` unchanged."""

from __future__ import annotations

import ctypes
import os
import runpy
import sys
import threading
import time
import tracemalloc
from pathlib import Path

OUT = Path(os.environ.get("FLEET_MEM_OUT", "tracemem"))
EVERY = float(os.environ.get("FLEET_MEM_EVERY", "20"))
TRACE = os.environ.get("FLEET_MEM_TRACE", "1") != "0"  # 0: RSS and the heaps' totals only
TOP = 40


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _c_heap() -> str:
    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return "c heap: unknown"
    fn.restype = _MallInfo2
    mi = fn()
    mb = 1 << 20
    return (f"c heap: arena {mi.arena / mb:.1f} MB, in use {mi.uordblks / mb:.1f} MB, free "
            f"{mi.fordblks / mb:.1f} MB, mmapped {mi.hblkhd / mb:.1f} MB")


def _rss() -> str:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            fields[key] = value.strip()
    return " ".join(f"{k} {v}" for k, v in fields.items())


def _pymalloc() -> str:
    """pymalloc's arenas (1 MiB each) and the bytes of objects in them: what the difference
    says is the small-object heap's fragmentation. sys._debugmallocstats writes to descriptor
    2, borrowed for the call (a log line of rctld's in that instant lands here too)."""
    import tempfile

    with tempfile.TemporaryFile("w+") as tmp:
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read()
    keep = ("# arenas allocated current", "# bytes in allocated blocks",
            "# bytes in available blocks", "# bytes lost to", "Total")
    return "pymalloc: " + "; ".join(" ".join(line.split()) for line in text.splitlines()
                                    if line.startswith(keep))


def _dump(n: int) -> None:
    head = [time.strftime("%H:%M:%S"), _rss(), _c_heap(), _pymalloc()]
    if not TRACE:
        (OUT / f"{n:03d}.txt").write_text("\n".join(head) + "\n")
        return
    snap = tracemalloc.take_snapshot()
    snap = snap.filter_traces((tracemalloc.Filter(False, tracemalloc.__file__),))
    traced, peak = tracemalloc.get_traced_memory()
    lines = [*head, f"python heap traced: {traced / 1e6:.1f} MB (peak {peak / 1e6:.1f} MB)", "",
             "by line:"]
    lines += [f"{s.size / 1e6:9.2f} MB {s.count:9d}  {s.traceback[0]}"
              for s in snap.statistics("lineno")[:TOP]]
    lines += ["", "by file:"]
    lines += [f"{s.size / 1e6:9.2f} MB {s.count:9d}  {s.traceback[0].filename}"
              for s in snap.statistics("filename")[:TOP]]
    (OUT / f"{n:03d}.txt").write_text("\n".join(lines) + "\n")


def _dumper() -> None:
    n = 0
    while True:
        time.sleep(EVERY)
        n += 1
        _dump(n)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    OUT.mkdir(parents=True, exist_ok=True)
    from ranch.ctld import gctune

    gctune.one_malloc_heap()  # as rctld does, before this thread could get a heap of its own
    if TRACE:
        tracemalloc.start(1)
    threading.Thread(target=_dumper, daemon=True).start()
    sys.argv = ["rctld", *sys.argv[1:]]
    runpy.run_module("ranch.ctld.main", run_name="__main__")


if __name__ == "__main__":
    main()
