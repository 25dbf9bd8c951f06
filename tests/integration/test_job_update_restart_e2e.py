"""rcontrol update JobId=: what a reply confirmed is in the journal, so a SIGKILL of rctld right
after it loses none of it (issue 48)."""

from __future__ import annotations

from pathlib import Path

from .test_jobs_e2e import cli, jobs_cluster, start, submit


def _shown(c, jid: int) -> dict[str, str]:
    shown = cli(c, "rcontrol", "-o", "show", "job", str(jid)).stdout
    return dict(w.split("=", 1) for w in shown.split() if "=" in w)


def test_job_updates_survive_a_sigkill_of_rctld(tmp_path: Path) -> None:
    with jobs_cluster(tmp_path, ["n1"]) as c:
        start(c)
        j = submit(c, "--begin=now+3600", "-t", "10", "--wrap", "true")
        a = submit(c, "--begin=now+3600", "--array=1-4%2", "--wrap", "true")
        cli(c, "rcontrol", "update", f"JobId={j}", "TimeLimit=+5", "Name=renamed",
            "Comment=kept", "Nice=7")
        cli(c, "rcontrol", "update", f"JobId={a}", "ArrayTaskThrottle=3")
        cli(c, "rcontrol", "uhold", str(j))
        c.kill_ctld()
        c.start_ctld()
        got = _shown(c, j)
        assert (got["TimeLimit"], got["JobName"], got["Comment"], got["Nice"],
                got["Reason"]) == ("00:15:00", "renamed", "kept", "7", "JobHeldUser"), got
        assert _shown(c, a)["ArrayTaskThrottle"] == "3"
