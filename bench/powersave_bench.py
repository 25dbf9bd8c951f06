"""Power-save pass cost at scale: one pass over N registered idle nodes (nothing due, then every
node due within SuspendRate, then a keep-warm pool over all of them), in-process, no programs run.

    python bench/powersave_bench.py [--nodes 10000] [--repeat 20] 2>/dev/null   (logs to stderr)

The pass runs every power_save_interval (10 s) in rctld's event loop, so its time is time the
loop does not serve heartbeats."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ranch.conf.build import parse_config_text
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

CONF = """\
ClusterName=bench
SlurmctldHost=ctl(127.0.0.1)
HeartbeatInterval=1000
SlurmdTimeout=5000
SuspendProgram=/bin/true
ResumeProgram=/bin/true
SuspendTime=60
SuspendRate={rate}
{extra}
NodeName=n[1-{n}] CPUs=4 RealMemory=1000
PartitionName=main Nodes=n[1-{n}] Default=YES
"""


def hardware() -> m.Hardware:
    return m.Hardware(cpus=4, boards=1, sockets=1, cores_per_socket=4, threads_per_core=1,
                      real_memory_mib=1000, tmp_disk_mib=0, gpus=())


def build(n: int, rate: int, extra: str = "") -> Cluster:
    cfg = parse_config_text(CONF.format(n=n, rate=rate, extra=extra), path="/bench.conf")
    cluster = Cluster(cfg, clock=lambda: clock[0], wall=lambda: 1.7e9 + clock[0],
                      spawn=lambda *a, **k: None)
    hw = hardware()
    for name in cluster.nodes:
        cluster.register(m.Register(name, hw, 1.0, "bench"))
    return cluster


clock = [0.0]


def timed(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), max(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    n, rows = args.nodes, []

    clock[0] = 0.0
    cluster = build(n, rate=60)
    clock[0] = 30.0  # nobody idle long enough
    rows.append(("nothing due", *timed(cluster.power_save_pass, args.repeat)))

    clock[0] = 61.0  # everyone due; SuspendRate=60 stops the pass after 60 suspends
    rows.append(("all due, SuspendRate=60", *timed(cluster.power_save_pass, 1)))

    clock[0] = 0.0
    pool = build(n, rate=0, extra=f"SuspendExcNodes=n[1-{n}]:{n // 2}")
    clock[0] = 61.0
    rows.append((f"pool n[1-{n}]:{n // 2}, first pass", *timed(pool.power_save_pass, 1)))
    rows.append(("pool, later passes", *timed(pool.power_save_pass, args.repeat)))

    print(f"power-save pass over {n:,} idle nodes (ms; median and max)")
    for what, med, worst in rows:
        print(f"  {what:<36} {med:8.2f} {worst:8.2f}")


if __name__ == "__main__":
    main()
