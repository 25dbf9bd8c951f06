"""State-save cost, measured on the controller's own code: rctld does not log how long a save
takes, so after a run the saved file is restored into an assembled controller in this process
and the two halves of a save are timed: building the document (on rctld's event loop) and
writing it (in a worker thread: orjson, write, fsync, rename)."""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

import trio

from fleet_lib.stats import percentile

REPEAT = 5


def measure(config_path: Path, state_dir: Path) -> dict:
    """Figures of one save of the state in `state_dir` (empty dict when there is none)."""
    from ranch.conf.build import load_config
    from ranch.ctld.compose import assemble
    from ranch.ctld.state import statefile

    doc = statefile.load(str(state_dir))
    if doc is None:
        return {}
    config = load_config(str(config_path))
    logging.getLogger().setLevel(logging.ERROR)  # restore() logs a line per difference

    async def timed() -> dict:
        cluster = assemble(config)
        cluster.restore(doc)
        for node in cluster.registry.nodes.values():
            node.saved = None  # a cold build: every node changed since the last save
        t0 = time.perf_counter()
        fresh = cluster.save_doc()
        cold = time.perf_counter() - t0
        builds, writes = [], []
        with tempfile.TemporaryDirectory(prefix="fleet-save-") as tmp:
            for _ in range(REPEAT):
                t0 = time.perf_counter()
                fresh = cluster.save_doc()
                t1 = time.perf_counter()
                statefile.save(tmp, fresh)
                writes.append(time.perf_counter() - t1)
                builds.append(t1 - t0)
            size = Path(statefile.state_path(tmp)).stat().st_size
        build, write = percentile(builds, 50) or 0.0, percentile(writes, 50) or 0.0
        return {
            "state_doc_build_cold_ms": round(cold * 1000, 2),
            "state_doc_build_ms": round(build * 1000, 2),
            "state_write_ms": round(write * 1000, 2),
            "state_save_ms": round((build + write) * 1000, 2),
            "state_file_bytes_rewritten": size,
        }

    return trio.run(timed)
