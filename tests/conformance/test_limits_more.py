"""AccountingStorageEnforce=associations,limits,qos,safe, Slurm 22.05 with slurmdbd beside Ranch's
rctld, on nodes with two GPUs each: the same sacctmgr lines build both trees, then each
submission's outcome (sbatch's refusal, or squeue's state, pending reason and time limit once
settled) is compared, scenario by scenario: GPU limits (an account's GrpTRES=gres/gpu, a QOS's
MaxTRESPerUser=gres/gpu), a partition's QOS (QOS= on its line) before the job's, OverPartQOS,
DenyOnLimit refusing at submit what would otherwise pend (MaxWall, MaxTRESPerJob), the limits
that need time (GrpTRESRunMins, MaxTRESMins, GrpTRESMins and GrpWall under `safe`), a QOS's
MinTRESPerJob, the submit caps (a QOS's MaxSubmitJobsPerUser, an account's GrpSubmitJobs, a user's
MaxSubmitJobs on an association of one partition), a QOS's RequiresReservation, a
partition's AllowAccounts and DenyQos, and the time limit the limits give a job that asked
none. One cluster of each serves every scenario; the jobs of one phase are cancelled before the
next. Needs slurmdbd and MariaDB."""

from __future__ import annotations

import os
import subprocess

import attrs
import pytest

from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE, Shape
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_missing
from tests.conformance.slurmdbd import accounting_missing
from tests.conformance.test_enforce import _run
from tests.deadline import until

GPUS = 2  # per node (Slurm's stand-ins: two character devices)


@attrs.frozen
class GpuShape(Shape):
    """The suite's cluster with GPUs on every node (Slurm: gres.conf counts, no devices;
    Ranch: rnoded --fake-gpus)."""

    def nodes_conf(self, extra: dict[str, str] | None = None) -> str:
        words = {n: f"{(extra or {}).get(n, '')} Gres=gpu:{GPUS}".strip() for n in self.nodes}
        return Shape.nodes_conf(self, words)


GPU_SHAPE = GpuShape(cpus=SHAPE.cpus)
PQOS = f"PartitionName=pqos Nodes={','.join(SHAPE.nodes)} QOS=pq MaxTime=INFINITE State=UP"
CONF = ("AccountingStorageEnforce=associations,limits,qos,safe\n"
        "AccountingStorageTRES=gres/gpu\n"
        "GresTypes=gpu\n"
        f"PartitionName=closed Nodes={','.join(SHAPE.nodes)} AllowAccounts=aopen "
        "DenyQos=qgpu MaxTime=INFINITE State=UP\n")
