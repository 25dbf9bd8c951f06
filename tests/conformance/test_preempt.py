"""PreemptType=preempt/qos, Slurm 22.05 with slurmdbd beside Ranch's rctld: the same sacctmgr lines
build both trees (QOS high may preempt low, lowc and lowg), then in each scenario a victim fills
the cluster and a job of QOS high comes: the cluster's PreemptMode=REQUEUE requeues the victim
(PENDING, then it runs again once the preemptor is done), a QOS's own PreemptMode=cancel ends it
PREEMPTED, and with GraceTime the victim's steps get SIGTERM first and it is killed once its grace
is over; a QOS's PreemptExemptTime keeps its victim running that long first; under
sched/builtin a preemptor behind an older job of its victim's QOS waiting on Resources waits
(Priority) and preempts nothing; under sched/backfill a preemptor behind a blocked job of a QOS
it may not preempt (which the main pass stops at) gets a victim preempted by the backfill cycle.
Compared: squeue's state and reason and sacct's state and exit code of victim and preemptor, the
victim's restart count, and what the victim wrote of its runs and signals. Needs slurmdbd."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conformance.dbd_side import on_slurm_with_slurmdbd
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import CRED_EXPIRE, SlurmCluster
from tests.conformance.test_backfill import BACKFILL
from tests.conformance.test_enforce import ENFORCE, _run
from tests.deadline import until

PREEMPT = "PreemptType=preempt/qos\nPreemptMode=REQUEUE\n"
EXEMPT = 6  # seconds of QOS lowe's PreemptExemptTime
TREE = (
    ("-i", "add", "qos", "low"),
    ("-i", "add", "qos", "lowc", "PreemptMode=cancel"),
    ("-i", "add", "qos", "lowg", "PreemptMode=cancel", "GraceTime=3"),
    ("-i", "add", "qos", "lowe", "PreemptMode=cancel", f"PreemptExemptTime=0:{EXEMPT:02d}"),
    ("-i", "add", "qos", "high", "Priority=100", "Preempt=low,lowc,lowg,lowe"),
    ("-i", "add", "account", "proj"),
    ("-i", "add", "user", "root", "Account=proj", "QOS=normal,low,lowc,lowg,lowe,high"),
)
FULL = ("-A", "proj", "-N", str(len(SHAPE.nodes)), "--exclusive")  # the whole cluster
# Each run appends its restart count; a SIGTERM is written down and ends the run (REQUEUE,
# CANCEL). A requeued victim's second run ends at once. The grace test's victim runs a step,
# which writes down the SIGTERM its QOS's GraceTime sends (job_signal signals the steps, not
# the batch shell) and goes on until the kill.
VICTIM = """#!/bin/sh
echo "run ${{SLURM_RESTART_COUNT:-0}}" >> {runs}
trap 'echo TERM >> {runs}; exit 0' TERM
[ "${{SLURM_RESTART_COUNT:-0}}" = 0 ] || exit 0
echo ready >> {runs}
while :; do sleep 0.2; done
"""
STEPPED = """#!/bin/sh
echo "run ${{SLURM_RESTART_COUNT:-0}}" >> {runs}
srun -n1 sh -c "echo ready >> {runs}; trap 'echo STEPTERM >> {runs}' TERM; \\
while :; do sleep 0.2; done"
"""
# (name, the victim's QOS, its script, the lines of what it wrote that are compared: at the
# final kill the batch shell and the step both get SIGTERM, in no set order), and whether a job
# of the victim's QOS waits on Resources ahead of the preemptor (an older job: under
# sched/builtin with priority/basic, slurmctld walks its job list in order, so the preemptor
# waits for Priority and preempts nothing; sched/backfill's sorted queue would try it first)
SCENARIOS = (
    ("REQUEUE (the cluster's mode)", "low", VICTIM, 9, False),
    ("CANCEL (the QOS's own mode)", "lowc", VICTIM, 9, False),
    ("CANCEL after GraceTime", "lowg", STEPPED, 3, False),
    ("CANCEL after the QOS's PreemptExemptTime", "lowe", VICTIM, 9, False),
    ("a preemptor behind a backlog of its victim's QOS", "lowc", VICTIM, 9, True),
)
SETTLED = 40.0


def _until(what, ok, deadline: float = SETTLED):
    return until(what, ok, deadline)  # tests/deadline.py: stretched with the load


def _submit(system, options: tuple[str, ...], *argv: str) -> str:
    done = _run(system, "sbatch", ("--parsable", *options, *argv))
    assert done.returncode == 0, (options, done.stderr)
    return done.stdout.strip().split(";")[0]


def _squeue(system, jid: str) -> tuple[str, str]:
    out = _run(system, "squeue", ("-h", "-t", "all", "-j", jid, "-o", "%T|%r")).stdout.strip()
    state, _, reason = out.partition("|")
    return state, reason


def _sacct(system, jid: str) -> tuple[str, str]:
    out = _run(system, "sacct", ("-n", "-X", "-P", "-j", jid, "-o", "State,ExitCode")).stdout
    state, _, code = out.strip().splitlines()[-1].partition("|") if out.strip() else ("", "", "")
    return state.split()[0] if state else "", code


def _restarts(system, jid: str) -> str:
    out = _run(system, "scontrol", ("show", "job", jid)).stdout
    return next((w.split("=", 1)[1] for w in out.split() if w.startswith("Restarts=")), "?")


def _behind(system, victim: str, qos: str) -> dict[str, object]:
    """The preemptor behind an older pending job of its victim's QOS: what each shows once
    slurmctld's pass looked at both, then all three cancelled."""
    waiting = _submit(system, (*FULL, "-q", qos, "-o", "/dev/null"), "--wrap", "true")
    _until(lambda: _squeue(system, waiting), lambda s: s[1] not in ("None", ""))
    high = _submit(system, (*FULL, "-q", "high", "-o", "/dev/null"), "--wrap", "true")
    _until(lambda: _squeue(system, high), lambda s: s[1] not in ("None", ""))
    seen = {"victim": _squeue(system, victim), "waiting": _squeue(system, waiting),
            "preemptor": _squeue(system, high)}
    _run(system, "scancel", (victim, waiting, high))
    _until(lambda: [_squeue(system, j)[0] for j in (victim, waiting, high)],
           lambda s: all(x in ("CANCELLED", "COMPLETED", "PREEMPTED") for x in s))
    return seen


