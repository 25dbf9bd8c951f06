"""Controller CPU per held CLI submission (and submit -> running), Ranch against Slurm 22.05 run
with several settings, interleaved round by round, ratios per round and their medians.

    python bench/submit_vs_slurm.py                 # the default sides, 3 rounds (~4-5 min)
    python bench/submit_vs_slurm.py --rounds 7 --latency-jobs 40
    python bench/submit_vs_slurm.py --ranch before=/tmp/ranch-old --ranch after=. --rounds 3
    python bench/submit_vs_slurm.py --slurm slurm-issue-shm --paced 40 --paced 120

Each round starts, one after the other, each side named by --slurm (default: slurm-builtin,
slurm-issue, slurm-issue-shm; see SLURMS for every setting) on the conformance suite's private
Slurm (tests/conformance/slurm_cluster.py), and each Ranch tree (rctld and an rnoded per node,
bench/vs_slurm.py's RanchSide; its nodes beat every `--heartbeat-interval` seconds, 10 by
default as in a regular install), each tree also as LABEL-shm unless --no-shm. "-shm" sides keep
their whole directory (the controller's state, logs, spool) on tmpfs (/dev/shm); the others on
/tmp like every other bench here. On each side: `--warmup` held submissions not counted, the
controller's idle CPU over `--idle` seconds, then `--submitters` shell loops of `sbatch/rbatch
--hold --wrap true` (`--jobs` in all), the same from one loop (`--single`: every submission its
own commit), with each `--paced RATE` `--jobs` submissions started RATE a second on every side
alike, then `--latency-jobs` jobs one at a time that write their own start time.

Why paced: a controller's CPU per request grows as requests come further apart (the same calls
and system calls, each slower after a longer idle: caches gone cold, a core waking from its
sleep state): slurmctld + munged 0.37 ms at 560 a second,
0.58 at 120, 0.83 at 40. Loops of commands run as fast as each side's commands go, and sbatch
(C) runs four times as fast as rbatch (Python), so the loops feed slurmctld three times as fast
as rctld and compare their controllers at different rates; RATE/s figures compare them at one.

What is counted, per held submission (CPU from a cpuacct group per daemon, else /proc):
  ctld          slurmctld alone / rctld alone (Ranch checks and makes its MACs inside rctld)
  ctld+munged   slurmctld + its own munged (Slurm only): slurmctld, the slurmds and the
                commands each have a munged (tests/conformance/slurm_cluster.py,
                munged_per_role), so this is the MUNGE work slurmctld asks for (checking each
                request's credential, signing each reply), what Ranch does inside rctld;
                sbatch's credential and its check of the reply are in the commands' munged,
                as Ranch's are inside rbatch
  cmd munged    the commands' munged (Slurm only; in no ratio)
  ctld-idle     ctld less the idle rate (measured just before) times the burst's wall time:
                the background timers (heartbeats, scheduler passes) the window caught
  client        the submit loops' own CPU (sh + sbatch/rbatch), never in any ctld figure
Ratios (ctld / ctld, ctld / ctld+munged, ctld-idle / ctld-idle): each Ranch side against
each Slurm side whose directory is on the same filesystem.
Every daemon of this bench listens on 127.0.0.1 in 24000-24999 (`--ports`). Prints; asserts
nothing. Why two benches disagreed about Slurm by 2.4x: docs/benchmarks.md ("One Slurm figure").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import vs_slurm  # noqa: E402
from bench.vs_slurm import (  # noqa: E402
    SHAPE,
    RanchSide,
    SlurmSide,
    latencies,
    p99,
    paced_submits,
    parallel_submits,
)
from tests.conformance import slurm_cluster  # noqa: E402
from tests.conformance.slurm_cluster import SlurmCluster  # noqa: E402

SHM = "/dev/shm"
BACKFILL = "SchedulerType=sched/backfill\nSchedulerParameters=batch_sched_delay=0\n"
# label -> (SchedulerType/Parameters lines, slurm.conf lines appended, directory's parent):
# the fixture writes MessageTimeout=5; a later line wins (slurmctld logs "specified more than
# once, latest value used"), and the side checks `scontrol show config` says so
SLURMS = {
    # the project's bench and conformance setting (docs/benchmarks.md's first Slurm figures)
    "slurm-builtin": (slurm_cluster.BUILTIN, "", None),
    "slurm-backfill": (BACKFILL, "", None),
    # issue 50's setting: backfill, batch_sched_delay=0, MessageTimeout=30
    "slurm-issue": (BACKFILL, "MessageTimeout=30\n", None),
    "slurm-issue-shm": (BACKFILL, "MessageTimeout=30\n", SHM),
    "slurm-builtin-shm": (slurm_cluster.BUILTIN, "", SHM),
}
DEFAULT_SLURMS = ("slurm-builtin", "slurm-issue", "slurm-issue-shm")


@contextlib.contextmanager
def temp_under(parent: str | None):
    """mkdtemp() calls inside make their directories under `parent` (None: the default)."""
    before = tempfile.tempdir
    tempfile.tempdir = parent or before
    try:
        yield
    finally:
        tempfile.tempdir = before


class Slurm(SlurmSide):
    def __init__(self, label: str, workdir: Path) -> None:
        self.label = label
        scheduler, extra, parent = SLURMS[label]
        with temp_under(parent):
            self.cluster = SlurmCluster(SHAPE, scheduler=scheduler, extra_conf=extra,
                                        munged_per_role=True)
        self.workdir = workdir

    def start(self) -> None:
        super().start()
        conf = self.cluster.run("scontrol", "show", "config").stdout
        want = re.search(r"MessageTimeout=(\d+)", self.cluster.extra_conf)
        got = re.search(r"^MessageTimeout\s*=\s*(\d+)", conf, re.M)
        if want and (not got or got[1] != want[1]):
            raise RuntimeError(f"{self.label}: MessageTimeout {got and got[1]}, not {want[1]}")

    @property
    def munged_pids(self) -> tuple[int, int]:
        """slurmctld's own munged, the commands' munged."""
        return self.cluster.procs["munged-ctld"].pid, self.cluster.procs["munged"].pid


def make_ranch(label: str, tree: Path, workdir: Path, heartbeat: int) -> RanchSide:
    with temp_under(SHM if label.endswith("-shm") else None):
        return RanchSide(label, tree, workdir, heartbeat=heartbeat)


def port_range(low: int, high: int):
    """A free_port() that hands out ports of [low, high] only, each once a run."""
    nxt = [low]

    def free_port() -> int:
        while nxt[0] <= high:
            port = nxt[0]
            nxt[0] += 1
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
        raise RuntimeError(f"no free port left in {low}-{high}")

    return free_port


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class Meter:
    """CPU ms of some processes: from a cpuacct group of their own (nanoseconds, every thread
    they ever had, children too) where this machine lets us make one, else /proc's 10 ms ticks
    (which round a 240-submission burst's figure to 0.04 ms and an idle second's to 10 ms)."""

    def __init__(self, name: str, pids: list[int]) -> None:
        self.pids, self.group = pids, CPUACCT / f"bench-submit-vs-slurm-{os.getpid()}-{name}"
        try:
            self.group.mkdir()
            for pid in pids:
                (self.group / "cgroup.procs").write_text(str(pid))
        except OSError:
            self.close()
            self.group = None

    def ms(self) -> float:
        if self.group:
            return int((self.group / "cpuacct.usage").read_text()) / 1e6
        return sum(vs_slurm.proc_cpu(pid) for pid in self.pids) * 1000

    def close(self) -> None:
        """Remove the group (its processes stopped, or moved back to the root group)."""
        if self.group is None or not self.group.exists():
            return
        deadline = time.monotonic() + 5
        while True:
            try:
                self.group.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    for pid in (self.group / "cgroup.procs").read_text().split():
                        with contextlib.suppress(OSError):
                            (CPUACCT / "cgroup.procs").write_text(pid)
                    self.group.rmdir()
                    return
                time.sleep(0.1)


def burst(side, submitters: int, each: int, idle_ms_s: float,
          paced: float | None = None) -> dict[str, float]:
    """The CPU figures of `submitters` loops of `each` held submissions, or (`paced`) of
    `each` submissions started `paced` a second."""
    ctld, munged, cmd_munged = side.meters
    c0, m0, k0, t0 = ctld.ms(), munged and munged.ms(), os.times(), time.perf_counter()
    q0 = cmd_munged and cmd_munged.ms()
    if paced:
        rate = paced_submits(side, paced, each)
    else:
        rate = parallel_submits(side, submitters, each)
    c1, m1, k1, t1 = ctld.ms(), munged and munged.ms(), os.times(), time.perf_counter()
    q1 = cmd_munged and cmd_munged.ms()
    n = each if paced else submitters * each
    fig = {"subs/s": rate, "ctld": (c1 - c0) / n,
           "ctld-idle": (c1 - c0 - idle_ms_s * (t1 - t0)) / n,
           "client": (k1.children_user + k1.children_system - k0.children_user
                      - k0.children_system) * 1000 / n}
    if munged:
        fig["munged"] = (m1 - m0) / n
        fig["ctld+munged"] = fig["ctld"] + fig["munged"]
    if cmd_munged:
        fig["cmd munged"] = (q1 - q0) / n
    return fig


def one(side, args, scratch: Path) -> dict[str, float]:
    side.meters = (Meter(f"{side.label}-ctld", [side.ctld_pid]),
                   *((Meter(f"{side.label}-munged", [side.munged_pids[0]]),
                      Meter(f"{side.label}-cmd-munged", [side.munged_pids[1]]))
                     if isinstance(side, Slurm) else (None, None)))
    if args.warmup:  # first-touch page faults, the first RPC threads: not what a job costs
        loops = min(args.submitters, args.warmup)
        parallel_submits(side, loops, -(-args.warmup // loops))
    c0 = side.meters[0].ms()
    time.sleep(args.idle)
    idle = (side.meters[0].ms() - c0) / args.idle  # ms of CPU a second
    fig = {"idle ctld ms/s": idle}
    fig.update(burst(side, args.submitters, -(-args.jobs // args.submitters), idle))
    if args.single:
        fig.update({f"1 sub {k}": v for k, v in burst(side, 1, args.single, idle).items()
                    if k in ("ctld", "ctld+munged", "subs/s")})
    for pace in args.paced or ():
        fig.update({f"{pace:g}/s {k}": v for k, v in burst(side, 1, args.jobs, idle, pace).items()
                    if k in ("ctld", "ctld+munged", "ctld-idle", "subs/s")})
    if args.latency_jobs:
        vs_slurm.cancel_all(side)
        lat, acked = latencies(side, args.latency_jobs, scratch / "lat")
        fig.update({"submit->run p50": statistics.median(lat), "submit->run p99": p99(lat),
                    "ack->run p50": statistics.median(acked), "ack->run p99": p99(acked)})
    fig["load"] = os.getloadavg()[0]
    return fig


COUNTINGS = (("ctld", "ctld"), ("ctld", "ctld+munged"), ("ctld-idle", "ctld-idle"))


def pairs(labels: list[str]) -> list[tuple[str, str, str, str]]:
    """(Ranch side, its counting, Slurm side, its counting) for every Ranch and Slurm side
    whose directories are on one filesystem."""
    out = []
    for rl in (lb for lb in labels if lb not in SLURMS):
        for sl in (lb for lb in labels if lb in SLURMS):
            if rl.endswith("-shm") == sl.endswith("-shm"):
                out += [(rl, rk, sl, sk) for rk, sk in COUNTINGS]
    return out


def ratios(got: dict[str, dict[str, float]], labels: list[str]) -> list[str]:
    return [f"{rl} {rk} / {sl} {sk} {got[rl][rk] / got[sl][sk]:.2f}x"
            for rl, rk, sl, sk in pairs(labels) if rl in got and sl in got and got[sl][sk]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=240, help="held submissions a burst")
    p.add_argument("--submitters", type=int, default=8)
    p.add_argument("--single", type=int, default=60, help="held submissions by one submitter")
    p.add_argument("--warmup", type=int, default=40, help="held submissions not counted")
    p.add_argument("--idle", type=float, default=3.0, help="seconds the idle rate is read over")
    p.add_argument("--latency-jobs", type=int, default=0, help="submit -> running jobs a side")
    p.add_argument("--paced", type=float, action="append", metavar="RATE",
                   help="also --jobs submissions started RATE a second, on every side alike")
    p.add_argument("--ranch", action="append", metavar="LABEL=TREE")
    p.add_argument("--no-shm", action="store_true", help="no LABEL-shm side for each tree")
    p.add_argument("--slurm", action="append", choices=sorted(SLURMS),
                   help=f"which Slurm settings (default {', '.join(DEFAULT_SLURMS)})")
    p.add_argument("--ports", default="24000-24999")
    vs_slurm.add_heartbeat_option(p)
    args = p.parse_args(argv)
    low, _, high = args.ports.partition("-")
    free = port_range(int(low), int(high))
    slurm_cluster.free_port = vs_slurm.free_port = free  # every daemon's port from our range
    trees = [(lb, Path(t)) for lb, _, t in (r.partition("=") for r in args.ranch or [])] \
        or [("ranch", ROOT)]
    trees += [] if args.no_shm else [(f"{lb}-shm", t) for lb, t in trees]
    labels = [*(args.slurm or DEFAULT_SLURMS), *(lb for lb, _ in trees)]
    probe = Meter("probe", [])
    counted = "cpuacct groups (ns)" if probe.group else "/proc (10 ms ticks)"
    probe.close()
    print(f"{len(SHAPE.nodes)} nodes of {SHAPE.cpus} CPUs; {os.cpu_count()} CPUs here; "
          f"{args.submitters} submitters x {args.jobs} held jobs after {args.warmup} not "
          f"counted; order {', '.join(labels)}; Ranch's HeartbeatInterval "
          f"{args.heartbeat_interval} s; CPU ms per held submission, from {counted}",
          flush=True)
    rounds: list[dict[str, dict[str, float]]] = []
    for rnd in range(args.rounds):
        got: dict[str, dict[str, float]] = {}
        for lb in labels:
            scratch = Path(tempfile.mkdtemp(prefix=f"submit-vs-{lb}-"))
            side = Slurm(lb, scratch) if lb in SLURMS else make_ranch(lb, dict(trees)[lb],
                                                                        scratch,
                                                                        args.heartbeat_interval)
            try:
                result = vs_slurm.on_side(side, scratch, lambda s, d: one(s, args, d), lb)
            finally:  # the daemons are stopped: their groups are empty
                for meter in getattr(side, "meters", ()):
                    if meter:
                        meter.close()
            if result is None:
                continue
            got[lb] = result
            print(f"round {rnd + 1} {lb:>15}: " + ", ".join(
                f"{k} {v:.2f}" for k, v in got[lb].items()), flush=True)
        print(f"round {rnd + 1} ratios: " + "; ".join(ratios(got, labels)), flush=True)
        rounds.append(got)
    print("\nmedians over rounds (ratios: median of the per-round ratios)")
    for lb in labels:
        runs = [r[lb] for r in rounds if lb in r]
        if runs:
            print(f"  {lb:>15}: " + ", ".join(
                f"{k} {statistics.median(r[k] for r in runs):.2f}" for k in runs[0]
                if k != "load"))
    for rl, rk, sl, sk in pairs(labels):
        keys = [(rk, sk)]
        if rk == "ctld" and sk != "ctld-idle":
            keys.append((f"1 sub {rk}", f"1 sub {sk}"))
        keys += [(f"{pace:g}/s {rk}", f"{pace:g}/s {sk}") for pace in args.paced or ()]
        if (rk, sk) == ("ctld", "ctld"):  # the figures that are not CPU: once a pair
            keys += [("subs/s", "subs/s"), ("ack->run p50", "ack->run p50")]
        for rkey, skey in keys:
            per = [r[rl][rkey] / r[sl][skey] for r in rounds
                   if rl in r and sl in r and rkey in r[rl] and r[sl].get(skey)]
            if per:
                print(f"  {rl} {rkey} / {sl} {skey}: {statistics.median(per):.2f}x "
                      f"(rounds {' / '.join(f'{x:.2f}' for x in per)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