TREE = (
    ("-i", "add", "qos", "pq", "GrpTRES=cpu=1"),
    ("-i", "add", "qos", "qover", "GrpTRES=cpu=2", "Flags=OverPartQOS"),
    ("-i", "add", "qos", "qplain", "GrpTRES=cpu=2"),
    ("-i", "add", "qos", "qgpu", "MaxTRESPerUser=gres/gpu=1"),
    ("-i", "add", "qos", "qdeny", "Flags=DenyOnLimit", "MaxWall=10", "MaxTRESPerJob=cpu=1"),
    ("-i", "add", "qos", "qwall", "MaxWall=10", "MaxTRESPerJob=cpu=1"),
    ("-i", "add", "qos", "qmin", "MinTRESPerJob=cpu=2"),
    ("-i", "add", "qos", "qsub", "MaxSubmitJobsPerUser=1"),
    ("-i", "add", "qos", "qresv", "Flags=RequiresReservation"),
    ("-i", "add", "account", "aplain", "aopen"),
    ("-i", "add", "account", "agpu", "GrpTRES=gres/gpu=1"),
    ("-i", "add", "account", "arun", "GrpTRESRunMins=cpu=30"),
    ("-i", "add", "account", "amins", "MaxTRESMins=cpu=10"),
    ("-i", "add", "account", "agrpmin", "GrpTRESMins=cpu=10"),
    ("-i", "add", "account", "agrpwall", "GrpWall=10"),
    ("-i", "add", "account", "asub", "GrpSubmitJobs=1"),
    ("-i", "add", "account", "apart"),
    # root's two associations under apart: its own for partition pqos (MaxSubmitJobs=1), and
    # the one for every other partition
    ("-i", "add", "user", "root", "Account=apart"),
    ("-i", "add", "user", "root", "Account=apart", "Partition=pqos", "MaxSubmitJobs=1"),
    ("-i", "add", "user", "root", "Account=aplain,aopen,agpu,arun,amins,agrpmin,asub,agrpwall",
     "QOS=normal,pq,qover,qplain,qgpu,qdeny,qwall,qmin,qsub,qresv"),
)
# Each phase: (name, options) of jobs to start first (each must run), then of jobs whose
# outcome is compared; a phase's jobs are cancelled before the next phase
PHASES = (
    ((), (
        ("GPU QOS MaxTRESPerUser", ("-A", "aplain", "-q", "qgpu", "--gres=gpu:2")),
        ("DenyOnLimit MaxWall", ("-A", "aplain", "-q", "qdeny", "-t", "20")),
        ("DenyOnLimit MaxTRESPerJob", ("-A", "aplain", "-q", "qdeny", "-n", "2")),
        ("MaxWall pends", ("-A", "aplain", "-q", "qwall", "-t", "20")),
        ("MaxTRESPerJob pends", ("-A", "aplain", "-q", "qwall", "-n", "2")),
        ("MaxTRESMins", ("-A", "amins", "-t", "20")),
        ("GrpTRESMins safe", ("-A", "agrpmin", "-t", "20")),
        ("GrpWall safe", ("-A", "agrpwall", "-t", "20")),
        ("QOS MinTRESPerJob", ("-A", "aplain", "-q", "qmin", "-n", "1")),
        ("AllowAccounts", ("-A", "aplain", "-p", "closed")),
        ("AllowAccounts allowed", ("-A", "aopen", "-p", "closed")),
        ("DenyQos", ("-A", "aopen", "-p", "closed", "-q", "qgpu")),
        ("GrpTRESRunMins holds a job asking no time", ("-A", "arun")),
        ("MaxWall gives a time limit", ("-A", "aplain", "-q", "qwall")),
        ("QOS MaxSubmitJobsPerUser first", ("-A", "aplain", "-q", "qsub", "-H")),
        ("QOS MaxSubmitJobsPerUser", ("-A", "aplain", "-q", "qsub", "-H")),
        ("GrpSubmitJobs first", ("-A", "asub", "-H")),
        ("GrpSubmitJobs", ("-A", "asub", "-H")),
        # MaxSubmitJobs counts the jobs of the job's own association: one with a partition
        ("MaxSubmitJobs other partition first", ("-A", "apart", "-H")),
        ("MaxSubmitJobs partition association first", ("-A", "apart", "-p", "pqos", "-H")),
        ("MaxSubmitJobs partition association", ("-A", "apart", "-p", "pqos", "-H")),
        ("MaxSubmitJobs other partition", ("-A", "apart", "-H")),
        ("RequiresReservation without one", ("-A", "aplain", "-q", "qresv")),
    )),
    ((("GPU first", ("-A", "agpu", "--gres=gpu:1")),
      ("partition QOS first", ("-A", "aplain", "-p", "pqos")),
      ("GrpTRESRunMins first", ("-A", "arun", "-t", "20"))), (
        ("GPU account GrpTRES", ("-A", "agpu", "--gres=gpu:1")),
        ("partition QOS GrpTRES", ("-A", "aplain", "-p", "pqos")),
        ("GrpTRESRunMins", ("-A", "arun", "-t", "20")),
    )),
    ((("OverPartQOS first", ("-A", "aplain", "-p", "pqos", "-q", "qover")),), (
        ("OverPartQOS hides the partition QOS", ("-A", "aplain", "-p", "pqos", "-q", "qover")),
        ("partition QOS over the job QOS", ("-A", "aplain", "-p", "pqos", "-q", "qplain")),
    )),
)
# after the phases, in a reservation of one node: (name, options) compared
RESV = "ReservationName=rq StartTime=now Duration=30 Users=root Nodes=" + SHAPE.nodes[0]
RESERVED = (("RequiresReservation with one", ("-A", "aplain", "-q", "qresv",
                                              "--reservation=rq")),)
NAMES = [name for _, compared in PHASES for name, _ in compared] + [n for n, _ in RESERVED]
SETTLED = 30.0  # seconds a pending job may take to show its reason


def _until(what, ok, deadline: float = SETTLED):
    return until(what, ok, deadline)  # tests/deadline.py: stretched with the load


def _sbatch(system, options: tuple[str, ...]) -> subprocess.CompletedProcess:
    return _run(system, "sbatch", ("--parsable", "-n", "1", *options, "-o", "/dev/null",
                                   "--wrap", "sleep 300") if "-n" not in options else
                ("--parsable", *options, "-o", "/dev/null", "--wrap", "sleep 300"))


def _shown(system, ids: list[str]) -> dict[str, tuple[str, ...]]:
    """Each job's state, pending reason and time limit (what the limits gave one asking none)."""
    out = _run(system, "squeue", ("-h", "-j", ",".join(ids), "-o", "%i|%t|%r|%l")).stdout
    rows = (line.split("|") for line in out.splitlines() if line.count("|") == 3)
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def _settled(state: tuple[str, ...]) -> bool:
    return state[:2] == ("R", "None") or (state[0] == "PD"
                                          and state[1] not in ("None", "Priority"))


