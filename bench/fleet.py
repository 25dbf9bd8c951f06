"""Fleet simulator: N simulated nodes in one trio process, each a real protocol peer of rctld.

    python bench/fleet.py --nodes 10000 --interval 10 --duration 60 --json out.json

Without --server it starts rctld itself with a generated config of N nodes (sim00001...) and
reads the key it creates. Figures are printed and, with --json, written as one JSON object."""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, for protocol/

import trio
from fleet_lib import limits, loopsteps, profile, statesave
from fleet_lib.config import Timing, config_text
from fleet_lib.controller import Controller, free_port
from fleet_lib.scenarios import SCENARIOS, Run, RunSpec
from fleet_lib.simnode import Fleet

from ranch.protocol import auth, client


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="fleet.py", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, required=True, help="simulated nodes")
    p.add_argument("--interval", type=int, default=10, help="HeartbeatInterval, seconds")
    p.add_argument("--duration", type=float, default=30.0, help="steady window, seconds")
    p.add_argument("--churn", type=float, default=0.0, metavar="RATE",
                   help="nodes leaving and rejoining per second (churn, all)")
    p.add_argument("--kill", type=int, default=0, metavar="K",
                   help="nodes that vanish at once (mass-failure, all)")
    p.add_argument("--scenario", choices=SCENARIOS, default="steady")
    p.add_argument("--slurmd-timeout", type=int, default=None,
                   help="SlurmdTimeout of the generated config (default 3 x interval)")
    p.add_argument("--admin-nodes", type=int, default=1000, help="nodes of the admin update")
    p.add_argument("--server", metavar="HOST:PORT", help="use a running rctld (config from "
                   "--write-config) instead of starting one")
    p.add_argument("--key-file", help="key of --server (default RANCH_KEY_FILE)")
    p.add_argument("--write-config", metavar="FILE", help="write the generated config and exit")
    p.add_argument("--json", metavar="FILE", help="write the figures here")
    p.add_argument("--workdir", help="keep the controller's config, state and log here")
    p.add_argument("--profile-ctld", metavar="DIR",
                   help="sample rctld with py-spy (if installed) in the storm, steady, admin "
                   "and stop phases; summaries in DIR/PHASE.txt")
    p.add_argument("--source-addresses", type=int, metavar="K",
                   help="bind node sockets to K loopback addresses 127.0.1.x (default: one "
                   "per 25,000 nodes, 127.0.0.1 below that)")
    p.add_argument("--event-churn", type=float, default=0.0, metavar="RATE",
                   help="admin DRAIN/UNDRAIN requests per second in the steady window (each on "
                   "--event-churn-nodes nodes): traffic for the event log")
    p.add_argument("--event-churn-nodes", type=int, default=50, metavar="K")
    p.add_argument("--stalled-follower", action="store_true",
                   help="hold an `rcontrol events --follow` connection that never reads during "
                   "the steady window (its heartbeat p99 should not move)")
    p.add_argument("--port", type=int, default=0,
                   help="port of the rctld it starts (default: a free one)")
    p.add_argument("--message-timeout", type=int, default=10, metavar="S",
                   help="MessageTimeout of the generated config (Slurm's default 10)")
    p.add_argument("--ctld-cpu", type=float, default=1.0, metavar="F",
                   help="let the rctld it starts run only this fraction of the time in the "
                   "storm (SIGSTOP/SIGCONT in slices shorter than a stall): a host short of "
                   "CPU, so that the backlog of a few hundred nodes outlasts MessageTimeout")
    p.add_argument("--loop-steps", action="store_true",
                   help="watch rctld's event loop (bench/fleet_lib/loopsteps.py): its longest "
                   "task step or collector pass in each phase, and the five longest of the run")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.nodes < 1 or args.interval < 1 or args.duration <= 0:
        p.error("--nodes and --interval must be at least 1, --duration positive")
    if args.scenario == "mass-failure" and args.kill <= 0:
        args.kill = max(1, args.nodes // 100)
    if args.scenario == "churn" and args.churn <= 0:
        args.churn = max(1.0, args.nodes / args.interval / 100)
    return args


def budget(spec: RunSpec) -> float:
    """An upper bound on the run's length: everything stops by itself."""
    extra = 120.0 + spec.storm_timeout + spec.duration + 2 * spec.interval
    if spec.scenario in ("all", "churn"):
        extra += 60
    if spec.scenario in ("all", "mass-failure"):
        extra += spec.slurmd_timeout + 3 * spec.interval + 60
    return extra


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft, hard = limits.raise_nofile(limits.fds_for(args.nodes))
    nodes = args.nodes
    cap = limits.max_nodes_for_fds(soft)
    notes: list[str] = []
    if nodes > cap:
        notes.append(f"RLIMIT_NOFILE is {soft} (hard {hard}): the simulator and rctld need one "
                     f"descriptor per node, so N is capped at {cap} (asked {args.nodes})")
        print(f"fleet: {notes[-1]}", file=sys.stderr)
        nodes = cap
    slurmd_timeout = args.slurmd_timeout or max(3 * args.interval, 5)
    timing = Timing(heartbeat_interval=args.interval, slurmd_timeout=slurmd_timeout,
                    message_timeout=args.message_timeout)
    if args.write_config:
        Path(args.write_config).write_text(config_text(nodes, timing))
        return 0
    sources = limits.source_addresses(nodes, args.source_addresses)
    spec = RunSpec(
        nodes=nodes, interval=args.interval, duration=args.duration, scenario=args.scenario,
        churn=args.churn, kill=args.kill, slurmd_timeout=slurmd_timeout,
        admin_nodes=args.admin_nodes, storm_timeout=max(60.0, 30 + nodes / 200),
        profile_dir=Path(args.profile_ctld) if args.profile_ctld else None,
        event_churn=args.event_churn, event_churn_nodes=args.event_churn_nodes,
        stalled_follower=args.stalled_follower,
    )  # fmt: skip

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="fleet-"))
    ctl = None
    try:
        if args.server:
            ctl = Controller.external(client.parse_address(args.server),
                                      auth.resolve_key_path(args.key_file))  # fmt: skip
        else:
            if args.loop_steps:  # Controller.spawn runs FLEET_CTLD in rctld's stead
                os.environ["FLEET_CTLD"] = f"{loopsteps.__file__} {workdir / 'loopsteps.json'}"
            ctl = Controller.spawn(workdir, config_text(nodes, timing),
                                   port=args.port or free_port())
        figures, windows = trio.run(run, spec, ctl, sources, budget(spec),
                                    args.message_timeout, args.ctld_cpu)
        if ctl.proc is not None:
            stopping = ctl

            def timed_stop() -> tuple[int | None, float]:
                t0 = time.monotonic()
                return stopping.stop(), time.monotonic() - t0

            status, took = profile.sample_stop(ctl.pid, spec.profile_dir, timed_stop)
            figures["ctld_exit_status"], figures["ctld_stop_s"] = status, round(took, 3)
            figures.update(statesave.measure(workdir / "fleet.conf", workdir / "state"))
            if args.loop_steps:
                figures.update(loop_figures(workdir / "loopsteps.json", windows))
    except KeyboardInterrupt:
        return 130
    finally:
        if ctl is not None and ctl.proc is not None and ctl.alive():
            ctl.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    figures.update(nodes_requested=args.nodes, nofile_limit=soft, source_addresses=len(sources),
                   nofile_limit_before=f"{before[0]}/{before[1]}")
    if notes:
        figures["notes"] = notes
    print(format_figures(figures))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    return 0


