"""Time rinfo and rcontrol against a real rctld holding 10,000 nodes (median of 5 subprocess runs,
interpreter start included) and one `rcontrol update` of 1,000 nodes.

Run: `python bench/cli_bench.py [--nodes 10000] [--runs 5]`. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "cli"))

from launcher import Controller  # noqa: E402

from ranch.conf import hostlist  # noqa: E402
from ranch.conf.build import parse_config_text  # noqa: E402
from ranch.ctld.state import statefile  # noqa: E402
from ranch.protocol import messages as m  # noqa: E402
from tests.ctld.harness import Harness as Cluster  # noqa: E402

CONF = """\
ClusterName=bench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={{port}}
AuthKeyFile={{key}}
NodeName=DEFAULT CPUs=64 RealMemory=256000 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2
NodeName=gpu[00001-{last:05d}] Gres=gpu:8 Features=h100,ib
PartitionName=gpu Nodes=gpu[00001-{last:05d}] Default=YES MaxTime=1-00:00:00
PartitionName=half Nodes=gpu[00001-{half:05d}] MaxTime=4:00:00
"""

COMMANDS = {
    "rinfo": ["rinfo"],
    "rinfo -N": ["rinfo", "-N"],
    "rinfo --json": ["rinfo", "--json"],
    "rinfo -R": ["rinfo", "-R"],
    "rcontrol show node": ["rcontrol", "show", "node"],
}


class SilentNode:
    """A registered node's connection, in process: what the controller pushes is dropped."""

    def __init__(self, name: str) -> None:
        self.peer, self.node, self.closed = f"bench:{name}", name, False

    def registered_as(self, name: str) -> None:
        self.node = name

    def push(self, msg: object) -> bool:
        return True

    def close_soon(self) -> None:
        self.closed = True


def allocated_state(conf_path: Path, state_dir: Path, nodes: int) -> int:
    """Write the state rctld restores: every node registered, and jobs that hold all 64 CPUs of
    the first quarter (alloc) and 7 of the nodes up to a third (mix). An in-process controller
    places them, so the allocations come from jobs as in a running cluster. Returns the jobs."""
    hw = m.Hardware(cpus=64, boards=1, sockets=2, cores_per_socket=16, threads_per_core=2,
                    real_memory_mib=256000, tmp_disk_mib=0,
                    gpus=tuple(m.GpuInfo(i, "H100", f"GPU-{i}", f"0000:{i:02x}:00.0", 81559)
                               for i in range(8)))
    allocs = [(f"gpu{i:05d}", 64) for i in range(1, nodes // 4 + 1)]
    allocs += [(f"gpu{i:05d}", 7) for i in range(nodes // 4 + 1, nodes // 3 + 1)]

    async def build() -> int:
        cluster = Cluster(parse_config_text(conf_path.read_text(), path=str(conf_path)))
        for name in hostlist.expand(f"gpu[00001-{nodes:05d}]"):
            reply = cluster.register(m.Register(name, hw, time.time() - 3600, "bench"),
                                     SilentNode(name))
            assert reply.accepted, reply.reason
        for name, cpus in allocs:
            r = cluster.jobs.submit(m.SubmitJob("#!/bin/sh\nsleep 1000\n", "bench", 1000, 1000,
                                                "/tmp", nodelist=name, cpus_per_task=cpus))
            assert isinstance(r, m.SubmitReply), r
        running = sum(j.state.name == "RUNNING" for j in cluster.jobs.jobs.values())
        assert running == len(allocs), f"{running} of {len(allocs)} jobs running"
        state_dir.mkdir(exist_ok=True)
        statefile.save(str(state_dir), cluster.save_doc())
        return running

    return trio.run(build)


def timed(ctl: Controller, argv: list[str], runs: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        done = ctl.run(*argv)
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr}")
        size = len(done.stdout)
    return statistics.median(times), size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--no-bytecode", action="store_true",
                   help="compile every module from source on each run (as with "
                   "PYTHONDONTWRITEBYTECODE=1 and no __pycache__); default: bytecode cached, "
                   "as in an installed package")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        conf = CONF.format(last=args.nodes, half=args.nodes // 2)
        ctl = Controller(Path(tmp), conf)
        if not args.no_bytecode:
            # An installed command has its .pyc files; cache them outside the repo.
            ctl.env.pop("PYTHONDONTWRITEBYTECODE", None)
            ctl.env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        try:
            # Vary states so that views have many groups: jobs' allocations (restored with the
            # state, as after a controller restart) and admin drains.
            jobs = allocated_state(ctl.conf_path, Path(tmp) / "state", args.nodes)
            ctl.start(timeout=120)
            for i in range(1, args.nodes + 1, 97):
                ctl.ask(m.UpdateNodes(node_names=f"gpu{i:05d}", state="DRAIN",
                                      reason=f"bench reason {i % 5}", user="bench"))
            snap = ctl.ask(m.GetSnapshot())
            states = Counter(n["compact"] for n in snap.nodes)
            print(f"controller holds {len(snap.nodes)} nodes, {len(snap.partitions)} partitions, "
                  f"{jobs} running jobs; nodes " + ", ".join(f"{n} {s}" for s, n in
                                                             states.most_common()))
            for label, argv in COMMANDS.items():
                timed(ctl, argv, 1)  # warm-up: bytecode cache, page cache
                median, size = timed(ctl, argv, args.runs)
                print(f"{label:<22} median {median * 1000:7.1f} ms  ({size / 1024:.0f} KiB out)")
            target = f"gpu[{args.nodes - 999:05d}-{args.nodes:05d}]"
            for state, extra in (("DRAIN", ["Reason=bench drain"]), ("RESUME", [])):
                t0 = time.perf_counter()
                done = ctl.run("rcontrol", "update", f"NodeName={target}", f"State={state}", *extra)
                took = time.perf_counter() - t0
                status = "ok" if done.returncode == 0 else f"rc={done.returncode} {done.stderr}"
                print(f"rcontrol update 1,000 nodes State={state:<7} {took * 1000:7.1f} ms  "
                      f"{status}")
        finally:
            ctl.stop()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"bytecode {'off' if args.no_bytecode else 'cached'}")


if __name__ == "__main__":
    main()
