"""`rcontrol reconfigure --dry-run` against a real rctld and real rnoded (issue 44): under
priority/basic and sched/builtin a 1-node job waits behind a 2-node one though a node is idle;
a candidate with priority/multifactor and PriorityFavorSmall shows it moving first and starting
at once on the idle node, the human table and --json alike; a candidate that does not load is
answered with file:line:col; and the live queue and config are unchanged afterwards."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ranch.protocol import messages as m

from .cluster import Cluster

SMALL = "PriorityType=priority/multifactor\nPriorityWeightJobSize=1000\nPriorityFavorSmall=YES\n"


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, (done.args, done.stdout, done.stderr)
    return done.stdout


def _submit(c: Cluster, *argv: str) -> int:
    out = _ok(c.run_cli("ranch.cli.rbatch", "-o", "/dev/null", *argv, "--wrap", "sleep 300"))
    return int(out.split()[-1])


def _queue(c: Cluster) -> list[str]:
    return _ok(c.run_cli("ranch.cli.rqueue", "-h", "-o", "%i|%T|%Q|%r")).split()


def test_dry_run_shows_the_reorder_and_changes_nothing(tmp_path: Path) -> None:
    with Cluster(tmp_path / "c", ("n1", "n2"), extra="SchedulerType=sched/builtin") as c:
        c.start()
        first = _submit(c, "-N", "1")
        c.wait_for(lambda: f"{first}|RUNNING|" in " ".join(_queue(c)), what="the first job")
        big = _submit(c, "-N", "2")
        small = _submit(c, "-N", "1")
        c.wait_for(lambda: f"{small}|PENDING|" in " ".join(_queue(c))
                   and any(r.startswith(f"{big}|PENDING|") and r.endswith("|Resources")
                           for r in _queue(c)), what="both jobs pending")
        before, config = _queue(c), c.request(m.GetConfig())
        candidate = tmp_path / "candidate.conf"
        candidate.write_text(c.conf_path.read_text() + SMALL)

        doc = json.loads(_ok(c.run_cli("ranch.cli.rcontrol", "reconfigure", "--dry-run",
                                       str(candidate), "--json")))
        assert doc["ok"] and doc["priority_now"] == "priority/basic"
        assert doc["priority_after"] == "priority/multifactor"
        assert [r["job_id"] for r in doc["rows"]] == [small, big]
        rows = {r["job_id"]: r for r in doc["rows"]}
        assert (rows[small]["position_now"], rows[small]["position_after"]) == (2, 1)
        # favour small, 2 nodes of 1 CPU: the 1-node job 0.5 x 1000, the 2-node one 0 (then 1)
        assert (rows[small]["priority_after"], rows[big]["priority_after"]) == (500, 1)
        assert doc["starts"] == [{"job_id": small, "nodes": "n2", "by": "main"}]

        text = _ok(c.run_cli("ranch.cli.rcontrol", "reconfigure", "--dry-run", str(candidate)))
        assert "priority/basic -> priority/multifactor" in text
        assert "POS_NOW" in text and f"Would start at once: {small} on n2 (main)" in text

        # the cluster's own file: the same order, nothing would start
        own = json.loads(_ok(c.run_cli("ranch.cli.rcontrol", "reconfigure", "--dry-run",
                                       "--json")))
        assert [(r["job_id"], r["position_after"]) for r in own["rows"]] == [(big, 1),
                                                                             (small, 2)]
        assert own["starts"] == []

        bad = tmp_path / "bad.conf"
        bad.write_text(c.conf_path.read_text() + "PriorityWeightAge=lots\n")
        done = c.run_cli("ranch.cli.rcontrol", "reconfigure", "--dry-run", str(bad))
        line = len(bad.read_text().splitlines())
        assert done.returncode == 1 and f"{bad}:{line}:" in done.stderr, done.stderr

        # nothing was applied: the same queue, priorities and reasons; the config in force
        assert _queue(c) == before
        assert c.request(m.GetConfig()) == config
