"""sprio 22.05 beside rsprio with the association and site factors and two PriorityFlags (issue
44): associations given Priority by sacctmgr (an account's, inherited by its users and
sub-accounts, a user's own, root's own cleared with -1), PriorityWeightAssoc normalising by
the highest; `scontrol update SiteFactor=` (added unweighted, negative too); ACCRUE_ALWAYS,
under which a job begun later is listed, and CALCULATE_RUNNING, under which a running job is.
sacctmgr's words for the tree, `show assoc format=...,priority`, sprio (default, -l, -n -l,
-w) and squeue's %Q are compared byte for byte. Slurm's slurmctld is restarted once the tree
is in (as test_sprio.py does). Needs slurmdbd and MariaDB; without them it skips and says why."""

from __future__ import annotations

import shlex
import time

import pytest

from tests.conformance.dbd_side import on_slurm_with_slurmdbd
from tests.conformance.test_sprio import on_ranch_with, on_slurm_with

CONF = """\
PriorityType=priority/multifactor
PriorityDecayHalfLife=0
PriorityUsageResetPeriod=MONTHLY
PriorityCalcPeriod=1
PriorityWeightAge=0
PriorityWeightAssoc=1000
PriorityWeightJobSize=100
PriorityFlags=ACCRUE_ALWAYS,CALCULATE_RUNNING
"""
TREE = (
    "-i add account physics Priority=10",
    "-i add account chem Priority=40",
    "-i add account bio parent=chem",
    "-i add user alice account=physics,bio",
    "-i add user bob account=chem Priority=25",
    "-i add user root account=physics Priority=70",
    "-i modify user alice where account=bio set Priority=60",
    "-i modify account physics set Priority=20",
    "-i modify user root where account=physics set Priority=-1",
    "show assoc format=account,user,priority -P",
    "show assoc format=account%-8,user%-6,priority%8,share",
)
# (name, sbatch options): pending behind drained nodes, all as a user
JOBS = (
    ("physics", "--uid=alice -A physics -n 1"),
    ("bio", "--uid=alice -A bio -n 1"),
    ("chem", "--uid=bob -A chem -n 2"),
    ("root", "-A physics -n 1"),
    ("later", "--uid=bob -A chem -n 1 --begin=now+3600"),
    ("held", "--uid=bob -A chem -n 1 -H"),
)
SPRIO = ("", "-l", "-n -l", "-w", "-u alice,root")


def scenario(cluster, command, restart) -> list[tuple[str, object]]:
    seen: list[tuple[str, object]] = []
    for line in TREE:
        seen.append((f"sacctmgr {line}", command("sacctmgr", *shlex.split(line))))
    restart()
    # a job running on c1 (both its CPUs; root's: rctld's test nodes run no other user's
    # script), then both nodes drained: the others pend
    r = cluster.run("sbatch", "--parsable", "-D", "/tmp", "-o", "/dev/null", "-t", "30",
                    "-A", "physics", "-w", "c1", "-n", "2", "--wrap", "sleep 300")
    assert r.returncode == 0, (cluster.name, r.stderr)
    running = r.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 60
    while cluster.run("squeue", "-h", "-j", running, "-o", "%T").stdout.strip() != "RUNNING":
        assert time.monotonic() < deadline, f"{cluster.name}: job {running} did not start"
        time.sleep(0.5)
    r = cluster.run("scontrol", "update", "nodename=c1,c2", "state=drain", "reason=hold")
    assert r.returncode == 0, (cluster.name, r.stderr)
    ids = {"running": running}
    for name, opts in JOBS:
        r = cluster.run("sbatch", "--parsable", "-D", "/tmp", "-o", "/dev/null", "-t", "30",
                        *shlex.split(opts), "--wrap", "true")
        assert r.returncode == 0, (cluster.name, opts, r.stderr)
        ids[name] = r.stdout.strip().split(";")[0]
    seen.append(("ids", list(ids.values())))
    for jid, value in ((ids["physics"], "500"), (ids["chem"], "-300"), (ids["held"], "50")):
        r = cluster.run("scontrol", "update", f"JobId={jid}", f"SiteFactor={value}")
        seen.append((f"site {value}", (r.returncode, r.stderr.strip())))
    r = cluster.run("scontrol", "update", f"JobId={ids['bio']}", "SiteFactor=2147483646")
    # the words after the command's own name (scontrol: or rcontrol:)
    seen.append(("site out of range", (r.returncode, r.stderr.strip().split(":", 1)[-1])))
    for args in SPRIO:
        seen.append((f"sprio {args}", command("sprio", *shlex.split(args))))
    r = cluster.run("squeue", "-h", "-t", "all", "-o", "%i|%T|%Q")
    seen.append(("squeue %Q", r.stdout))
    return seen


@pytest.fixture(scope="module")
def slurm_side() -> list[tuple[str, object]]:
    return on_slurm_with_slurmdbd(CONF, lambda s: on_slurm_with(s, scenario), timeout=90)


def test_assoc_and_site_factors_and_flags_match_slurm(slurm_side) -> None:
    seen = on_ranch_with(CONF, scenario)
    assert [s for s, _ in seen] == [s for s, _ in slurm_side]
    wrong = [f"{step}:\n  Slurm {want!r}\n  Ranch {got!r}"
             for (step, want), (_, got) in zip(slurm_side, seen, strict=True) if got != want]
    assert not wrong, "\n".join(wrong)

