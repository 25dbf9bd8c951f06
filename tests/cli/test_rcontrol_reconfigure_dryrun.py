"""`rcontrol reconfigure --dry-run`'s words and its table (issue 44; the controller's side in
tests/ctld/test_reconfigure_dryrun.py, both ends in tests/integration)."""

from __future__ import annotations

import pytest

from ranch.cli import dryrun_view
from ranch.cli.controller import CliError, Target

REPLY = {"ok": True, "errors": [], "path": "/etc/ranch/new.conf",
         "priority_now": "priority/basic", "priority_after": "priority/multifactor",
         "rows": [{"job_id": 12, "user": "alice", "partition": "main", "priority_now": 4294901748,
                   "priority_after": 500, "position_now": 2, "position_after": 1},
                  {"job_id": 11, "user": "bob", "partition": "main", "priority_now": 4294901749,
                   "priority_after": 1, "position_now": 1, "position_after": 2}],
         "starts": [{"job_id": 12, "nodes": "n2", "by": "main"}]}


def test_the_table_lists_the_candidates_order_and_its_starts() -> None:
    lines = dryrun_view.text(REPLY).splitlines()
    assert lines[0] == ("Candidate /etc/ranch/new.conf: priority/basic -> priority/multifactor "
                        "(nothing applied)")
    assert lines[1].split() == list(dryrun_view.HEADER)
    assert lines[2].split() == ["12", "alice", "main", "4294901748", "500", "2", "1"]
    assert lines[3].split() == ["11", "bob", "main", "4294901749", "1", "1", "2"]
    assert lines[4] == "Would start at once: 12 on n2 (main)"
    empty = dryrun_view.text({**REPLY, "rows": [], "starts": []}).splitlines()
    assert empty[-2:] == ["(no pending job)", "Would start at once: none"]


def test_reconfigure_takes_only_dry_run_and_a_file() -> None:
    target = Target("127.0.0.1", 1, "/nonexistent", "test")
    for words in (["now"], ["--dry-run", "a.conf", "b.conf"]):
        with pytest.raises(CliError, match="--dry-run"):
            dryrun_view.command(target, words, as_json=False)
