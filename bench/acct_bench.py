"""rqueue and racct with 5,000 jobs, beside squeue-free sacct --completion over 5,000 records.

Ranch: a real rctld (no nodes) holding N held pending jobs (submitted over the protocol) and a
job history of N finished runs (written into StateSaveLocation/job_history before it starts);
timed: `rqueue -t all`, `racct -a -X -S midnight` (held jobs and the history), `racct -a -j ID`
(one id: the path submitit polls), `racct -a -P -o JobID,State,NodeList -S midnight`.
Slurm (where sacct 22.05 is installed): `sacct -c` over a jobcomp/filetxt file of N records,
the only sacct a Slurm without slurmdbd answers; squeue is not timed here (it needs a running
slurmctld holding N jobs; bench/vs_slurm.py, issue 23, times the daemons side by side).

    .venv/bin/python bench/acct_bench.py [--jobs 5000] [--runs 5]

Prints one line per command: median and best wall time over the runs, with the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ranch.ctld.jobs.history import FileHistory  # noqa: E402
from ranch.protocol import messages as m  # noqa: E402
from tests.integration.cluster import Cluster, free_port  # noqa: E402

CONF = """\
ClusterName=bench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
MaxJobCount=100000
MinJobAge=3600
NodeName=n[1-4] CPUs=8 RealMemory=8000
PartitionName=main Nodes=n[1-4] Default=YES
"""

SLURM_CONF = """\
ClusterName=bench
SlurmctldHost=localhost
JobCompType=jobcomp/filetxt
JobCompLoc={dir}/jobcomp.txt
AccountingStorageType=accounting_storage/none
NodeName=n[1-4] CPUs=8
PartitionName=main Nodes=n[1-4]
"""


def timed(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float, int]:
    walls = []
    lines = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        walls.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr}")
        lines = len(done.stdout.splitlines())
    return statistics.median(walls), min(walls), lines


def report(name: str, result: tuple[float, float, int]) -> None:
    med, best, lines = result
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{name:<58} median {med * 1000:7.0f} ms  best {best * 1000:7.0f} ms  "
          f"{lines:6d} lines  load {load}", flush=True)


def history_records(n: int, first_id: int, now: float) -> list[dict]:
    return [{"job_id": first_id + i, "array_job_id": 0, "array_task_id": None, "name": "bench",
             "user": "root", "uid": 0, "gid": 0, "partition": "main", "account": "",
             "state": "COMPLETED", "reason": "None", "exit_code": 0, "signal": 0,
             "submit_time": now - 60, "eligible_time": now - 60, "start_time": now - 50,
             "end_time": now - 10, "time_limit": None, "nodes": "n1", "node_count": 1,
             "cpus": 1, "ntasks": 1, "cpus_per_task": 1, "mem_per_node": 0, "mem_per_cpu": 0,
             "restarts": 0, "workdir": "/tmp", "batch_host": "n1", "cluster": "bench",
             "max_rss": None} for i in range(n)]


def ranch(n: int, runs: int, work: Path) -> None:
    port = free_port()
    c = Cluster(work / "ranch", [], conf_text=CONF.format(port=port))
    c.port, c.addr = port, ("127.0.0.1", port)
    now = time.time()
    h = FileHistory(os.path.join(c.state_dir, "job_history"))
    for rec in history_records(n, 100001, now):
        h.ended(rec)
    batch = h.take()
    h.write(batch)
    with c:
        c.start_ctld()
        t0 = time.perf_counter()
        for _ in range(n):
            c.request(m.SubmitJob(script="#!/bin/sh\ntrue\n", user="root", uid=0, gid=0,
                                  workdir="/tmp", hold=True), timeout=30)
        print(f"ranch: {n} held jobs submitted over the protocol in "
              f"{time.perf_counter() - t0:.1f} s; {n} history records on disk", flush=True)
        env = {**os.environ, "RANCH_SERVER": f"127.0.0.1:{port}", "RANCH_KEY_FILE": c.key_file,
               "PYTHONPATH": str(REPO)}
        py = [sys.executable, "-m"]
        report(f"rqueue -t all ({n} jobs held)",
               timed([*py, "ranch.cli.rqueue", "-t", "all"], env, runs))
        report(f"racct -a -X -S midnight ({n} held + {n} history)",
               timed([*py, "ranch.cli.racct", "-a", "-X", "-S", "midnight"], env, runs))
        report("racct -a -P -o JobID,State,NodeList -S midnight",
               timed([*py, "ranch.cli.racct", "-a", "-P", "-o", "JobID,State,NodeList", "-S",
                      "midnight"], env, runs))
        report("racct -a -o JobID,State,NodeList -P -j 100017 (history)",
               timed([*py, "ranch.cli.racct", "-a", "-P", "-o", "JobID,State,NodeList",
                      "-j", "100017"],
                     env, runs))


def slurm(n: int, runs: int, work: Path) -> None:
    if shutil.which("sacct") is None:
        print("slurm: sacct not installed; skipped")
        return
    d = work / "slurm"
    d.mkdir()
    (d / "slurm.conf").write_text(SLURM_CONF.format(dir=d))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 10))
    with open(d / "jobcomp.txt", "w") as f:
        for i in range(1, n + 1):
            f.write(f"JobId={i} UserId=root(0) GroupId=root(0) Name=bench JobState=COMPLETED "
                    f"Partition=main TimeLimit=UNLIMITED StartTime={stamp} EndTime={stamp} "
                    f"NodeList=n1 NodeCnt=1 ProcCnt=1 WorkDir=/tmp ReservationName= "
                    f"Tres=cpu=1,node=1,billing=1 Account= QOS= WcKey= Cluster=bench "
                    f"SubmitTime={stamp} EligibleTime={stamp} DerivedExitCode=0:0 "
                    f"ExitCode=0:0\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SLURM_CONF"] = str(d / "slurm.conf")
    report(f"sacct -c -a -S midnight ({n} jobcomp records)",
           timed(["sacct", "-c", "-a", "-S", "midnight"], env, runs))
    report("sacct -c -a -P -o JobID,State,NodeList -S midnight",
           timed(["sacct", "-c", "-a", "-P", "-o", "JobID,State,NodeList", "-S", "midnight"],
                 env, runs))
    report("sacct -c -a -P -o JobID,State,NodeList -j 17",
           timed(["sacct", "-c", "-a", "-P", "-o", "JobID,State,NodeList", "-j", "17"],
                 env, runs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print(f"acct_bench: {args.jobs} jobs, {args.runs} runs each, {os.cpu_count()} CPUs")
    work = Path(tempfile.mkdtemp(prefix="acct-bench-"))
    try:
        ranch(args.jobs, args.runs, work)
        slurm(args.jobs, args.runs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
