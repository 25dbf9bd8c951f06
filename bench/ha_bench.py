"""A controller pair on etcd, measured on the namespace lab (tests/ha/lab.py; needs root, ip and
etcd-server): takeover time, and what etcd costs a submission against the file store.

    nice python bench/ha_bench.py [--part cost|takeover] [--trials 10] [--jobs 400]

1. The same cluster (three etcd members, c1, four nodes) with StateStore=file, then =etcd:
   `--submitters` client processes make `--jobs` held submissions in all through rbatch's own
   code (cli/), timed; rctld's user+system CPU is read from /proc before and after (so the
   client's cost is not in it). Then 20 jobs one at a time, each writing the time it started:
   submit -> running latency.
2. With c2 standing by and tests/ha/flow.py's steady flow of submissions, cancels and drains,
   `--trials` faults, alternating a SIGKILL of the leader and cutting its host off the network
   (healed once the other serves): takeover = fault -> the first submission accepted after it.
   After each trial: no acknowledged submission/cancel/drain lost, no job run twice, no node
   DOWN (tests/ha/pair.py's checks).
Prints the figures; asserts nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ha.lab import Lab, missing, python  # noqa: E402
from tests.ha.pair import Pair, start, start_flow, stop_flow, wait  # noqa: E402

SUBMITTER = """
import contextlib, io, sys, time
from ranch.cli import rbatch
n, out = int(sys.argv[1]), sys.argv[2]
t0 = time.time()
ok = 0
for i in range(n):
    with contextlib.redirect_stdout(io.StringIO()) as o, contextlib.redirect_stderr(io.StringIO()):
        rc = rbatch.main(["--hold", "-o", "/dev/null", "--wrap", "true"])
    ok += rc == 0
open(out, "w").write(f"{ok} {time.time() - t0}")
"""
LATENCY = """
import contextlib, io, os, sys, time
from ranch.cli import rbatch
d, n = sys.argv[1], int(sys.argv[2])
out = []
for i in range(n):
    t = time.time()
    with contextlib.redirect_stdout(io.StringIO()) as o:
        rc = rbatch.main(["-o", "/dev/null", "--wrap", f"date +%s.%N > {d}/start.$SLURM_JOB_ID"])
    job = o.getvalue().split()[-1]
    path = f"{d}/start.{job}"
    while not os.path.exists(path) or not open(path).read().strip():
        time.sleep(0.005)
    out.append(float(open(path).read()) - t)
print(" ".join(f"{x:.4f}" for x in out))
"""


def cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(p: Pair, jobs: int, submitters: int) -> dict[str, float]:
    pid = p.lab.procs["c1"].pid
    each = jobs // submitters
    before, t0 = cpu(pid), time.monotonic()
    outs = []
    for i in range(submitters):
        out = p.lab.dir / f"sub{i}.{time.monotonic_ns()}"
        outs.append(out)
        p.lab.spawn(f"sub{i}", "cl", [python(), "-c", SUBMITTER, str(each), str(out)], env=p.env)
    for i in range(submitters):
        p.lab.procs[f"sub{i}"].wait(300)
        p.lab.procs.pop(f"sub{i}")
    wall, used = time.monotonic() - t0, cpu(pid) - before
    ok = sum(int(o.read_text().split()[0]) for o in outs)
    d = p.lab.dir / f"lat{time.monotonic_ns()}"
    d.mkdir()
    got = p.lab.run("cl", [python(), "-c", LATENCY, str(d), "20"], env=p.env, timeout=300)
    lat = sorted(float(x) for x in got.stdout.split())
    return {"submitted": ok, "per_s": ok / wall, "cpu_ms": 1000 * used / max(ok, 1),
            "lat_p50_ms": 1000 * statistics.median(lat) if lat else float("nan"),
            "lat_max_ms": 1000 * max(lat) if lat else float("nan")}


def store_run(base: Path, store: str, args: argparse.Namespace) -> dict[str, float]:
    lab = Lab(base / store)
    try:
        lab.up()
        p = start(lab, store)
        return throughput(p, args.jobs, args.submitters)
    finally:
        lab.stop()


def trial(p: Pair, how: str) -> float:
    """One fault; the seconds from it to the first submission accepted after it (the checks
    raise AssertionError). The old leader is back as the standby when this returns."""
    lab = p.lab
    old = p.leader()
    other = "c2" if old == "c1" else "c1"
    reigns = p.reigns(other)
    t0 = time.time()
    if how == "kill":
        lab.kill(old)
    else:
        lab.partition(old)
    try:
        wait(lambda: p.reigns(other) > reigns, 60, f"{other} to take the seat")
        return p.check(t0)
    finally:
        if how == "cut":
            lab.heal(old)
            wait(lambda: p.leader() == other and "standing by" in
                 lab.log(old)[lab.log(old).rfind("acting no more"):], 60, "standby back")
        else:
            stands = lab.log(old).count("standing by")
            p.start_ctld(old)
            wait(lambda: lab.log(old).count("standing by") > stands, 60, "standby back")


def takeovers(base: Path, trials: int) -> tuple[list[tuple[str, float]], int]:
    lab = Lab(base / "takeover")
    times: list[tuple[str, float]] = []
    failures = 0
    try:
        lab.up()
        p = start(lab)
        start_flow(p, probe=True)
        for i in range(trials):
            how = "kill" if i % 2 == 0 else "cut"
            try:
                took = trial(p, how)
            except AssertionError as exc:
                failures += 1
                print(f"  trial {i + 1} ({how}): FAILED: {exc}", flush=True)
                took = float("nan")
            times.append((how, took))
            print(f"  trial {i + 1:2d} ({how:4s}): first submission accepted {took:.2f} s after",
                  flush=True)
        stop_flow(p)
    finally:
        lab.stop()
    return times, failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--part", choices=("cost", "takeover", "all"), default="all",
                    help="cost: file store against etcd; takeover: the fault trials")
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--submitters", type=int, default=4)
    args = ap.parse_args()
    why = missing()
    if why:
        print(f"ha_bench: {why}", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="rha-bench-"))
    print(f"work dir {base}")
    if args.part in ("cost", "all"):
        cost(base, args)
    if args.part in ("takeover", "all"):
        takeover_figures(base, args)
    return 0


def cost(base: Path, args: argparse.Namespace) -> None:
    res = {s: store_run(base, s, args) for s in ("file", "etcd")}
    for s, r in res.items():
        print(f"{s:5s}: {r['submitted']:.0f} held submissions, {r['per_s']:.0f}/s, rctld CPU "
              f"{r['cpu_ms']:.2f} ms each; submit -> running p50 {r['lat_p50_ms']:.0f} ms, "
              f"max {r['lat_max_ms']:.0f} ms")
    print(f"etcd/file CPU per submission: {res['etcd']['cpu_ms'] / res['file']['cpu_ms']:.2f}x")


def takeover_figures(base: Path, args: argparse.Namespace) -> None:
    times, failures = takeovers(base, args.trials)
    for how in ("kill", "cut"):
        got = sorted(t for h, t in times if h == how and t == t)
        if got:
            print(f"takeover after {how}: n={len(got)} p50 {statistics.median(got):.2f} s, "
                  f"max {max(got):.2f} s")
    every = sorted(t for _, t in times if t == t)
    if every:
        print(f"takeover, all: n={len(every)} p50 {statistics.median(every):.2f} s, max "
              f"{max(every):.2f} s; trials failing a check (lost/twice/DOWN): {failures}")


if __name__ == "__main__":
    sys.exit(main())
