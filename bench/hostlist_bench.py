"""Prints hostlist expand/fold timings at 100,000 names: ClusterShell, python-hostlist, ours."""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranch.conf import hostlist

N = 100_000
# Slurm (and we) refuse one range of more than 65,536 hosts, so 100,000 names take two ranges.
EXPR = "n[000001-050000,050001-100000]"


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    names = [f"n{i:06d}" for i in range(1, N + 1)]
    random.Random(1).shuffle(names)
    mixed = [f"{p}{i}" for p in ("cpu", "gpu") for i in range(N // 2)]
    random.Random(2).shuffle(mixed)
    rows: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("ours", lambda: hostlist.expand(EXPR), lambda: hostlist.fold(names)),
    ]
    try:
        from ClusterShell.NodeSet import NodeSet

        rows.append(
            (
                "ClusterShell NodeSet",
                lambda: list(NodeSet(EXPR)),
                lambda: str(NodeSet.fromlist(names)),
            )
        )
    except ImportError:
        print("ClusterShell not installed")
    try:
        import hostlist as python_hostlist

        rows.append(
            (
                "python-hostlist",
                lambda: python_hostlist.expand_hostlist(EXPR),
                lambda: python_hostlist.collect_hostlist(names),
            )
        )
    except ImportError:
        print("python-hostlist not installed")
    print(f"{'library':22s} {'expand 100k':>14s} {'fold 100k shuffled':>20s}")
    for label, expand, fold in rows:
        print(f"{label:22s} {best_of(expand):13.3f}s {best_of(fold):19.3f}s")
    print(
        f"ours, fold 100k unpadded names, 2 prefixes: {best_of(lambda: hostlist.fold(mixed)):.3f}s"
        "  (goal for folding: under 0.1 s)"
    )


if __name__ == "__main__":
    main()
