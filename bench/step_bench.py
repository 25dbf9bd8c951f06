"""rrun (srun) steps: output throughput from 8 tasks and step start latency on an idle allocation.

A real rctld and 4 real rnoded on loopback; one job holds them (-N4 -n8). Then:
- stream: `rrun --jobid J -n8 --label python -c ...`: each task writes RATE bytes a second of
  numbered 1,000-byte lines for SECONDS; rrun's stdout is read here and every task's lines are
  checked, in order, none missing or torn. Prints the bytes received and the rate.
- start: `rrun --jobid J -N1 true` RUNS times, then `-N4 -n8 true`: wall time of the whole
  command (Python's start included, as a user waits for it) and the step part alone (StepRequest
  to the last task's exit, from rrun -v's timing): p50 and p99.

    .venv/bin/python bench/step_bench.py [--rate 1000000] [--seconds 5] [--runs 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.cluster import Cluster, free_port  # noqa: E402

CONF = """\
ClusterName=bench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=2
KillWait=2
NodeName=n[1-4] CPUs=2 RealMemory=100
PartitionName=main Nodes=n[1-4] Default=YES
"""

WRITER = """\
import os, sys, time
task = int(os.environ["SLURM_PROCID"]); rate = {rate}; seconds = {seconds}
line = 1000
per_tick = max(1, rate // line // 20)  # 20 writes a second
n = 0
start = time.monotonic()
out = sys.stdout.buffer
for tick in range(seconds * 20):
    chunk = b"".join(b"%d %08d " % (task, n + i) + b"x" * (line - 16) + b"\\n"
                     for i in range(per_tick))
    n += per_tick
    out.write(chunk); out.flush()
    delay = start + (tick + 1) / 20 - time.monotonic()
    if delay > 0:
        time.sleep(delay)
sys.stderr.write("lines %d\\n" % n)
"""


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=1_000_000, help="bytes a second per task")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=50)
    opts = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="step-bench-"))
    port = free_port()
    c = Cluster(work, ["n1", "n2", "n3", "n4"], conf_text=CONF.format(port=port))
    c.port, c.addr = port, ("127.0.0.1", port)
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{port}"})
    with c:
        c.start()
        done = subprocess.run([sys.executable, "-m", "ranch.cli.rbatch", "-N4", "-n8", "-o",
                               "/dev/null", "-D", str(work), "--wrap", "sleep 3600"],
                              cwd=REPO, env=env, capture_output=True, text=True, check=True)
        jid = done.stdout.split()[-1]
        c.wait_for(lambda: all(c.state(n) in ("MIXED", "ALLOCATED") for n in c.node_names),
                   30, what="job running")
        rrun = [sys.executable, "-m", "ranch.cli.rrun", "--jobid", jid]

        # -- stream
        writer = WRITER.format(rate=opts.rate, seconds=opts.seconds)
        t0 = time.monotonic()
        p = subprocess.run([*rrun, "-n8", "--label", sys.executable, "-c", writer], cwd=work,
                           env=env, capture_output=True, timeout=opts.seconds * 10 + 60)
        wall = time.monotonic() - t0
        seen: dict[int, int] = {}
        bad = 0
        for raw in p.stdout.split(b"\n")[:-1]:
            label, _, body = raw.partition(b": ")
            fields = body.split(b" ", 2)
            try:
                task, seq = int(fields[0]), int(fields[1])
            except (ValueError, IndexError):
                bad += 1
                continue
            if int(label) != task or seq != seen.get(task, 0) or len(body) != 995:
                bad += 1
            seen[task] = seq + 1
        expected = {t: opts.seconds * max(1, opts.rate // 1000 // 20) * 20 for t in range(8)}
        lost = sum(expected[t] - seen.get(t, 0) for t in expected)
        total = len(p.stdout)
        print(f"stream: 8 tasks x {opts.rate / 1e6:g} MB/s for {opts.seconds} s -> rrun got "
              f"{total / 1e6:.1f} MB in {wall:.1f} s ({total / 1e6 / wall:.1f} MB/s incl. "
              f"start), lines lost {lost}, out of order or torn {bad}, exit {p.returncode}")

        # -- start latency
        for shape in (["-N1"], ["-N4", "-n8"]):
            walls = []
            for _ in range(opts.runs):
                t0 = time.perf_counter()
                subprocess.run([*rrun, *shape, "true"], cwd=work, env=env, check=True)
                walls.append((time.perf_counter() - t0) * 1000)
            py = []
            for _ in range(min(20, opts.runs)):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-c", "import trio, ranch.cli.controller"],
                               check=True)
                py.append((time.perf_counter() - t0) * 1000)
            print(f"start rrun {' '.join(shape)} true: p50 {statistics.median(walls):.0f} ms, "
                  f"p99 {pct(walls, 0.99):.0f} ms over {opts.runs} runs (of which Python + "
                  f"imports alone: {statistics.median(py):.0f} ms); load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
