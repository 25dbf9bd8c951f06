"""rsimulate (`ranch simulate`): a workload (the controller's job history, or an SWF trace) replayed
in virtual time through the scheduling core rctld runs, under one cluster.conf or two (before
and after a change); per-account wait, utilisation, bounded slowdown and makespan."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rsimulate",
        description="Replay a workload through Ranch's scheduler in virtual time under a "
                    "candidate cluster.conf, and report what it would do.")
    p.add_argument("--conf", required=True, metavar="FILE",
                   help="the cluster.conf to simulate (nodes, partitions, SchedulerType and "
                        "SchedulerParameters)")
    p.add_argument("--conf-after", metavar="FILE",
                   help="a second cluster.conf: report both and the change from --conf to it")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--swf", metavar="FILE",
                     help="a trace in the Standard Workload Format (Parallel Workloads Archive)")
    src.add_argument("--history", metavar="DIR",
                     help="rctld's job history: its StateSaveLocation or the job_history "
                          "directory in it")
    src.add_argument("--generate", type=int, metavar="N",
                     help="N jobs of the Lublin-Feitelson model (with --seed)")
    p.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    p.add_argument("--whole-nodes", action="store_true",
                   help="read an SWF job's processors as whole nodes (-N P --exclusive)")
    p.add_argument("--write-swf", metavar="FILE",
                   help="also write the workload simulated as an SWF trace")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument("-V", "--version", action="version", version=_version())
    return p


def _version() -> str:
    from ranch.protocol.release import version_text

    return f"{version_text()} (rsimulate)"


def _workload(args: argparse.Namespace, cfg: Any) -> list:
    from ranch.sim import history, lublin, trace

    if args.swf:
        with open(args.swf) as f:
            jobs, _ = trace.read_swf(f)
        return trace.whole_nodes(jobs) if args.whole_nodes else jobs
    if args.history:
        return history.jobs_of(history.read_records(args.history))
    procs = (len(cfg.nodes) if args.whole_nodes else sum(n.cpus for n in cfg.nodes))
    jobs = lublin.generate(args.generate, seed=args.seed, max_procs=procs)
    return trace.whole_nodes(jobs) if args.whole_nodes else jobs


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ranch.conf.build import load_config
    from ranch.conf.errors import ConfigError
    from ranch.sim import report, trace
    from ranch.sim.engine import Simulator
    from ranch.sim.multifactor import order_for

    try:
        cfgs = [load_config(args.conf)]
        if args.conf_after:
            cfgs.append(load_config(args.conf_after))
    except (ConfigError, OSError) as exc:
        print(f"rsimulate: {exc}", file=sys.stderr)
        return 1
    try:
        jobs = _workload(args, cfgs[0])
    except OSError as exc:
        print(f"rsimulate: {exc}", file=sys.stderr)
        return 1
    if not jobs:
        print("rsimulate: the workload has no job that ran", file=sys.stderr)
        return 1
    if args.write_swf:
        with open(args.write_swf, "w") as f:
            trace.write_swf(f, jobs, {"Note": "written by rsimulate"})
    sums = [report.summary(Simulator(cfg, order_for(cfg, jobs)).run(jobs)) for cfg in cfgs]
    if len(sums) == 2:
        cmp = report.compare(*sums)
        print(json.dumps(cmp, indent=2) if args.json else report.change_text(cmp))
    else:
        print(json.dumps(sums[0], indent=2) if args.json else report.text(sums[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
