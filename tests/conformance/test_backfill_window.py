"""sched/backfill around a maintenance window, and sdiag's blocks, against real Slurm 22.05
(issue 44), both with bf_interval=1: a window on c2 opens in 2 minutes for 5; a 5-minute job
that only c2 may run (-w c2) would cross it, so it waits and `squeue --start` plans it at the
window's end: Slurm shows the first bf_resolution boundary after it plus one second, Ranch
the boundary (docs/slurm-compat.md; within bf_resolution + bf_interval). Then `sdiag` (rdiag
on Ranch) once both schedulers have cycled and a minute has passed: the "Main schedule
statistics" and "Backfilling stats" blocks carry the same labels in the same order (the
figures differ)."""

from __future__ import annotations

import re
import time

import pytest

from tests.conformance.conftest import start_slurm
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.reboot_lab import wait
from tests.conformance.shape import SHAPE
from tests.conformance.sidebyside import run_both
from tests.conformance.test_backfill import BACKFILL, SLACK, _epoch


def labels(text: str) -> list[str]:
    """The two blocks' labels: from "Main schedule statistics" to the blank line after
    "Backfilling stats" (sdiag goes on with other blocks; rdiag stops there)."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("Main schedule"))
    bf = next(i for i in range(first, len(lines)) if lines[i].startswith("Backfilling stats"))
    last = next((i for i in range(bf, len(lines)) if not lines[i].strip()), len(lines))
    return [line.split(":")[0].strip() if ":" in line else line
            for line in lines[first:last]]


def script(cluster, start: str) -> list[tuple[str, object]]:
    seen: list[tuple[str, object]] = []
    r = cluster.run("scontrol", "create", "reservation", "ReservationName=maint1",
                    f"StartTime={start}", "Duration=5", "Nodes=c2", "Flags=maint,ignore_jobs",
                    "Users=root")
    assert r.returncode == 0, r.stderr
    show = cluster.run("scontrol", "show", "reservation", "maint1").stdout
    end = _epoch(re.search(r"EndTime=(\S+)", show).group(1))
    r = cluster.run("sbatch", "--parsable", "-o", "/dev/null", "-J", "crosses", "-w", "c2",
                    "-t", "5", "--wrap", "sleep 60")
    assert r.returncode == 0, r.stderr
    jid = r.stdout.strip().split(";")[0]
    wait(lambda: "N/A" not in cluster.run("squeue", "-h", "-j", jid, "-o", "%S").stdout, 30,
         f"the job's estimate on {cluster.name}")
    row = cluster.run("squeue", "--start", "-h", "-j", jid).stdout.split()
    seen.append(("state", row[4]))
    seen.append(("--start nodes", (row[6], row[7])))
    seen.append(("planned at the window's end",
                 0 <= _epoch(row[5]) - end <= 60 + SLACK or (row[5], end)))

    def blocks() -> str:
        out = cluster.run("sdiag").stdout
        return out if "Cycles per minute" in out and "\tMean cycle: " in out else ""

    text = wait(blocks, 150, f"both schedulers' cycles in sdiag on {cluster.name}")
    seen.append(("sdiag labels", labels(str(text))))
    cluster.run("scancel", jid)
    return seen


@pytest.fixture(scope="module")
def sessions() -> dict[str, list]:
    slurm = start_slurm(SHAPE, scheduler=BACKFILL)
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 120))
    try:
        with RanchCluster(SHAPE, scheduler=BACKFILL) as ranch:
            return run_both(slurm, ranch, lambda cluster: script(cluster, start), timeout=300)
    finally:
        slurm.stop()


def test_a_window_is_planned_around_and_sdiag_blocks_match_slurm(sessions) -> None:
    slurm, ranch = sessions["slurm"], sessions["ranch"]
    assert [s for s, _ in ranch] == [s for s, _ in slurm]
    for (step, want), (_, got) in zip(slurm, ranch, strict=True):
        assert got == want, f"{step}: Slurm {want}, Ranch {got}"