def _scenario(system, name: str, qos: str, text: str, lines: int,
              behind: bool) -> dict[str, object]:
    work = Path(system.workdir)
    runs = work / f"runs-{qos}{'-behind' if behind else ''}"
    script = work / f"victim-{qos}.sh"
    script.write_text(text.format(runs=runs))
    victim = _submit(system, (*FULL, "-q", qos, "-o", "/dev/null"), str(script))
    _until(lambda: runs.exists() and "ready" in runs.read_text(), bool)
    assert _squeue(system, victim)[0] == "RUNNING", name
    if behind:  # an older job of the victim's QOS, waiting on Resources
        return _behind(system, victim, qos)
    began = time.monotonic()  # the victim started a moment before
    high = _submit(system, (*FULL, "-q", "high", "-o", "/dev/null"), "--wrap", "sleep 1")
    # the victim leaves RUNNING; the preemptor waits for its nodes, then runs and ends
    left = _until(lambda: _squeue(system, victim), lambda s: s[0] not in ("RUNNING",
                                                                          "COMPLETING"))
    ran = time.monotonic() - began
    done = ("COMPLETED", "PREEMPTED", "CANCELLED", "FAILED")
    _until(lambda: _squeue(system, high)[0], lambda s: s in done)
    _until(lambda: _squeue(system, victim)[0], lambda s: s in done)
    # sacct's record of the end comes through slurmdbd a moment later
    _until(lambda: _sacct(system, victim)[0], lambda s: s in done, 15.0)
    _until(lambda: _sacct(system, high)[0], lambda s: s in done, 15.0)
    return {"victim left running as": left[0],
            "victim": (_squeue(system, victim), _sacct(system, victim)),
            "restarts": _restarts(system, victim),
            "preemptor": (_squeue(system, high), _sacct(system, high)),
            "victim wrote": runs.read_text().splitlines()[:lines],
            # preempted only once its exempt time was over (not long before the next pass)
            "victim ran out its exempt time": ran >= EXEMPT - 2 if qos == "lowe" else None}


