"""Maintenance reservations against real Slurm 22.05 (issue 33): a window ahead on c1 with
jobs whose limits do and do not cross it (which start, which wait, and why), `scontrol show
reservation` and `sinfo -T`, update and delete, and an open maintenance window on c2 (the
node's state words). The same script runs on both at once, in two threads."""

from __future__ import annotations

import re
import time

import pytest

from tests.conformance.conftest import start_slurm
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.reboot_lab import wait
from tests.conformance.shape import SHAPE
from tests.conformance.sidebyside import run_both

_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def script(cluster, start: str) -> list[tuple[str, object]]:
    seen: list[tuple[str, object]] = []

    def run(*argv: str) -> tuple[int, str, str]:
        r = cluster.run(*argv)
        return r.returncode, r.stdout.strip(), r.stderr.strip().splitlines()[-1:]

    def jobs() -> list[tuple[str, str]]:
        out = cluster.run("squeue", "-h", "-t", "all", "-o", "%i|%t|%r").stdout.splitlines()
        return sorted(tuple(line.split("|")[1:]) for line in out)  # type: ignore[misc]

    seen.append(("create", run("scontrol", "create", "reservation", "ReservationName=maint1",
                               f"StartTime={start}", "Duration=10", "Nodes=c1",
                               "Flags=maint,ignore_jobs", "Users=root")))
    seen.append(("show", run("scontrol", "show", "reservation", "-o")))
    seen.append(("sinfo -T", run("sinfo", "-T")))
    for limit in ("1", "5", None):
        argv = ["sbatch", "-w", "c1", "-o", "/dev/null", *(["-t", limit] if limit else []),
                "--wrap", "sleep 60"]
        assert cluster.run(*argv).returncode == 0
    # the short one starts, the two that would still run when the window opens wait
    wait(lambda: jobs() == [("PD", "ReqNodeNotAvail, May be reserved for other job")] * 2
         + [("R", "None")], 30, f"jobs placed on {cluster.name}")
    seen.append(("jobs before", jobs()))
    seen.append(("update", run("scontrol", "update", "ReservationName=maint1", "Duration=20")))
    seen.append(("show after update", run("scontrol", "show", "reservation", "maint1")))
    seen.append(("delete", run("scontrol", "delete", "ReservationName=maint1")))
    seen.append(("delete again", run("scontrol", "delete", "ReservationName=maint1")))
    wait(lambda: sum(s == "R" for s, _ in jobs()) == 2, 30, f"a job started on {cluster.name}")
    seen.append(("jobs after", jobs()))
    seen.append(("sinfo -T empty", run("sinfo", "-T")))
    # an open maintenance window: the node's words, and a job that must wait
    seen.append(("create now", run("scontrol", "create", "reservation", "StartTime=now",
                                   "Duration=30", "Nodes=c2", "Flags=maint", "Users=root")))
    wait(lambda: "maint" in cluster.run("sinfo", "-h", "-n", "c2", "-o", "%t").stdout, 90,
         f"c2 maint on {cluster.name}")
    words = cluster.run("sinfo", "-h", "-n", "c2", "-o", "%t|%T").stdout.strip()
    show = cluster.run("scontrol", "show", "node", "c2", "-o").stdout
    seen.append(("c2 in maint", (words, re.search(r"\bState=(\S+)", show).group(1))))
    code, out, err = run("sinfo", "-T", "-h")
    seen.append(("sinfo -T active", (code, _STAMP.sub("T", out), err)))
    r = cluster.run("scontrol", "reboot", "c1")  # neither has a RebootProgram here
    seen.append(("reboot without RebootProgram", (r.returncode, [
        e.split("error: ")[-1] for e in r.stderr.strip().splitlines()])))
    seen.append(("refusals", [run("scontrol", "create", "reservation", "StartTime=now",
                                  "Nodes=c2", "Flags=maint", "Users=root")[0],
                              run("scontrol", "create", "reservation", "StartTime=now",
                                  "Duration=5", "Nodes=c2", "Flags=bogus", "Users=root")[0]]))

    def refused(*argv: str) -> tuple[int, list[str]]:  # the words after the program's name
        r = cluster.run(*argv)
        return r.returncode, [e.split("error: ", 1)[-1] for e in r.stderr.splitlines()[:1]]

    # a negative Duration (but -1, INFINITE) or a malformed one: refused before any request
    seen.append(("invalid durations", [
        refused("scontrol", "create", "reservation", "StartTime=now", "Duration=-5",
                "Nodes=c2", "Users=root"),
        refused("scontrol", "create", "reservation", "StartTime=now", "duration=1:-5",
                "Nodes=c2", "Users=root"),
        refused("scontrol", "update", "ReservationName=maint1", "Duration=-5")]))
    return seen


@pytest.fixture(scope="module")
def sessions() -> dict[str, list]:
    slurm = start_slurm()
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 240))
    try:
        with RanchCluster(SHAPE) as ranch:
            return run_both(slurm, ranch, lambda cluster: script(cluster, start), timeout=300)
    finally:
        slurm.stop()


def test_reservation_listings_jobs_and_node_states_match_slurm(sessions) -> None:
    slurm, ranch = sessions["slurm"], sessions["ranch"]
    assert [s for s, _ in ranch] == [s for s, _ in slurm]
    for (step, want), (_, got) in zip(slurm, ranch, strict=True):
        assert got == want, f"{step}: Slurm {want}, Ranch {got}"
