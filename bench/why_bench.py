"""What `rqueue --why` costs (ranch/sched/why.py) and what ranch_estimate_all adds to a backfill
cycle, over backfill_bench.py's cluster and queue, in-process.

    python bench/why_bench.py [--pending 10000] [--nodes 1000] [--at 1,100,1000,10000]

Figures: milliseconds of this process's CPU time to explain the job at each queue position
(the planner runs over the queue up to it once for the estimate, once more per suggestion
tried), and of one cycle with bf_max_job_test=500 without and with ranch_estimate_all. Prints
one JSON line; asserts nothing; not part of `make test`."""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from backfill_bench import NOW, cluster, queue  # noqa: E402

from ranch.sched.backfill import Params, plan  # noqa: E402
from ranch.sched.model import Planned  # noqa: E402
from ranch.sched.why import Scene, explain  # noqa: E402


def _ms(fn) -> tuple[float, object]:
    t0 = time.process_time()
    got = fn()
    return (time.process_time() - t0) * 1000, got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pending", type=int, default=10000)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--at", default="1,100,1000,10000")
    a = ap.parse_args()
    rng = random.Random(42)
    c, ends = cluster(a.nodes, rng, 0.0)
    q = queue(a.pending, a.nodes, rng, False)
    params = Params(window=1440, resolution=60, max_job_test=500)
    scene = Scene(c, tuple(q), tuple(ends), NOW, params)
    out: dict = {"pending": a.pending, "nodes": a.nodes, "explain_ms": {}}
    for pos in (int(x) for x in a.at.split(",")):
        if pos > len(q):
            continue
        ms, got = _ms(lambda pos=pos: explain(scene, q[pos - 1].job.id))
        out["explain_ms"][pos] = {"ms": round(ms), "suggestions": len(got.suggestions)}
    for word, all_ in (("bf_max_job_test=500", False), ("+ranch_estimate_all", True)):
        p = Params(window=1440, resolution=60, max_job_test=500, estimate_all=all_)
        ms, got = _ms(lambda p=p: plan(c, q, ends, NOW, p))
        out[word] = {"ms": round(ms), "planned": sum(isinstance(e, Planned) for e in got)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
