"""What one queued job costs rctld (issue 23): memory per job, CPU per submission, the rqueue
listing's CPU, measured in-process on a real Daemon with its state directory on disk.

    .venv/bin/python bench/job_cost.py [--jobs 5000] [--env-vars 40]

Held jobs go through Durability.submit as the server hands them over (decoded from the wire
form, each with an environment of --env-vars variables), journalled and fsync'd. Printed:
tracemalloc's bytes per job while the jobs wait for a snapshot, after two snapshots (bulk
packed, records settled), after rqueue's cut listing and after the full list; the CPU (user +
system, this process) per 1,000 submissions with their snapshots and pack writes; the cut
listing's and the full list's CPU when every job's record must be built and when one job
changed. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import orjson
import trio

from ranch.ctld.daemon import Daemon
from ranch.ctld.jobs import jobfields
from ranch.protocol import messages as m
from ranch.protocol.codec import converter
from tests.ctld.helpers import make_config

READS = ("array_job_id", "array_task_id", "end_time", "job_id", "name", "node_count", "nodes",
         "partition", "priority", "reason", "start_time", "state", "uid", "user")


def heap(since: tracemalloc.Snapshot, jobs: int) -> float:
    gc.collect()
    now = tracemalloc.take_snapshot()
    return sum(s.size_diff for s in now.compare_to(since, "filename")) / jobs


async def run(n: int, env_vars: int) -> None:
    env = tuple((f"VAR_{i}", f"/some/value/of/a/typical/length/{i}") for i in range(env_vars))
    wire = orjson.dumps(converter.unstructure(m.SubmitJob(
        script="#!/bin/sh\n# This script was created by sbatch --wrap.\n\ntrue\n", user="root",
        uid=0, gid=0, workdir="/tmp", hold=True, stdout="/dev/null", env=env,
        submit_host="localhost")))
    with tempfile.TemporaryDirectory(prefix="job-cost-") as state:
        d = Daemon(make_config(), b"k" * 32, state_dir=state, host="127.0.0.1", port=0,
                   save_in_thread=False)
        jobs = d.cluster.jobs
        cpu0 = time.process_time()
        for i in range(n):
            await d.durability.submit(converter.structure(orjson.loads(wire), m.SubmitJob))
            if i % 1000 == 999:
                await d.saver.save_snapshot()  # about one a 5 s at 200 submissions a second
        await d.saver.save_snapshot()
        cpu = (time.process_time() - cpu0) / n * 1000
        print(f"CPU per 1,000 submissions (journal, snapshots, packs): {cpu:.2f} s")
        t0 = time.process_time()
        jobfields.list_body(jobs, READS)
        t1 = time.process_time()
        jobs.touch(next(iter(jobs.jobs.values())))
        jobfields.list_body(jobs, READS)
        t2 = time.process_time()
        print(f"rqueue's cut listing: every job {1e3 * (t1 - t0):.1f} ms, "
              f"after one changed {1e3 * (t2 - t1):.1f} ms")
        jobs.list_body()
        t3 = time.process_time()
        jobs.touch(next(iter(jobs.jobs.values())))
        jobs.list_body()
        t4 = time.process_time()
        print(f"the full list (show job, --json, HTTP): every job {1e3 * (t3 - t2):.1f} ms, "
              f"after one changed {1e3 * (t4 - t3):.1f} ms")
    with tempfile.TemporaryDirectory(prefix="job-cost-") as state:
        d = Daemon(make_config(), b"k" * 32, state_dir=state, host="127.0.0.1", port=0,
                   save_in_thread=False)
        jobs = d.cluster.jobs
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.take_snapshot()
        for _ in range(n):
            await d.durability.submit(converter.structure(orjson.loads(wire), m.SubmitJob))
        print(f"heap per job, waiting for a snapshot: {heap(base, n):,.0f} B")
        await d.saver.save_snapshot()
        await d.saver.save_snapshot()
        print(f"heap per job, bulk packed: {heap(base, n):,.0f} B")
        jobfields.list_body(jobs, READS)
        print(f"heap per job, after rqueue's listing: {heap(base, n):,.0f} B")
        jobs.list_body()
        print(f"heap per job, after the full list too: {heap(base, n):,.0f} B")
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--env-vars", type=int, default=40)
    args = ap.parse_args()
    print(f"job_cost: {args.jobs} held jobs, {args.env_vars} environment variables each")
    trio.run(run, args.jobs, args.env_vars)


if __name__ == "__main__":
    main()
