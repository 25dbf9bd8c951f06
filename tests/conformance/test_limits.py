"""AccountingStorageEnforce=associations,limits,qos in the scheduling pass, Slurm 22.05 with
slurmdbd beside Ranch's rctld: the same sacctmgr lines build both trees, then in each scenario a
first job runs and a second one over a limit pends; squeue's state and pending reason of each are
compared (association MaxJobs, GrpJobs, GrpTRES cpu, a parent account's GrpTRES counting a
sibling's job, QOS MaxJobsPerUser, GrpTRES cpu, MaxTRESPerUser cpu, and a held job released after
its MaxWall was lowered below its time limit), and a later job of another account in the same
partition starts past the held one. Needs slurmdbd and MariaDB."""

from __future__ import annotations

import pytest

from tests.conformance.dbd_side import on_slurm_with_slurmdbd
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import SlurmCluster
from tests.conformance.test_enforce import ENFORCE, _run
from tests.deadline import until

TREE = (
    ("-i", "add", "qos", "qjobs", "MaxJobsPerUser=1"),
    ("-i", "add", "qos", "qgrp", "GrpTRES=cpu=1"),
    ("-i", "add", "qos", "qpu", "MaxTRESPerUser=cpu=1"),
    ("-i", "add", "account", "amax", "aother", "agrp", "aqos"),
    ("-i", "add", "account", "acpu", "GrpTRES=cpu=1"),
    ("-i", "add", "account", "aparent", "GrpTRES=cpu=1"),
    ("-i", "add", "account", "achild", "asibling", "parent=aparent"),
    ("-i", "modify", "account", "where", "name=agrp", "set", "GrpJobs=1"),
    ("-i", "add", "user", "root", "Account=amax,aother,agrp,acpu,achild,asibling"),
    ("-i", "add", "user", "root", "Account=aqos", "QOS=normal,qjobs,qgrp,qpu"),
    ("-i", "modify", "user", "root", "where", "account=amax", "set", "MaxJobs=1"),
    ("-i", "add", "account", "awall"),
    ("-i", "add", "user", "root", "Account=awall"),
)
# (name, the first job's options, the second's, a third's or ()): the first runs, the second
# pends over a limit, the third (another account) starts all the same
SCENARIOS = (
    ("MaxJobs", ("-A", "amax"), ("-A", "amax"), ("-A", "aother")),
    ("GrpJobs", ("-A", "agrp"), ("-A", "agrp"), ()),
    ("GrpTRES cpu", ("-A", "acpu"), ("-A", "acpu"), ("-A", "aother")),
    ("parent GrpTRES", ("-A", "asibling"), ("-A", "achild"), ()),
    ("QOS MaxJobsPerUser", ("-A", "aqos", "-q", "qjobs"), ("-A", "aqos", "-q", "qjobs"), ()),
    ("QOS GrpTRES cpu", ("-A", "aqos", "-q", "qgrp"), ("-A", "aqos", "-q", "qgrp"), ()),
    ("QOS MaxTRESPerUser", ("-A", "aqos", "-q", "qpu"), ("-A", "aqos", "-q", "qpu"),
     ("-A", "aother")),
)
SETTLED = 30.0  # seconds a pending job may take to show its reason


def _submit(system, options: tuple[str, ...]) -> str:
    done = _run(system, "sbatch", ("--parsable", "-n", "1", *options, "-o", "/dev/null",
                                   "--wrap", "sleep 300"))
    assert done.returncode == 0, (options, done.stderr)
    return done.stdout.strip().split(";")[0]


def _shown(system, ids: list[str]) -> dict[str, tuple[str, str]]:
    out = _run(system, "squeue", ("-h", "-j", ",".join(ids), "-o", "%i|%t|%r")).stdout
    rows = (line.split("|") for line in out.splitlines() if line.count("|") == 2)
    return {r[0]: (r[1], r[2]) for r in rows}


def _until(what, ok, deadline: float = SETTLED):
    return until(what, ok, deadline)  # tests/deadline.py: stretched with the load


def _scenario(system, first, second, third) -> list[tuple[str, str]]:
    ids = [_submit(system, first)]
    _until(lambda: _shown(system, ids), lambda s: s.get(ids[0], ("",))[0] == "R")
    ids.append(_submit(system, second))
    if third:
        ids.append(_submit(system, third))
    seen = _until(lambda: _shown(system, ids), lambda s: len(s) == len(ids) and all(
        s[i] == ("R", "None") or (s[i][0] == "PD" and s[i][1] not in ("None", "Priority"))
        for i in ids))
    _run(system, "scancel", tuple(ids))
    _until(lambda: _run(system, "squeue", ("-h", "-o", "%i")).stdout.strip(), lambda s: not s,
           60.0)
    return [seen.get(i, ("gone", "")) for i in ids]


def outcomes(system) -> list[list[tuple[str, str]]]:
    for words in TREE:
        done = _run(system, "sacctmgr", words)
        assert done.returncode == 0, (words, done.stdout, done.stderr)
    if isinstance(system, SlurmCluster):  # slurmdbd pushes the tree after the commit
        _until(lambda: system.run("scontrol", "show", "assoc_mgr", "users=root",
                                  "accounts=amax", "flags=assoc").stdout,
               lambda out: "MaxJobs=1" in out)
    return [_scenario(system, *s[1:]) for s in SCENARIOS] + [_lowered_wall(system)]


def _lowered_wall(system) -> list[tuple[str, str]]:
    """A held job of 20 minutes, its association's MaxWall then set to 10, then released: it
    pends for the limit (sbatch would have refused it under the limit)."""
    ids = [_submit(system, ("-A", "awall", "-t", "20", "-H"))]
    done = _run(system, "sacctmgr", ("-i", "modify", "user", "root", "where", "account=awall",
                                     "set", "MaxWall=10"))
    assert done.returncode == 0, done.stderr
    if isinstance(system, SlurmCluster):
        _until(lambda: system.run("scontrol", "show", "assoc_mgr", "users=root",
                                  "accounts=awall", "flags=assoc").stdout,
               lambda out: "MaxWallPJ=10" in out)
    assert _run(system, "scontrol", ("release", ids[0])).returncode == 0
    seen = _until(lambda: _shown(system, ids), lambda s: s.get(ids[0], ("", "None"))[1] not in (
        "None", "Priority", "JobHeldUser"))
    _run(system, "scancel", tuple(ids))
    return [seen.get(ids[0], ("gone", ""))]


@pytest.fixture(scope="module")
def slurm_side() -> list[list[tuple[str, str]]]:
    return on_slurm_with_slurmdbd(ENFORCE, outcomes)


def test_limit_held_jobs_pend_with_slurms_reasons(slurm_side) -> None:
    with RanchCluster(SHAPE, extra_conf="AccountingStorageType=accounting_storage/slurmdbd\n"
                      + ENFORCE) as ranch:
        ranch_side = outcomes(ranch)
    names = [s[0] for s in SCENARIOS] + ["lowered MaxWall"]
    for name, want, got in zip(names, slurm_side, ranch_side, strict=True):
        assert got == want, name
    # what Slurm showed: each second job held by a limit, each third one running
    for (name, _, _, third), want in zip(SCENARIOS, slurm_side, strict=False):
        assert want[0] == ("R", "None") and want[1][0] == "PD", (name, want)
        assert not third or want[2] == ("R", "None"), (name, want)
