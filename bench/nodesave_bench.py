"""One state save of N nodes: CPU and the event loop's longest pause, every node changed."""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time

import trio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fleet_lib.config import DEFAULT_SHAPE, hardware, node_name

from ranch.ctld import gctune
from ranch.ctld.nodes import savedstate
from ranch.ctld.nodes.hardware import HardwareShelf
from ranch.ctld.state import statefile
from ranch.statemachine.model import Base, NodeState


class Node:
    """The fields of a NodeRecord that its saved entry reads."""

    def __init__(self, name: str, hw: object) -> None:
        self.name = name
        self.hardware = hw
        self.saved = None
        self.state = NodeState(name=name, base=Base.IDLE, flags=frozenset(), reason=None,
                               cpus_total=DEFAULT_SHAPE.cpus)
        self.boot_time = self.last_registration = self.slurmd_start_time = time.time()
        self.version = "1.0"
        self.last_busy = self.power_started = self.power_action = self.last_change = None
        self.dynamic_conf = None
        self.unhealthy_boots = 0


def fleet(n: int) -> dict[str, Node]:
    shelf = HardwareShelf()
    return {node_name(i, n): Node(node_name(i, n), shelf.pack(hardware(node_name(i, n), i)))
            for i in range(n)}


async def one_save(nodes: dict[str, Node], state_dir: str, dirty: bool,
                   ) -> tuple[float, float, float, float]:
    """(CPU s, event loop s building the doc, longest loop gap s, malloc_trim s) of one save as
    the Saver
    makes it: the document built on the loop, encoded and written in a thread."""
    gaps = [0.0]
    done = trio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await trio.sleep(0.001)
            now = time.perf_counter()
            gaps[0] = max(gaps[0], now - last)
            last = now

    for node in nodes.values():  # every node changed since the last save (the storm)
        node.last_registration = time.time()
        node.saved = None
        if not dirty:  # as the journal left it: each change's entry already encoded
            savedstate.node_entry(node)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await trio.sleep(0.01)
        cpu0, t0 = time.process_time(), time.perf_counter()
        doc = savedstate.save_doc(nodes, time.time(), "hash")
        on_loop = time.perf_counter() - t0
        await trio.to_thread.run_sync(statefile.save, state_dir, doc)
        del doc
        t1 = time.perf_counter()
        gctune.release_free_memory()  # on the loop after each save, as the Saver does
        trim = time.perf_counter() - t1
        cpu = time.process_time() - cpu0
        done.set()
    return cpu, on_loop, gaps[0], trim


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, nargs="+", default=[10000, 50000],
                    help="node counts, largest last (the RSS peak only grows)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dirty", action="store_true",
                    help="no node's entry encoded yet (else encoded, as the journal does)")
    args = ap.parse_args()
    gctune.configure()
    for n in args.nodes:
        nodes = fleet(n)
        with tempfile.TemporaryDirectory() as d:
            base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            runs = [trio.run(one_save, nodes, d, args.dirty) for _ in range(args.rounds)]
            size = os.path.getsize(statefile.state_path(d))
            grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
        best = min(runs)
        print(f"{n} nodes: state file {size / 1e6:.1f} MB; CPU {best[0] * 1000:.0f} ms, "
              f"doc built on loop {best[1] * 1000:.0f} ms, longest loop gap "
              f"{min(r[2] for r in runs) * 1000:.0f} ms (best of {args.rounds}); "
              f"peak RSS grew {grew / 1024:.0f} MB; "
              f"malloc_trim {min(r[3] for r in runs) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
