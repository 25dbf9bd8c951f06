"""Each command's import set stays within tests/cli/import_budget.json, against a real rctld.

A command's start is Python's own plus what it imports (bytecode loads and module bodies run):
the budget keeps an added import on the hot path from going unnoticed."""

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
MODULES = {"rinfo": "cli.rinfo", "rqueue": "cli.rqueue", "rbatch": "cli.rbatch",
           "rcancel": "cli.rcancel", "rcontrol": "cli.rcontrol"}
# The console-script wrapper's own imports come first, as in an installed command; then the
# command runs in this process and the modules it added are printed on stdout's last line.
PROBE = """\
import re, sys
before = set(sys.modules)
sys.argv = {argv!r}
from {module} import main
try:
    code = main()
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
print("\\n" + repr((code, sorted(set(sys.modules) - before))))
"""


def loaded(ctl: Controller, argv: list[str]) -> tuple[int, list[str]]:
    code = PROBE.format(argv=argv, module=MODULES[argv[0]])
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=ctl.env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return eval(out.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def ctl(tmp_path_factory: pytest.TempPathFactory):
    c = Controller(tmp_path_factory.mktemp("budget"), CONF)
    c.start()
    yield c
    c.stop()


@pytest.mark.parametrize("line", sorted(BUDGET["budget"]))
def test_command_stays_within_its_import_budget(ctl: Controller, line: str) -> None:
    argv = line.split()
    if argv[0] == "rcancel":
        argv.append(str(_a_job(ctl)))
    code, modules = loaded(ctl, argv)
    assert code == 0, f"{line} failed"
    banned = sorted(set(modules) & set(BUDGET["never"]))
    assert not banned, f"{line} imports {banned}: keep them off the hot path"
    budget = BUDGET["budget"][line]
    assert len(modules) <= budget, (
        f"{line} loads {len(modules)} modules, over its budget of {budget} "
        f"(tests/cli/import_budget.json): {modules}")


def _a_job(ctl: Controller) -> int:
    """A pending job for rcancel to cancel (no node runs it: none registered)."""
    code, _ = loaded(ctl, ["rbatch", "--hold", "--wrap", "true"])
    assert code == 0
    jobs = ctl.ask(__import__("protocol.messages", fromlist=["GetJobs"]).GetJobs()).jobs
    return max(j["job_id"] for j in jobs if j["state"] == "PENDING")