def _backfilled(system) -> dict[str, object]:
    """A lowc job on each node for an hour, a normal 2-node job waiting on Resources, then a
    10-minute high 1-node job: the main pass stops at the normal job; backfill finds the high
    one starts now with a preemptable job gone (no reservation ahead holds a node that soon)."""
    work = Path(system.workdir)
    one = ("-A", "proj", "-N", "1", "--exclusive", "-o", "/dev/null")
    victims, runs = [], []
    for i in (1, 2):
        runs.append(work / f"runs-bf{i}")
        script = work / f"victim-bf{i}.sh"
        script.write_text(VICTIM.format(runs=runs[-1]))
        victims.append(_submit(system, (*one, "-q", "lowc", "-t", "60"), str(script)))
    _until(lambda: [r.exists() and "ready" in r.read_text() for r in runs], all)
    waiting = _submit(system, (*FULL, "-q", "normal", "-t", "30", "-o", "/dev/null"),
                      "--wrap", "true")
    _until(lambda: _squeue(system, waiting), lambda s: s[1] == "Resources")
    high = _submit(system, (*one, "-q", "high", "-t", "10"), "--wrap", "sleep 1")
    done = ("COMPLETED", "PREEMPTED", "CANCELLED", "FAILED")
    _until(lambda: _squeue(system, high)[0], lambda s: s in done)
    _until(lambda: _sacct(system, high)[0], lambda s: s in done, 15.0)
    _until(lambda: sorted(_sacct(system, v)[0] for v in victims),
           lambda s: s == ["PREEMPTED", "RUNNING"] or "COMPLETED" in s)
    seen = {"victims": sorted((_squeue(system, v), _sacct(system, v)) for v in victims),
            "victims wrote": sorted(r.read_text().splitlines() for r in runs),
            "waiting": _squeue(system, waiting),
            "preemptor": (_squeue(system, high), _sacct(system, high))}
    _run(system, "scancel", (*victims, waiting))
    _until(lambda: [_squeue(system, j)[0] for j in (*victims, waiting)],
           lambda s: all(x in done for x in s))
    return seen


def _tree(system) -> None:
    for words in TREE:
        done = _run(system, "sacctmgr", words)
        assert done.returncode == 0, (words, done.stdout, done.stderr)
    if isinstance(system, SlurmCluster):  # slurmdbd pushes the tree after the commit
        _until(lambda: system.run("scontrol", "show", "assoc_mgr", "flags=qos").stdout,
               lambda out: "Preempt=low,lowc,lowg" in out or "lowg" in out.split(
                   "QOS=high")[-1])


def outcomes(system) -> list[dict[str, object]]:
    _tree(system)
    return [_scenario(system, *s) for s in SCENARIOS]


def backfill_outcome(system) -> dict[str, object]:
    _tree(system)
    return _backfilled(system)


@pytest.fixture(scope="module")
def slurm_side() -> list[dict[str, object]]:
    return on_slurm_with_slurmdbd(ENFORCE + PREEMPT, outcomes)


def test_preemption_modes_as_slurm(slurm_side) -> None:
    # the private Slurm's cred_expire (slurm_cluster.py): a requeued job's hold-off
    with RanchCluster(SHAPE, extra_conf="AccountingStorageType=accounting_storage/slurmdbd\n"
                      f"AuthInfo=cred_expire={CRED_EXPIRE}\n" + ENFORCE + PREEMPT) as ranch:
        ranch_side = outcomes(ranch)
    for (name, *_), want, got in zip(SCENARIOS, slurm_side, ranch_side, strict=True):
        assert got == want, name
    # what Slurm showed: requeued then run again; PREEMPTED; SIGTERM, then PREEMPTED
    requeue, cancel, grace, exempt, backlog = slurm_side
    assert requeue["restarts"] == "1"
    assert requeue["victim wrote"] == ["run 0", "ready", "TERM", "run 1"]
    assert cancel["victim"][0][0] == "PREEMPTED"
    assert grace["victim"][0][0] == "PREEMPTED"
    assert grace["victim wrote"] == ["run 0", "ready", "STEPTERM"]
    assert exempt["victim"][0][0] == "PREEMPTED" and exempt["victim ran out its exempt time"]
    assert backlog == {"victim": ("RUNNING", "None"), "waiting": ("PENDING", "Resources"),
                       "preemptor": ("PENDING", "Priority")}


def test_backfill_preempts_for_a_job_behind_a_blocked_one_as_slurm() -> None:
    slurm = on_slurm_with_slurmdbd(ENFORCE + PREEMPT, backfill_outcome, scheduler=BACKFILL)
    with RanchCluster(SHAPE, extra_conf="AccountingStorageType=accounting_storage/slurmdbd\n"
                      f"AuthInfo=cred_expire={CRED_EXPIRE}\n" + ENFORCE + PREEMPT,
                      scheduler=BACKFILL) as ranch:
        got = backfill_outcome(ranch)
    assert got == slurm
    # what Slurm showed: one victim PREEMPTED (SIGTERM), the other on; the preemptor ran
    assert [v[0][0] for v in slurm["victims"]] == ["PREEMPTED", "RUNNING"]
    assert slurm["victims wrote"] == [["run 0", "ready"], ["run 0", "ready", "TERM"]]
    assert slurm["waiting"] == ("PENDING", "Resources")
    assert slurm["preemptor"][1][0] == "COMPLETED"
