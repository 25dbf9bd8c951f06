"""A reservation is on disk before `rcontrol create reservation` answers (issue 33): rctld killed
with SIGKILL right after, then started again, still holds the window, and a job that would cross
it waits for it until it is deleted."""

from __future__ import annotations

from pathlib import Path

from ranch.protocol import messages as m
from tests.integration.cluster import Cluster

BLOCKED = "ReqNodeNotAvail, May be reserved for other job"


def test_a_reservation_survives_a_crash_of_the_controller(tmp_path: Path) -> None:
    with Cluster(tmp_path / "c", ("n1",), rts=2) as c:
        c.start()
        made = c.run_cli("ranch.cli.rcontrol", "create", "reservation", "StartTime=now+1hour",
                         "Duration=2:00:00", "Nodes=n1", "Flags=maint,ignore_jobs",
                         "Users=root")
        assert made.returncode == 0 and made.stdout.strip().startswith("Reservation created: ")
        name = made.stdout.split()[-1]
        before = c.run_cli("ranch.cli.rinfo", "-T", "-h").stdout
        c.kill_ctld()  # SIGKILL right after the answer: nothing saved on the way out
        c.start_ctld()
        after = c.run_cli("ranch.cli.rinfo", "-T", "-h").stdout
        assert after == before and after.split()[:2] == [name, "INACTIVE"]
        sub = c.run_cli("ranch.cli.rbatch", "-t", "2:00:00", "-o", "/dev/null", "--wrap", "true")
        assert sub.returncode == 0, sub.stderr
        job = int(sub.stdout.split()[-1])

        def reason() -> str:
            jobs = {j["job_id"]: j for j in c.request(m.GetJobs(), timeout=10).jobs}
            return jobs[job].get("reason") or ""

        c.wait_for(lambda: reason() == BLOCKED, 20, what="the job waiting for the window")
        gone = c.run_cli("ranch.cli.rcontrol", "delete", f"ReservationName={name}")
        assert gone.returncode == 0, gone.stderr
        c.wait_for(lambda: reason() == "None", 20, what="the job started")
