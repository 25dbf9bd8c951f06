"""rctld's CPU per CLI submission, trees side by side: `rbatch --hold --wrap true` loops.

    python bench/submit_cpu.py --ranch before=/tmp/ranch-old --ranch after=. --rounds 3

For each round and each tree (interleaved: before, after, before, after...) it starts rctld
alone from that tree (the cluster of bench/vs_slurm.py, no node daemons: held jobs need none),
runs `--submitters` shell loops of the installed `rbatch` (importing that tree) until `--jobs`
were submitted, and reads the controller's user and system CPU from /proc before and after.
`--py-spy FILE` records rctld of the last tree's last round (speedscope format, wall time: a
blocking fsync shows as busy), `--cprofile FILE` runs that rctld under cProfile timed by CPU
(process_time; small calls are inflated). `--inproc`: no submit commands; this process sends
the requests one after the other (and as many Pings first: the floor any connection pays), which
takes the commands' start, competing for the CPUs, out of rctld's figure; with `--paced RATE`
they go RATE a second instead of back to back (a controller's CPU per request grows as
requests come further apart; bench/submit_floor.py --paced gives the floor any Python server
pays at that rate). Prints; asserts nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.vs_slurm import RANCH_CONF, SHAPE, SUBMIT, daemon_entry  # noqa: E402
from tests.integration.cluster import free_port  # noqa: E402

# rctld under cProfile, its clock the process's CPU time; the stats are written when it exits
CPROFILED = """
import cProfile, runpy, sys, time
out, sys.argv = sys.argv[1], ["ranch.ctld.main", *sys.argv[2:]]
prof = cProfile.Profile(timer=time.process_time)
prof.enable()
try:
    runpy.run_module("ranch.ctld.main", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    prof.disable()
    prof.dump_stats(out)
"""


def proc_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def one(label: str, tree: Path, args: argparse.Namespace, spy: str | None) -> tuple[float, float]:
    """(user, system) ms of rctld per submission."""
    from ranch.protocol.auth import create_key

    work = Path(tempfile.mkdtemp(prefix=f"submit-cpu-{label}-"))
    port = free_port()
    key = work / "ranch.key"
    create_key(str(key))
    conf = work / "cluster.conf"
    conf.write_text(RANCH_CONF.format(port=port, key=key, heartbeat=1) + SHAPE.global_conf()
                    + SHAPE.nodes_conf())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RANCH_"))}
    env.update(RANCH_SERVER=f"127.0.0.1:{port}", RANCH_KEY_FILE=str(key),
               PYTHONPATH=str(tree.resolve()))
    # Bytecode cached, as an installed command has it: with PYTHONDONTWRITEBYTECODE=1 (this
    # machine's environment) a tree never compiled (a `before` from git archive) compiles every
    # module on every rbatch, ~35 ms of CPU against ~15 ms, and that load fell on rctld's figure.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    bindir = Path(sys.executable).parent
    with open(work / "rctld.log", "ab") as log:
        main = (["-c", CPROFILED, args.cprofile] if args.cprofile and spy
                else daemon_entry(tree, "ctld"))
        ctld = subprocess.Popen([sys.executable, *main, "-f", str(conf),
                                 "--state-dir", str(work / "state")], cwd=tree, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    spyproc = None
    try:
        deadline = time.monotonic() + 30
        while subprocess.run([str(bindir / "rinfo"), "-h"], env=env, capture_output=True,
                             cwd=work).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError((work / "rctld.log").read_text()[-2000:])
            time.sleep(0.2)
        time.sleep(0.5)
        if spy and not args.cprofile:
            spyproc = subprocess.Popen(
                [str(bindir / "py-spy"), "record", "-o", spy, "--format", "speedscope", "-r",
                 "500", "--nonblocking", "-p", str(ctld.pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        if args.inproc:
            return inproc(label, ctld.pid, ("127.0.0.1", port), key, args.jobs, args.paced)
        each = -(-args.jobs // args.submitters)
        cmd = " ".join(f"'{a}'" for a in [str(bindir / "rbatch"), *SUBMIT])
        loop = f"for i in $(seq {each}); do {cmd} >/dev/null || exit 1; done"
        u0, s0 = proc_times(ctld.pid)
        t0 = time.perf_counter()
        procs = [subprocess.Popen(["sh", "-c", loop], env=env, cwd=work)
                 for _ in range(args.submitters)]
        if any(p.wait() for p in procs):
            raise RuntimeError(f"{label}: a submitter failed")
        wall = time.perf_counter() - t0
        u1, s1 = proc_times(ctld.pid)
        n = each * args.submitters
        print(f"  {label}: {n / wall:.0f}/s, rctld user {(u1 - u0) / n * 1000:.3f} ms + "
              f"system {(s1 - s0) / n * 1000:.3f} ms per submission, load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        return (u1 - u0) / n * 1000, (s1 - s0) / n * 1000
    finally:
        if spyproc is not None:
            spyproc.send_signal(signal.SIGINT)
            spyproc.wait(30)
        ctld.send_signal(signal.SIGTERM)
        try:
            ctld.wait(15)
        except subprocess.TimeoutExpired:
            ctld.kill()
            ctld.wait()
        shutil.rmtree(work, ignore_errors=True)


def inproc(label: str, pid: int, addr: tuple[str, int], key: Path,
           n: int, rate: float | None = None) -> tuple[float, float]:
    """`n` signed Pings, then `n` held SubmitJobs (as rbatch --hold --wrap true sends, this
    process's environment in it), one after the other from this process: rctld's CPU per
    request without the submit commands' own start competing for the CPUs, and the floor
    every connection pays (the Ping) beside it. (user, system) ms per submission."""
    from ranch.protocol import messages as m
    from ranch.protocol.auth import load_key
    from ranch.protocol.typedclient import request

    secret = load_key(str(key))
    submit = m.SubmitJob(user="root", uid=os.getuid(), gid=os.getgid(), command="",
                         script="#!/bin/sh\n# This script was created by rbatch --wrap.\n\ntrue\n",
                         workdir=os.getcwd(), stdout="/dev/null", hold=True,
                         env=tuple(sorted(os.environ.items())))
    got = []
    for what, msg in (("ping", m.Ping()), ("submit", submit)):
        u0, s0 = proc_times(pid)
        t0 = time.perf_counter()
        for i in range(n):
            if rate:
                time.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
            reply = request(addr, secret, msg)
            if isinstance(reply, m.Error):
                raise RuntimeError(f"{label}: {reply.message}")
        u1, s1 = proc_times(pid)
        got.append(((u1 - u0) / n * 1000, (s1 - s0) / n * 1000))
        print(f"  {label} {what}: rctld user {got[-1][0]:.3f} ms + system {got[-1][1]:.3f} ms "
              f"per request, load {os.getloadavg()[0]:.1f}", flush=True)
    return got[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranch", action="append", metavar="LABEL=TREE")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=240)
    p.add_argument("--submitters", type=int, default=8)
    p.add_argument("--py-spy", metavar="FILE")
    p.add_argument("--inproc", action="store_true",
                   help="one client in this process, requests one after the other (Ping too)")
    p.add_argument("--paced", type=float, metavar="RATE",
                   help="with --inproc: RATE requests a second (default: back to back)")
    p.add_argument("--cprofile", metavar="FILE", help="run the last rctld under cProfile")
    args = p.parse_args(argv)
    trees = [(lb, Path(t)) for lb, _, t in (r.partition("=") for r in args.ranch or [])] \
        or [("ranch", ROOT)]
    got: dict[str, list[tuple[float, float]]] = {}
    for rnd in range(args.rounds):
        print(f"round {rnd + 1}", flush=True)
        for i, (lb, tree) in enumerate(trees):
            last = rnd == args.rounds - 1 and i == len(trees) - 1
            spy = (args.py_spy or args.cprofile) if last else None
            got.setdefault(lb, []).append(one(lb, tree, args, spy))
    who = "one in-process client" if args.inproc else f"{args.submitters} submitters"
    print(f"\n{who}, {args.jobs} submissions a run, medians of "
          f"{args.rounds}: rctld CPU per 1,000 submissions")
    for lb, runs in got.items():
        u = statistics.median(r[0] for r in runs)
        s = statistics.median(r[1] for r in runs)
        tot = statistics.median(r[0] + r[1] for r in runs)
        print(f"  {lb}: {tot:.2f} s (user {u:.2f}, system {s:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
