"""Job throughput of rctld: 2,000 one-task `--wrap true` jobs on 6 and on 100 simulated nodes.

    python bench/jobs_bench.py [--jobs 2000] [--nodes 6,100] [--submitters 4] [--json FILE]

rctld runs as a real process with its state directory on disk (so every acknowledged submission
is journalled and fsync'd before its reply). The nodes are bench/fleet_lib simulated peers whose
jobs are no-ops: a LaunchJob is acknowledged and a COMPLETED ending goes up in the heartbeat
sent at once. Figures per fleet size:
  submit_per_s        submissions acknowledged per second (`--submitters` connections at once)
  submit_rtt_p50/p99  one submission's round trip (journal write included)
  start_p50/p99_ms    submit sent -> LaunchJob received by the node
  all_done_s          first submission -> every job's ending acknowledged by rctld
  ctld_cpu_s_per_1000 controller CPU seconds per 1,000 jobs (submit to completion)
  heartbeat_p50/p99   heartbeat round trips meanwhile (endings in a beat wait for the journal)
  serial_rtt_p50_ms   rbatch-like: one connection per submission, one at a time (200 jobs)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root

import attrs
import psutil
import trio
from fleet_lib.config import DEFAULT_SHAPE, FleetShape, Timing, config_text
from fleet_lib.controller import Controller, free_port
from fleet_lib.simnode import Fleet
from fleet_lib.stats import percentile

from ranch.protocol import messages as m
from ranch.protocol.tcp import FramedStream

SCRIPT = "#!/bin/sh\ntrue\n"


def job(i: int) -> m.SubmitJob:
    # max_nodes=0: what rbatch sends without -N (the tasks may spread over nodes)
    return m.SubmitJob(script=SCRIPT, user="bench", uid=1000, gid=1000, workdir="/tmp",
                       name=f"b{i}", submit_host="bench", max_nodes=0)


async def connect(ctl: Controller) -> FramedStream:
    stream = await trio.open_tcp_stream(*ctl.addr)
    return FramedStream(stream, ctl.key)


async def submitter(ctl: Controller, todo: list[int], sent: dict[int, float],
                    rtts: list[float], errors: list[str]) -> None:
    fs = await connect(ctl)
    rid = 0
    try:
        while todo:
            i = todo.pop()
            rid += 1
            t0 = time.perf_counter()
            await fs.send(job(i), rid)
            frame = await fs.receive()
            t1 = time.perf_counter()
            if isinstance(frame.msg, m.SubmitReply):
                sent[frame.msg.job_id] = t0
                rtts.append(t1 - t0)
            else:
                errors.append(repr(frame.msg))
    finally:
        await fs.aclose()


async def serial(ctl: Controller, count: int) -> list[float]:
    """rbatch's way: a new connection for each submission."""
    out = []
    for i in range(count):
        t0 = time.perf_counter()
        fs = await connect(ctl)
        await fs.send(job(i), 1)
        frame = await fs.receive()
        await fs.aclose()
        if isinstance(frame.msg, m.SubmitReply):
            out.append(time.perf_counter() - t0)
    return out


def ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1000, 2)


