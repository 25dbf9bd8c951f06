"""preempt/qos with real rctld and rnoded: a job of QOS high preempts a running job of QOS low on
the one node. Under REQUEUE the victim is requeued and, once the preemptor is done, runs exactly
once more (each run appends its SLURM_RESTART_COUNT to a file); under CANCEL with its QOS's
GraceTime it runs on for the grace, then ends PREEMPTED. The event log records each one."""

from __future__ import annotations

import time
from pathlib import Path

from ranch.protocol import messages as m

from .cluster import Cluster
from .test_jobs_e2e import cli, job, job_state, submit

ON = ("AccountingStorageType=accounting_storage/slurmdbd\nPreemptType=preempt/qos\n"
      "PreemptMode={mode}\nKillWait=1\nAuthInfo=cred_expire=2\n")
VICTIM = """#!/bin/sh
echo "${{SLURM_RESTART_COUNT:-0}}" >> {runs}
trap 'echo TERM >> {runs}; exit 0' TERM
[ "${{SLURM_RESTART_COUNT:-0}}" = 0 ] && {{ sleep 300 & wait; }}
exit 0
"""


def _tree(c: Cluster, low: str = "") -> None:
    for words in (("-i", "add", "qos", "low", *((low,) if low else ())),
                  ("-i", "add", "qos", "high", "Priority=100", "Preempt=low")):
        cli(c, "racctmgr", *words)


def _victim(c: Cluster, tmp_path: Path, *options: str) -> tuple[int, Path]:
    runs = tmp_path / "victim.runs"
    script = tmp_path / "victim.sh"
    script.write_text(VICTIM.format(runs=runs))
    jid = submit(c, "-q", "low", "-o", str(tmp_path / "victim.out"), *options, str(script))
    c.wait_for(lambda: runs.exists() and runs.read_text() == "0\n", 20, what="victim runs")
    return jid, runs


def _preempt_events(c: Cluster) -> list[dict]:
    got = c.request(m.GetEvents())
    return [e for e in got.events if e.get("kind") == "preempt"]


def test_a_requeued_victim_runs_exactly_once_more(tmp_path: Path) -> None:
    with Cluster(tmp_path / "c", ("n1",), extra=ON.format(mode="REQUEUE")) as c:
        c.start()
        _tree(c)
        victim, runs = _victim(c, tmp_path)
        high = submit(c, "-q", "high", "-o", "/dev/null", "--wrap", "sleep 1")
        c.wait_for(lambda: job_state(c, high) == "COMPLETED", 30, what="preemptor done")
        c.wait_for(lambda: job_state(c, victim) == "COMPLETED", 30, what="victim's second run")
        assert runs.read_text() == "0\nTERM\n1\n"  # killed (SIGTERM first), then one run more
        assert job(c, victim)["restart_cnt"] == 1
        # requeued, it waited out its credential's lifetime (cred_expire + 1 s) first
        [event] = _preempt_events(c)
        assert event["job"] == high and event["victims"] == f"{victim}:requeue"
        assert event["stopped"] == str(victim) and event["qos"] == "high"
        shown = cli(c, "rcontrol", "events").stdout
        assert f"Event=preempt JobId={high} QOS=high Victims={victim}:requeue" in shown


def test_cancel_ends_the_victim_preempted_after_its_grace_time(tmp_path: Path) -> None:
    with Cluster(tmp_path / "c", ("n1",), extra=ON.format(mode="CANCEL")) as c:
        c.start()
        _tree(c, "GraceTime=2")
        runs = tmp_path / "victim.runs"
        script = tmp_path / "victim.sh"
        # ignores SIGTERM (writes it down): killed (SIGTERM, SIGKILL) once its 2 s of grace
        # are over; the grace's own SIGTERM goes to its steps (it has none)
        script.write_text(f"#!/bin/sh\necho 0 >> {runs}\ntrap 'echo TERM >> {runs}' TERM\n"
                          "while :; do sleep 0.2; done\n")
        victim = submit(c, "-q", "low", "-o", "/dev/null", str(script))
        c.wait_for(lambda: runs.exists(), 20, what="victim runs")
        high = submit(c, "-q", "high", "-o", "/dev/null", "--wrap", "true")
        began = time.monotonic()
        c.wait_for(lambda: job_state(c, victim) == "PREEMPTED", 30, what="victim PREEMPTED")
        assert time.monotonic() - began >= 2.0  # it had its grace
        c.wait_for(lambda: job_state(c, high) == "COMPLETED", 30, what="preemptor done")
        assert runs.read_text().startswith("0\nTERM\n")
        kinds = [(e["job"], e.get("grace")) for e in _preempt_events(c)]
        assert (high, None) in kinds and (victim, "over") in kinds


def test_preempt_exempt_time_defers_the_preemption(tmp_path: Path) -> None:
    extra = ON.format(mode="CANCEL") + "PreemptExemptTime=0:04\n"  # M:S, as time_str2secs
    with Cluster(tmp_path / "c", ("n1",), extra=extra) as c:
        c.start()
        _tree(c)
        victim, _ = _victim(c, tmp_path)
        began = time.monotonic()
        high = submit(c, "-q", "high", "-o", "/dev/null", "--wrap", "true")
        assert job_state(c, high) == "PENDING" and job_state(c, victim) == "RUNNING"
        # nothing else happens on the cluster: the pass comes when the exempt time is over
        c.wait_for(lambda: job_state(c, victim) == "PREEMPTED", 30, what="victim PREEMPTED")
        assert time.monotonic() - began >= 3.0
        c.wait_for(lambda: job_state(c, high) == "COMPLETED", 30, what="preemptor done")


def test_a_preemptor_behind_a_backlog_of_its_victims_qos_comes_first(tmp_path: Path) -> None:
    """A low job waits on Resources ahead of the high one (an older id): Slurm's queue sort
    puts the preemptor before jobs it may preempt, so the backlog does not hide it."""
    with Cluster(tmp_path / "c", ("n1",), extra=ON.format(mode="CANCEL")) as c:
        c.start()
        _tree(c)
        victim, _ = _victim(c, tmp_path)
        waiting = submit(c, "-q", "low", "-o", "/dev/null", "--wrap", "true")
        assert job(c, waiting)["state_reason"] == "Resources"
        high = submit(c, "-q", "high", "-o", "/dev/null", "--wrap", "sleep 1")
        c.wait_for(lambda: job_state(c, victim) == "PREEMPTED", 30, what="victim PREEMPTED")
        c.wait_for(lambda: job_state(c, waiting) == "COMPLETED", 30, what="the backlog runs")
        assert job(c, high)["job_state"] == ["COMPLETED"]
        assert job(c, high)["start_time"]["number"] <= job(c, waiting)["start_time"]["number"]
