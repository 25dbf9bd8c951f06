"""Each command, started by its launcher (bin/), stays within its import budget
(tests/cli/import_budget.json) against a real rctld, and prints all it says: once finding the
controller from the environment (RANCH_SERVER), once from the config file (RANCH_CONF), the way
a login host does.

A command's start is Python's own plus what it imports (bytecode loads and module bodies run):
the budget keeps an added import on the hot path from going unnoticed. The launchers end with
os._exit (ranch.cli.controller.exit_now), so the test also checks that nothing written is lost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from launcher import REPO, Controller

BUDGET = json.loads((Path(__file__).parent / "import_budget.json").read_text())
CONF = """\
ClusterName=budget
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
AuthKeyFile={key}
NodeName=n[1-3] CPUs=2 RealMemory=100
PartitionName=main Nodes=n[1-3] Default=YES
"""
# What each command prints when it works.
SAYS = {"rinfo": "PARTITION", "rinfo -N -l": "NODELIST", "rqueue": "JOBID",
        "rbatch --wrap true": "Submitted batch job", "rcancel": "", "rcontrol show node":
        "NodeName=n1", "racct -P -o JobID,State -j 1": "JobID|State", "rqueue -s": "STEPID",
        "rcontrol show step": "No job steps in the system", "ralloc -N1 echo ok": "ok",
        "rrun -N1 echo ok": "ok", "rshare": "RawShares"}


def imported(argv: list[str], env: dict) -> tuple[subprocess.CompletedProcess, set[str]]:
    """The finished process and the modules it imported (python -X importtime's list)."""
    out = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60)
    names = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    return out, names - {"imported package"}


@pytest.fixture(scope="module")
def ctl(tmp_path_factory: pytest.TempPathFactory):
    c = Controller(tmp_path_factory.mktemp("budget"), CONF)
    c.start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def ctl_with_node(tmp_path_factory: pytest.TempPathFactory):
    """For ralloc and rrun: a controller of their own with a real rnoded (on the shared one,
    a node would run the jobs the other commands expect pending)."""
    c = Controller(tmp_path_factory.mktemp("budget-node"), CONF)
    c.start()
    try:
        c.start_node("n1")
        c.wait_states({"n1": "idle"})
        yield c
    finally:
        _end_jobs(c)  # a job's processes outlive rnoded: none may be left running
        c.stop()


@pytest.fixture(scope="module")
def python_itself(ctl: Controller) -> set[str]:
    return imported(["-c", "pass"], ctl.env)[1]


def found_by(ctl: Controller, how: str) -> dict:
    """The environment of a command that finds the controller by `how`: "env" (RANCH_SERVER,
    RANCH_KEY_FILE) or "conf" (RANCH_CONF alone: SlurmctldHost, SlurmctldPort, AuthKeyFile)."""
    if how == "env":
        return ctl.env
    env = {k: v for k, v in ctl.env.items() if k not in ("RANCH_SERVER", "RANCH_KEY_FILE")}
    return {**env, "RANCH_CONF": str(ctl.conf_path)}


@pytest.mark.parametrize("how", ["env", "conf"])
@pytest.mark.parametrize("line", sorted(BUDGET["budget"]))
def test_command_stays_within_its_import_budget(ctl: Controller, python_itself: set[str],
                                                line: str, how: str,
                                                request: pytest.FixtureRequest) -> None:
    argv = line.split()
    if argv[0] == "rcancel":
        argv.append(str(_a_job(ctl)))
    if argv[0] in ("ralloc", "rrun"):  # they need a node: a real rnoded
        ctl = request.getfixturevalue("ctl_with_node")
        if argv[0] == "rrun":  # a step in an allocation, as `srun` inside salloc
            argv[1:1] = ["--jobid", str(_an_allocation(ctl))]
    env = found_by(ctl, how)
    done, modules = imported([str(REPO / "bin" / argv[0]), *argv[1:]], env)
    assert done.returncode == 0, f"{line} failed: {done.stderr[-2000:]}"
    assert SAYS[line] in done.stdout, done.stdout
    added = sorted(modules - python_itself)
    banned = sorted(set(added) & set(BUDGET["never"]))
    assert not banned, f"{line} imports {banned}: keep them off the hot path"
    budget = BUDGET["budget"][line] + (BUDGET["config_file"] if how == "conf" else 0)
    assert len(added) <= budget, (
        f"{line} ({how}) loads {len(added)} modules, over its budget of {budget} "
        f"(tests/cli/import_budget.json): {added}")


def test_nothing_printed_is_lost_at_exit(ctl: Controller) -> None:
    """exit_now skips the interpreter's teardown: a long output must still arrive whole."""
    done = subprocess.run([sys.executable, str(REPO / "bin" / "rcontrol"), "show", "node"],
                          cwd=REPO, env=ctl.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()
            if line.startswith("NodeName=")] == ["NodeName=n1", "NodeName=n2", "NodeName=n3"]


def _an_allocation(ctl: Controller) -> int:
    """An allocation of n1, held open (ralloc --no-shell) for rrun's steps."""
    done = subprocess.run([sys.executable, str(REPO / "bin" / "ralloc"), "--no-shell", "-N1"],
                          cwd=REPO, env=ctl.env, capture_output=True, text=True, timeout=60,
                          check=True)
    return int(done.stderr.split()[-1])


def _end_jobs(ctl: Controller) -> None:
    """Cancel every job and wait until none runs on n1 any more."""
    from ranch.protocol.messages import GetJobs

    ids = [j["job_id"] for j in ctl.ask(GetJobs()).jobs]
    if ids:
        subprocess.run([sys.executable, str(REPO / "bin" / "rcancel"), *map(str, ids)],
                       cwd=REPO, env=ctl.env, capture_output=True, timeout=60)
    ctl.wait_for(lambda: all(j["state"] not in ("RUNNING", "COMPLETING", "CONFIGURING")
                             for j in ctl.ask(GetJobs()).jobs), 60, "every job ended")


def _a_job(ctl: Controller) -> int:
    """A pending job for rcancel to cancel (no node runs it: none registered)."""
    done = subprocess.run([sys.executable, str(REPO / "bin" / "rbatch"), "--hold", "--parsable",
                           "--wrap", "true"], cwd=REPO, env=ctl.env, capture_output=True,
                          text=True, timeout=60, check=True)
    return int(done.stdout)