def _phase(system, first, compared) -> list[tuple[str, ...]]:
    ids = []
    for name, options in first:
        done = _sbatch(system, options)
        assert done.returncode == 0, (name, done.stderr)
        ids.append(done.stdout.strip().split(";")[0])
    shown = _until(lambda: _shown(system, ids), lambda s: all(
        s.get(i, ("",))[0] == "R" for i in ids))
    assert all(shown.get(i, ("",))[0] == "R" for i in ids), (system.name, first, shown)
    results: list[tuple[str, ...] | str] = []
    for _, options in compared:
        done = _sbatch(system, options)
        if done.returncode:
            results.append(("refused", str(done.returncode), done.stderr))
        else:
            results.append(done.stdout.strip().split(";")[0])
    asked = [r for r in results if isinstance(r, str)]
    seen = _until(lambda: _shown(system, asked), lambda s: len(s) == len(asked) and all(
        _settled(s[i]) for i in asked))
    everyone = ids + asked
    if everyone:
        _run(system, "scancel", tuple(everyone))
    _until(lambda: _run(system, "squeue", ("-h", "-o", "%i")).stdout.strip(), lambda s: not s,
           60.0)
    return [r if isinstance(r, tuple) else seen.get(r, ("gone", "")) for r in results]


def outcomes(system) -> list[tuple[str, ...]]:
    for words in TREE:
        done = _run(system, "sacctmgr", words)
        assert done.returncode == 0, (words, done.stdout, done.stderr)
    if isinstance(system, SlurmCluster):
        # slurmdbd pushes the tree after the commit; slurmctld will not start with a
        # partition whose QOS= it does not know (fatal), so that one is made once it does
        _until(lambda: system.run("scontrol", "show", "assoc_mgr", "users=root",
                                  "accounts=agrpwall", "flags=assoc").stdout,
               lambda out: "GrpWall=10" in out)
        made = system.run("scontrol", "create", *PQOS.split())
        assert made.returncode == 0, made.stderr
    out: list[tuple[str, ...]] = []
    for first, compared in PHASES:
        out += _phase(system, first, compared)
    made = _run(system, "scontrol", ("create", "reservation", *RESV.split()))
    assert made.returncode == 0, (system.name, made.stdout, made.stderr)
    out += _phase(system, (), RESERVED)
    return out


def _slurm_side() -> list[tuple[str, ...]]:
    reason = slurm_missing() or accounting_missing()
    if reason:
        if os.environ.get("RANCH_REQUIRE_SLURMDBD") == "1":
            pytest.fail(f"RANCH_REQUIRE_SLURMDBD=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    slurm = SlurmCluster(GPU_SHAPE, accounting=True, extra_conf=CONF)
    # stand-in GPUs: slurmd drops a file-less GPU, and wants character devices; gres.conf is
    # read beside the file SLURM_CONF names (get_extra_conf_path), not beside its -f
    (slurm.dir / "gres.conf").write_text(
        f"NodeName={','.join(SHAPE.nodes)} Name=gpu File=/dev/null,/dev/zero\n")
    slurm.node_env = {n: {"SLURM_CONF": str(slurm.conf)} for n in SHAPE.nodes}
    try:
        try:
            slurm.start()
        except SlurmUnavailable as exc:
            pytest.fail(f"a private Slurm with slurmdbd could not start: {exc}", pytrace=False)
        return outcomes(slurm)
    finally:
        slurm.stop()


@pytest.fixture(scope="module")
def both_sides() -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    slurm = _slurm_side()
    with RanchCluster(GPU_SHAPE, extra_conf="AccountingStorageType=accounting_storage/slurmdbd\n"
                      + CONF + PQOS + "\n", node_args=("--fake-gpus", str(GPUS))) as ranch:
        return slurm, outcomes(ranch)


@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
def test_limit_scenario_as_slurm(both_sides, index: int) -> None:
    slurm, ranch = both_sides
    assert ranch[index] == slurm[index], NAMES[index]


def test_slurm_held_refused_and_ran_as_the_scenarios_say(both_sides) -> None:
    """What Slurm did, so a scenario that compares equal also tests what it names."""
    got = dict(zip(NAMES, both_sides[0], strict=True))
    assert got["DenyOnLimit MaxWall"][0] == "refused"
    assert got["MaxWall pends"][:2] == ("PD", "QOSMaxWallDurationPerJobLimit")
    assert got["OverPartQOS hides the partition QOS"][:2] == ("R", "None")
    assert got["AllowAccounts allowed"][:2] == ("R", "None")
    assert got["MaxWall gives a time limit"] == ("R", "None", "10:00")
    assert got["QOS MaxSubmitJobsPerUser"][0] == got["GrpSubmitJobs"][0] == "refused"
    assert "AssocMaxSubmitJobLimit" in got["MaxSubmitJobs partition association"][2]
    assert got["MaxSubmitJobs partition association first"][0] == "PD"
    assert got["MaxSubmitJobs other partition"][0] == "PD"
    assert got["RequiresReservation without one"] == \
        ("refused", "1", "sbatch: error: Batch job submission failed: Invalid qos specification\n")
    assert got["RequiresReservation with one"][:2] == ("R", "None")
    held = [n for n in NAMES if got[n][0] == "PD"]
    assert len(held) >= 8, got