def loop_figures(path: Path, windows: dict[str, tuple[float, float]]) -> dict:
    """rctld's longest event-loop step (or collector pass) in each phase, ms, and the five
    longest of the run with the phase each fell in (bench/fleet_lib/loopsteps.py)."""
    steps = json.loads(path.read_text())

    def phase_of(at: float) -> str:
        return next((p for p, (a, b) in windows.items() if a <= at <= b), "between")

    fig: dict = {f"loop_longest_ms_{p}": max(
        (ms for at, ms, *_ in steps if a <= at <= b), default=0.0)
        for p, (a, b) in windows.items()}
    top = sorted(steps, key=lambda s: -s[1])[:5]
    fig["loop_longest_steps"] = [f"{ms} ms {phase_of(at)} {task}: {a} -> {b}"
                                 for at, ms, task, a, b in top]
    return fig


async def run(spec: RunSpec, ctl: Controller, sources: list[str], limit: float,
              message_timeout: float = 10.0, ctld_cpu: float = 1.0,
              ) -> tuple[dict, dict[str, tuple[float, float]]]:
    fleet = Fleet(ctl.addr, ctl.key, spec.nodes, spec.interval, sources=sources,
                  message_timeout=message_timeout)
    r = Run(spec, ctl, fleet)
    with trio.move_on_after(limit) as scope:
        async with trio.open_nursery() as nursery:
            if ctld_cpu < 1.0 and ctl.proc is not None:
                nursery.start_soon(throttle, ctl.proc, ctld_cpu, fleet.all_registered)
            fig = await r.main()
            nursery.cancel_scope.cancel()
        return fig, r.windows
    if scope.cancelled_caught:
        r.fig["timed_out_after_s"] = limit
    return r.fig, r.windows


async def throttle(proc, share: float, done: trio.Event, slice_s: float = 0.2) -> None:
    """Run `proc` `share` of each `slice_s` until `done`: every stop is shorter than rctld's
    stall threshold (0.5 s), so it sees a slow host, not a stall."""
    try:
        while not done.is_set():
            proc.send_signal(signal.SIGSTOP)
            await trio.sleep(slice_s * (1.0 - share))
            proc.send_signal(signal.SIGCONT)
            await trio.sleep(slice_s * share)
    finally:
        proc.send_signal(signal.SIGCONT)


def format_figures(fig: dict) -> str:
    width = max(len(k) for k in fig)
    lines = []
    for k in sorted(fig):
        v = fig[k]
        if isinstance(v, float) and not math.isnan(v):
            v = f"{v:,.3f}".rstrip("0").rstrip(".")
        lines.append(f"{k:<{width}}  {v}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
