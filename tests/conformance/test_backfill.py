"""sched/backfill against real Slurm 22.05 (issue 44), both with bf_interval=1: a 2-node job
waits for Resources behind a 10-minute job on c1; a 3-minute job behind it backfills on c2, a
20-minute one does not; `squeue --start` shows the big job starting when the running job's
limit ends (to the second: within bf_interval) on c[1-2], the long one when the big one's
reservation ends (its start + 5 minutes rounded down to bf_resolution, to the second), and
`scontrol show job` the big one's StartTime= and SchedNodeList=. The same script runs on both
at once, in two threads."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.conformance.conftest import start_slurm
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.reboot_lab import wait
from tests.conformance.shape import SHAPE
from tests.conformance.sidebyside import run_both, same_steps

BACKFILL = "SchedulerType=sched/backfill\nSchedulerParameters=sched_interval=1,bf_interval=1\n"
SLACK = 1 + 2  # bf_interval, and a second each side for the clocks (estimates are exact)


def _epoch(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))


def script(cluster) -> list[tuple[str, object]]:
    seen: list[tuple[str, object]] = []
    ids: dict[str, str] = {}
    for name, argv in (("running", ["-w", "c1", "--exclusive", "-t", "10"]),
                       ("big", ["-N", "2", "--exclusive", "-t", "5"]),
                       ("short", ["-N", "1", "-t", "3"]),
                       ("long", ["-N", "1", "-t", "20"])):
        r = cluster.run("sbatch", "--parsable", "-o", "/dev/null", "-J", name, *argv,
                        "--wrap", "sleep 600")
        assert r.returncode == 0, r.stderr
        ids[name] = r.stdout.strip().split(";")[0]
        if name == "running":
            wait(lambda: cluster.run("squeue", "-h", "-j", ids["running"], "-o", "%t")
                 .stdout.strip() == "R", 30, f"the first job running on {cluster.name}")

    def states() -> dict[str, str]:
        out = cluster.run("squeue", "-h", "-o", "%j|%t|%r").stdout.splitlines()
        return {n: f"{t} {r}" for n, t, r in (line.split("|") for line in out)}

    wait(lambda: states().get("short", "").startswith("R"), 30,
         f"the short job backfilled on {cluster.name}")
    wait(lambda: "N/A" not in cluster.run("squeue", "-h", "-j", ids["big"], "-o", "%S").stdout,
         30, f"the big job's estimate on {cluster.name}")
    seen.append(("states", states()))
    began = cluster.run("squeue", "-h", "-j", ids["running"], "-o", "%S").stdout.strip()
    end = _epoch(began) + 600  # its 10-minute limit
    start = cluster.run("squeue", "--start", "-j", ids["big"])
    lines = start.stdout.splitlines()
    seen.append(("--start header", lines[0].split()))
    row = lines[1].split()
    when = row[5]
    seen.append(("--start big", [row[1], row[2], row[4], row[6], row[7], row[8]]))
    seen.append(("starts when the running job's limit ends",
                 0 <= _epoch(when) - end <= SLACK or (when, began)))
    # the long job: planned after the big one, whose limit is 5 minutes
    row = cluster.run("squeue", "--start", "-h", "-j", ids["long"]).stdout.split()
    # (its one node is each scheduler's own pick, as for every one-node job here)
    seen.append(("--start long", [row[2], row[6], row[8]]))
    # (backfill.c: end_reserve = start_time + limit, rounded down to bf_resolution)
    seen.append(("long starts when the big job's reservation ends",
                 (row[5] != "N/A" and _epoch(row[5]) == (_epoch(when) + 300) // 60 * 60)
                 or (row[5], when)))
    show = cluster.run("scontrol", "show", "job", ids["big"]).stdout
    got = re.search(r"StartTime=(\S+)", show)
    seen.append(("show job StartTime", got is not None and got.group(1) == when))
    line = re.search(r"(?m)^\s*(NodeList=.*)$", show)
    seen.append(("show job NodeList", line and line.group(1).strip()))
    return seen


def on_both(scheduler: str, script: Callable[[Any], list]) -> dict[str, list]:
    """`script` on a private Slurm and a Ranch of SHAPE under `scheduler`, at once."""
    slurm = start_slurm(SHAPE, scheduler=scheduler)
    try:
        with RanchCluster(SHAPE, scheduler=scheduler) as ranch:
            return run_both(slurm, ranch, script, timeout=180)
    finally:
        slurm.stop()


@pytest.fixture(scope="module")
def sessions() -> dict[str, list]:
    return on_both(BACKFILL, script)


def test_backfill_starts_and_estimates_match_slurm(sessions) -> None:
    same_steps(sessions)
