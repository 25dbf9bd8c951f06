"""Exactly once, for longer (issue 30): thousands of short jobs and array tasks through a real
rctld and real rnoded processes while both are killed (SIGKILL or SIGTERM) at random and come
back (a node within SlurmdTimeout, so no job may be requeued). Each run of a script leaves a
marker JOBID.RUN.PID (tests/integration/test_exactly_once.py); at the end every acknowledged job
is looked up and the counts printed:

    runs twice  acknowledged jobs whose script started more than once, whatever the run
    lost        acknowledged jobs rctld no longer knows, or that ended without their script running
    stuck       acknowledged jobs not ended once the load stopped and the drain time is over

    nice .venv/bin/python bench/exactly_once.py [--seconds 120] [--seed 1]

Prints its figures; asserts nothing; not part of `make test` (the suite runs the short form).
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.test_exactly_once import (  # noqa: E402
    ENDED,
    cluster,
    marks,
    records,
    start,
    submit,
)

NODES = ["n1", "n2", "n3"]
BACKLOG = 150  # acknowledged jobs not yet started before the submitter waits


class Load:
    def __init__(self, c, rng: random.Random) -> None:
        self.c, self.rng = c, rng
        self.acked: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            if len(self.acked) - len(list((self.c.dir / "marks").iterdir())) > BACKLOG:
                time.sleep(0.2)
                continue
            array = "0-19" if self.rng.random() < 0.2 else ""
            ids = submit(self.c, f"sleep {self.rng.choice((0, 0.05, 0.2))}", array=array)
            self.acked += ids or ()
            time.sleep(0.01)


def kill_loop(c, rng: random.Random, until: float) -> Counter:
    kills: Counter = Counter()
    while time.monotonic() < until:
        time.sleep(rng.uniform(2, 6))
        sig = rng.choice((signal.SIGKILL, signal.SIGTERM))
        if rng.random() < 0.4:
            c.ctld.send_signal(sig)
            c.ctld.wait(15)
            c.start_ctld()
            kills[f"rctld {sig.name}"] += 1
        else:
            name = rng.choice(c.node_names)
            proc = c.nodes.pop(name)
            proc.send_signal(sig)
            proc.wait(15)
            time.sleep(rng.uniform(0, 2))
            c.start_node(name)
            kills[f"rnoded {sig.name}"] += 1
    return kills


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="load and kills (default 120)")
    ap.add_argument("--drain", type=float, default=90.0, help="then, for jobs to end (90)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="exactly-once-") as tmp:
        c = cluster(Path(tmp), NODES, cpus=2, timeout=10)
        with c:
            start(c)
            load = Load(c, random.Random(args.seed + 1))
            worker = threading.Thread(target=load.run, daemon=True)
            began = time.monotonic()
            worker.start()
            try:
                kills = kill_loop(c, rng, began + args.seconds)
            finally:
                load.stop.set()
                worker.join(10)
            loaded = time.monotonic() - began
            acked = set(load.acked)
            deadline = time.monotonic() + args.drain
            while time.monotonic() < deadline:
                try:
                    recs = records(c)
                except Exception:  # rctld just restarted: look again
                    time.sleep(1)
                    continue
                if all(j in recs and recs[j]["state"] in ENDED for j in acked):
                    break
                time.sleep(1)
            recs = records(c)
            runs = marks(Path(tmp))
            per_job: Counter = Counter()
            for (jid, _run), n in runs.items():
                per_job[jid] += n
            twice = sorted(j for j in acked if per_job[j] > 1)
            gone = [j for j in acked if j not in recs]
            no_run = [j for j in acked if j in recs and recs[j]["state"] == "COMPLETED"
                      and per_job[j] == 0]
            stuck = sorted(j for j in acked if j in recs and recs[j]["state"] not in ENDED)
            requeued = sorted(j for j in acked if j in recs and recs[j].get("restarts"))
            # a submission whose reply an rctld kill ate may still have been journaled and run
            unacked = sum(n for (jid, _run), n in runs.items() if jid not in acked)
            states = Counter(recs[j]["state"] for j in acked if j in recs)
    print(f"exactly once: {len(acked)} acknowledged jobs ({sum(runs.values())} script runs) "
          f"in {loaded:.0f} s of load on {len(NODES)} nodes x 2 CPUs, seed {args.seed}")
    print(f"  kills: {dict(sorted(kills.items()))}")
    print(f"  end states: {dict(sorted(states.items()))}")
    print(f"  runs twice: {len(twice)} {twice[:10]}")
    print(f"  lost: {len(gone) + len(no_run)} (unknown {gone[:10]}, completed unrun {no_run[:10]})")
    print(f"  stuck: {len(stuck)} {stuck[:10]}")
    print(f"  requeued (restarts > 0; each still started once): {len(requeued)} {requeued[:10]}")
    print(f"  script runs of submissions whose reply was lost (not acknowledged): {unacked}")


if __name__ == "__main__":
    main()