async def run_one(nodes: int, jobs: int, submitters: int, workdir: Path,
                  shape: FleetShape = DEFAULT_SHAPE) -> dict:
    timing = Timing(heartbeat_interval=10, slurmd_timeout=60)
    ctl = Controller.spawn(workdir, config_text(nodes, timing, shape), port=free_port())
    fig: dict = {"nodes": nodes, "cpus_per_node": shape.cpus, "jobs": jobs,
                 "submitters": submitters}
    try:
        proc = psutil.Process(ctl.pid)
        fleet = Fleet(ctl.addr, ctl.key, nodes, timing.heartbeat_interval, sources=["127.0.0.1"],
                      shape=shape)
        launched: dict[int, float] = {}
        fleet.on_launch = lambda job_id: launched.setdefault(job_id, time.perf_counter())
        async with trio.open_nursery() as nursery:
            fleet.start(nursery)
            with trio.move_on_after(60):
                await fleet.all_registered.wait()
            await trio.sleep(0.5)  # the last registrations' state changes settle
            sent: dict[int, float] = {}
            rtts: list[float] = []
            errors: list[str] = []
            cpu0 = sum(proc.cpu_times()[:2])
            fleet.open_window()  # heartbeat round trips while the jobs flow
            t0 = time.perf_counter()
            todo = list(range(jobs))
            async with trio.open_nursery() as subs:
                for _ in range(submitters):
                    subs.start_soon(submitter, ctl, todo, sent, rtts, errors)
            t_submitted = time.perf_counter()
            with trio.move_on_after(120):
                while not (fleet.launches >= len(sent)
                           and all(not n.ended for n in fleet.nodes)):
                    await trio.sleep(0.005)
            t_done = time.perf_counter()
            cpu1 = sum(proc.cpu_times()[:2])
            hb = list(fleet.hb_rtts)
            starts = [launched[j] - sent[j] for j in sent if j in launched]
            fig.update(
                submitted=len(sent), launched=len(starts), errors=errors[:3],
                submit_per_s=round(len(sent) / (t_submitted - t0), 1),
                submit_rtt_p50_ms=ms(percentile(rtts, 50)),
                submit_rtt_p99_ms=ms(percentile(rtts, 99)),
                start_p50_ms=ms(percentile(starts, 50)),
                start_p99_ms=ms(percentile(starts, 99)),
                start_max_ms=ms(max(starts) if starts else None),
                all_done_s=round(t_done - t0, 3),
                ctld_cpu_s_per_1000=round((cpu1 - cpu0) / max(len(sent), 1) * 1000, 3),
                heartbeats=len(hb),
                heartbeat_p50_ms=ms(percentile(hb, 50)),
                heartbeat_p99_ms=ms(percentile(hb, 99)),
            )
            ser = await serial(ctl, 200)
            fig["serial_rtt_p50_ms"] = ms(percentile(ser, 50))
            fig["serial_rtt_p99_ms"] = ms(percentile(ser, 99))
            nursery.cancel_scope.cancel()
    finally:
        ctl.stop()
    return fig


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--nodes", default="6,100", help="fleet sizes, comma list")
    p.add_argument("--submitters", type=int, default=4, help="concurrent submit connections")
    p.add_argument("--cpus", type=int, default=0, metavar="N",
                   help="CPUs per simulated node (default the fleet's 64); few CPUs make the "
                   "jobs queue, so that start times include waiting for a free CPU")
    p.add_argument("--json", metavar="FILE", help="write the figures here")
    args = p.parse_args(argv)
    shape = DEFAULT_SHAPE
    if args.cpus:
        shape = attrs.evolve(DEFAULT_SHAPE, sockets=1, cores_per_socket=args.cpus,
                             threads_per_core=1)
    results = []
    for n in (int(x) for x in args.nodes.split(",")):
        workdir = Path(tempfile.mkdtemp(prefix="jobs-bench-"))
        try:
            fig = trio.run(run_one, n, args.jobs, args.submitters, workdir, shape)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        results.append(fig)
        print(f"\n== {n} nodes, {args.jobs} jobs")
        for k, v in fig.items():
            print(f"  {k:<22} {v}")
    goals = [
        {"goal": f"submit->start p99 < 100 ms ({f['nodes']} nodes)",
         "ok": f["start_p99_ms"] is not None and f["start_p99_ms"] < 100} for f in results
    ] + [
        {"goal": f"> 500 submissions/s ({f['nodes']} nodes)", "ok": f["submit_per_s"] > 500}
        for f in results
    ]
    for g in goals:
        print(f"  {'met' if g['ok'] else 'NOT MET':>8}  {g['goal']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": results, "goals": goals}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
