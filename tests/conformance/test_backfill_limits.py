"""sched/backfill's two limits on what a cycle plans, against real Slurm 22.05 (issue 44), both
with bf_interval=1 on c1-c2:

- bf_max_job_test=2: a job holds both nodes for 10 minutes and four 1-node jobs wait; once
  the cycles have run, the first two have their start (the running job's limit) and the other
  two none (`squeue --start` N/A): each cycle stops at two;
- bf_min_prio_reserve=1000: a 2-node job waits behind a job on c1, and a 20-minute 1-node job
  cannot take c2 without delaying it, so it waits; once an admin sets their priorities under
  the threshold (500 and 400), the 2-node job is no longer reserved for and the long job starts
  on c2 at once.

The same script runs on both at once, in two threads; every step's figures compared."""

from __future__ import annotations

import pytest

from tests.conformance.reboot_lab import wait
from tests.conformance.sidebyside import same_steps
from tests.conformance.test_backfill import BACKFILL, SLACK, _epoch, on_both

MAX_JOB_TEST = BACKFILL.replace("bf_interval=1", "bf_interval=1,bf_max_job_test=2")
MIN_PRIO = BACKFILL.replace("bf_interval=1", "bf_interval=1,bf_min_prio_reserve=1000")


def _submit(cluster, name: str, *argv: str) -> str:
    r = cluster.run("sbatch", "--parsable", "-o", "/dev/null", "-J", name, *argv,
                    "--wrap", "sleep 600")
    assert r.returncode == 0, (cluster.name, r.stderr)
    return r.stdout.strip().split(";")[0]


def _running(cluster, jid: str) -> None:
    wait(lambda: cluster.run("squeue", "-h", "-j", jid, "-o", "%t").stdout.strip() == "R", 30,
         f"job {jid} running on {cluster.name}")


def _states(cluster) -> dict[str, str]:
    """Each job's state and reason, once every pending one has a reason: a loaded slurmctld
    showed the backfill cycle's estimates while the jobs it had released still said None, its
    main scheduler not yet run over them (Ranch's event pass gives them at the release)."""
    def shown() -> dict[str, str] | None:
        out = cluster.run("squeue", "-h", "-o", "%j|%t|%r").stdout.splitlines()
        got = {n: f"{t} {r}" for n, t, r in (line.split("|") for line in out)}
        return None if any(v == "PD None" for v in got.values()) else got

    got = wait(shown, 30, f"every pending job's reason on {cluster.name}")
    assert isinstance(got, dict)
    return got


def max_job_test(cluster) -> list[tuple[str, object]]:
    seen: list[tuple[str, object]] = []
    running = _submit(cluster, "running", "-N", "2", "--exclusive", "-t", "10")
    _running(cluster, running)
    # held, then released in one command: the cycle that plans p2 has all four before it
    ids = {name: _submit(cluster, name, "-H", "-N", "1", "--exclusive", "-t", "5")
           for name in ("p1", "p2", "p3", "p4")}
    r = cluster.run("scontrol", "release", ",".join(ids.values()))
    assert r.returncode == 0, (cluster.name, r.stderr)
    wait(lambda: "N/A" not in cluster.run("squeue", "-h", "-j", ids["p2"], "-o", "%S").stdout,
         30, f"p2's estimate on {cluster.name}")
    end = _epoch(cluster.run("squeue", "-h", "-j", running, "-o", "%S").stdout.strip()) + 600
    seen.append(("states", _states(cluster)))
    for name, jid in ids.items():
        row = cluster.run("squeue", "--start", "-h", "-j", jid).stdout.split()
        when = row[5] if len(row) > 5 else "(none)"
        # a planned start is the running job's limit (within bf_interval and the clocks)
        seen.append((f"--start {name}", when == "N/A" or 0 <= _epoch(when) - end <= SLACK
                     or (when, end)))
        seen.append((f"{name} planned", when != "N/A"))
    return seen


def min_prio_reserve(cluster) -> list[tuple[str, object]]:
    seen: list[tuple[str, object]] = []
    running = _submit(cluster, "running", "-w", "c1", "--exclusive", "-t", "10")
    _running(cluster, running)
    big = _submit(cluster, "big", "-N", "2", "--exclusive", "-t", "5")
    long = _submit(cluster, "long", "-N", "1", "--exclusive", "-t", "20")
    wait(lambda: "N/A" not in cluster.run("squeue", "-h", "-j", big, "-o", "%S").stdout, 30,
         f"the big job's estimate on {cluster.name}")
    # the cycle that planned the big job left the long one waiting: it would delay it
    seen.append(("reserved: states", _states(cluster)))
    for jid, prio in ((big, "500"), (long, "400")):
        r = cluster.run("scontrol", "update", f"jobid={jid}", f"priority={prio}")
        assert r.returncode == 0, (cluster.name, r.stderr)
    wait(lambda: cluster.run("squeue", "-h", "-j", long, "-o", "%t").stdout.strip() == "R",
         30, f"the long job started on {cluster.name}")
    seen.append(("below the threshold: states", _states(cluster)))
    seen.append(("long on", cluster.run("squeue", "-h", "-j", long, "-o", "%N").stdout.strip()))
    seen.append(("priorities", cluster.run("squeue", "-h", "-j", f"{big},{long}", "-o",
                                           "%j %Q").stdout.split()))
    return seen


@pytest.mark.parametrize(("scheduler", "script"), [(MAX_JOB_TEST, max_job_test),
                                                   (MIN_PRIO, min_prio_reserve)],
                         ids=["bf_max_job_test", "bf_min_prio_reserve"])
def test_a_cycles_limits_leave_the_same_jobs_unplanned_as_slurms(scheduler, script) -> None:
    sessions = on_both(scheduler, script)
    print("Slurm", sessions["slurm"], "\nRanch", sessions["ranch"])
    same_steps(sessions)
