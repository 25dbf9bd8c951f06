"""Config parsing speed: 100,000 nodes on ranged lines, 5,000 one-node lines, folding 100,000 names.

Run: .venv/bin/python bench/conf_bench.py   (prints figures; goals: < 1 s, < 1 s, < 0.1 s)
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ranch.conf.build import parse_config_text
from ranch.conf.hostlist import fold

HEADER = "ClusterName=bench\nSlurmctldHost=ctl(10.0.0.1)\nNodeName=DEFAULT CPUs=64 " \
    "RealMemory=256000 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2\n"


def ranged_config(racks: int = 100, per_rack: int = 1000) -> str:
    lines = [HEADER]
    for r in range(racks):
        lines.append(f"NodeName=r{r:03d}n[0001-{per_rack:04d}] Features=rack{r} Gres=gpu:4\n")
    lines.append("PartitionName=all Nodes=ALL Default=YES MaxTime=1-00:00:00\n")
    half = racks // 2
    lines.append(f"PartitionName=half Nodes=r[000-{half - 1:03d}]n[0001-{per_rack:04d}]\n")
    return "".join(lines)


def single_config(n: int = 5000) -> str:
    lines = [HEADER]
    for i in range(n):
        lines.append(f"NodeName=node{i:05d} NodeAddr=10.1.{i // 250}.{i % 250 + 1} "
                     f"CPUs=64 RealMemory=256000 Features=a,b Weight={i % 7} # node {i}\n")
    lines.append(f"PartitionName=batch Nodes=node[00000-{n - 1:05d}] Default=YES\n")
    return "".join(lines)


def best_of(fn: Callable[[], object], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ranged = ranged_config()
    single = single_config()
    names = [f"r{r:03d}n{i:04d}" for r in range(100) for i in range(1, 1001)]
    random.Random(1).shuffle(names)
    cfg = parse_config_text(ranged)
    assert len(cfg.nodes) == 100_000, len(cfg.nodes)
    assert len(parse_config_text(single).nodes) == 5000
    rows = [
        ("parse+validate 100,000 nodes (100 ranged NodeName lines)", 1.0,
         best_of(lambda: parse_config_text(ranged))),
        ("parse+validate 5,000 single-node NodeName lines", 1.0,
         best_of(lambda: parse_config_text(single))),
        ("fold 100,000 shuffled names (ranch.conf.hostlist.fold)", 0.1,
         best_of(lambda: fold(names))),
    ]
    for label, goal, secs in rows:
        mark = "ok" if secs < goal else "SLOW"
        print(f"{label:60s} {secs:8.3f} s   goal < {goal:g} s  {mark}")


if __name__ == "__main__":
    main()
