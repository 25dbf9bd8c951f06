"""`rqueue --why` against a real rctld and real rnoded (issue 44): a job waiting behind a drained
node names the node and its reason; one whose run would cross a maintenance window names the
window and the shorter --time the planner confirms starts it now; one a QOS limit holds names the
limit and the jobs holding under it; and `rcontrol events --job` shows why a later job started
first."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .cluster import Cluster

ACCT = ("AccountingStorageType=accounting_storage/slurmdbd\n"
        "AccountingStorageEnforce=associations,limits,qos\n"
        "SchedulerParameters=bf_interval=1")


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    return done.stdout


def _submit(c: Cluster, *argv: str) -> int:
    out = _ok(c.run_cli("ranch.cli.rbatch", "-o", "/dev/null", *argv, "--wrap", "sleep 300"))
    return int(out.split()[-1])


def _why(c: Cluster, job: int) -> dict:
    return json.loads(_ok(c.run_cli("ranch.cli.rqueue", "--why", str(job), "--json")))


def _reason(c: Cluster, job: int) -> str:
    out = _ok(c.run_cli("ranch.cli.rqueue", "-h", "-j", str(job), "-o", "%T|%r"))
    return out.strip()


def test_rqueue_why_names_what_holds_each_job(tmp_path: Path) -> None:
    with Cluster(tmp_path / "c", ("n1", "n2", "n3", "n4"), extra=ACCT) as c:
        c.start()
        for words in (("-i", "add", "account", "physics"),
                      ("-i", "add", "user", "root", "Account=physics")):
            _ok(c.run_cli("ranch.cli.racctmgr", *words))
        # a drained node: the 4-node job waits for it, and the answer says so with its reason
        _ok(c.run_cli("ranch.cli.rcontrol", "update", "NodeName=n4", "State=DRAIN",
                      "Reason=fan failure"))
        big = _submit(c, "-N", "4", "-t", "10")
        c.wait_for(lambda: _reason(c, big).startswith("PENDING|"), what="the big job pending")
        doc = _why(c, big)
        assert doc["state"] == "PENDING" and "of the 4 node(s) it may use" in doc["binding"]
        assert any(e.startswith("n4: ") and "(fan failure)" in e for e in doc["evidence"]), doc
        text = _ok(c.run_cli("ranch.cli.rqueue", "--why", str(big)))
        assert f"JobId={big} PENDING" in text and "n4: " in text and "fan failure" in text
        _ok(c.run_cli("ranch.cli.rcancel", str(big)))
        _ok(c.run_cli("ranch.cli.rcontrol", "update", "NodeName=n4", "State=RESUME"))
        # a maintenance window on every node in 30 minutes: a 2-hour job would cross it
        made = _ok(c.run_cli("ranch.cli.rcontrol", "create", "reservation",
                             "StartTime=now+30minutes", "Duration=60", "Nodes=n[1-4]",
                             "Flags=maint,ignore_jobs", "Users=root"))
        long_ = _submit(c, "-t", "120")
        c.wait_for(lambda: _reason(c, long_) == "PENDING|ReqNodeNotAvail, May be reserved for "
                   "other job", what="the long job held by the window")
        doc = _why(c, long_)
        assert "a reservation holds n[1-4] from" in doc["binding"], doc
        assert "a run of 120 min from now would cross it" in doc["binding"]
        tip = next(t for t in doc["suggestions"] if t["option"].startswith("--time="))
        assert "it would start now" in tip["text"], doc
        short = _submit(c, tip["option"])  # as the planner suggested: it starts
        c.wait_for(lambda: _reason(c, short).startswith("RUNNING|"), what="the shorter job")
        for job in (long_, short):
            _ok(c.run_cli("ranch.cli.rcancel", str(job)))
        _ok(c.run_cli("ranch.cli.rcontrol", "delete", "reservation", made.split()[-1]))
        # a QOS limit: one job per user; the second names the limit and the job holding it
        _ok(c.run_cli("ranch.cli.racctmgr", "-i", "modify", "qos", "normal", "set",
                      "MaxJobsPerUser=1"))
        first = _submit(c, "-t", "10")
        c.wait_for(lambda: _reason(c, first).startswith("RUNNING|"), what="the first job")
        second = _submit(c, "-t", "10")
        c.wait_for(lambda: _reason(c, second) == "PENDING|QOSMaxJobsPerUserLimit",
                   what="the second job held by the QOS limit")
        doc = _why(c, second)
        assert doc["binding"] == (f"QOSMaxJobsPerUserLimit: 1 of 1 jobs of QOS normal for "
                                  f"user root running: {first}"), doc
        # the event log: each start recorded with the jobs it passed
        log = _ok(c.run_cli("ranch.cli.rcontrol", "events", "--job", str(long_), "--json"))
        starts = [e for e in json.loads(log)["events"] if e["kind"] == "start"]
        assert [e["job"] for e in starts] == [short], starts
        assert starts[0]["ahead"][0]["job"] == long_
