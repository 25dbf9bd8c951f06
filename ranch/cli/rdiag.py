"""rdiag (sdiag): the controller's scheduler statistics, as sdiag 22.05 prints its "Main schedule
statistics" and "Backfilling stats" blocks (src/sdiag/sdiag.c: the same labels, the same lines
shown only once a cycle ran), from the counters rctld's FIFO pass and backfill loop keep since it
started; `--json` gives the figures under slurmrestd's diag names."""

from __future__ import annotations

import sys
from typing import Any

from ranch.cli import sbatch_options as so
from ranch.cli.controller import CliError, find_target, run_main
from ranch.cli.slurm_names import opening

OPTIONS = so.Options((
    so.Opt("all", "a", so.NO), so.Opt("json", "", so.NO), so.Opt("reset", "r", so.NO),
    so.Opt("sort-by-id", "i", so.NO), so.Opt("sort-by-time", "t", so.NO),
    so.Opt("sort-by-time2", "T", so.NO), so.Opt("cluster", "M", so.REQUIRED),
    so.Opt("server", "", so.REQUIRED), so.Opt("key-file", "", so.REQUIRED),
    so.Opt("conf", "f", so.REQUIRED), so.Opt("version", "V", so.NO),
    so.Opt("help", "h", so.NO), so.Opt("usage", "", so.NO),
))


def render(s: dict[str, Any]) -> str:
    """The two blocks, line for line as sdiag.c prints them (tabs included)."""
    from ranch.conf.timefmt import slurm_timestamp

    main = s["schedule_cycle_total"]
    out = ["Main schedule statistics (microseconds):",
           f"\tLast cycle:   {s['schedule_cycle_last']}",
           f"\tMax cycle:    {s['schedule_cycle_max']}",
           f"\tTotal cycles: {main}"]
    if main > 0:
        out += [f"\tMean cycle:   {s['schedule_cycle_mean']}",
                f"\tMean depth cycle:  {s['schedule_cycle_mean_depth']}"]
    if s["req_time"] - s["req_time_start"] > 60:
        out.append(f"\tCycles per minute: {s['schedule_cycle_per_minute']}")
    out.append(f"\tLast queue length: {s['schedule_queue_length']}")
    out.append("")
    out.append("Backfilling stats (WARNING: data obtained in the middle of backfilling "
               "execution.)" if s["bf_active"] else "Backfilling stats")
    bf = s["bf_cycle_counter"]
    when = s["bf_when_last_cycle"]
    out += [f"\tTotal backfilled jobs (since last slurm start): {s['bf_backfilled_jobs']}",
            "\tTotal backfilled jobs (since last stats cycle start): "
            f"{s['bf_last_backfilled_jobs']}",
            f"\tTotal backfilled heterogeneous job components: {s['bf_backfilled_het_jobs']}",
            f"\tTotal cycles: {bf}",
            f"\tLast cycle when: {slurm_timestamp(when)} ({when})" if when > 0
            else "\tLast cycle when: N/A",
            f"\tLast cycle: {s['bf_cycle_last']}",
            f"\tMax cycle:  {s['bf_cycle_max']}"]
    if bf > 0:
        out.append(f"\tMean cycle: {s['bf_cycle_mean']}")
    out += [f"\tLast depth cycle: {s['bf_last_depth']}",
            f"\tLast depth cycle (try sched): {s['bf_last_depth_try']}"]
    if bf > 0:
        out += [f"\tDepth Mean: {s['bf_depth_mean']}",
                f"\tDepth Mean (try depth): {s['bf_depth_mean_try']}"]
    out.append(f"\tLast queue length: {s['bf_queue_len']}")
    if bf > 0:
        out.append(f"\tQueue length mean: {s['bf_queue_len_mean']}")
    out.append(f"\tLast table size: {s['bf_table_size']}")
    if bf > 0:
        out.append(f"\tMean table size: {s['bf_table_size_mean']}")
    return "\n".join(out) + "\n"


def run(argv: list[str]) -> int:
    opened = opening("rdiag", argv, OPTIONS, "Usage: {name} [-aritT] [--json]\n  The "
                     "scheduler's and backfill's statistics since the controller started.")
    if isinstance(opened, int):
        return opened
    values, rest = opened
    if rest:
        raise CliError(f"unexpected argument {rest[0]!r}")
    if values.get("reset"):  # sdiag -r: Ranch's counters run from the controller's start
        raise CliError("Ranch does not reset its statistics: they count from rctld's start")
    if values.get("cluster"):
        raise CliError("Problem talking to database")
    from ranch.cli.controller import Refused, request

    server, key, conf = (str(values[k]) if values.get(k) else None
                         for k in ("server", "key-file", "conf"))
    target = find_target(server, key, conf)
    try:
        stats = request(target, "GetDiag", {}, want="Diag")["stats"]
    except Refused as exc:
        raise CliError(exc.message) from None
    if values.get("json"):
        import orjson

        sys.stdout.write(orjson.dumps({"statistics": stats}, option=orjson.OPT_INDENT_2)
                         .decode() + "\n")
    else:
        sys.stdout.write(render(stats))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_main("rdiag", run, argv)


if __name__ == "__main__":
    sys.exit(main())
