"""What a job used, Slurm 22.05 (slurmdbd, jobacct_gather/linux sampling every second) beside
Ranch (rnoded's meter, issue 48): one batch job that spins 2 s of CPU, then holds 120 MB for 2 s,
then runs a step spinning 1 s. Compared field by field on the job line, `.batch` and `.0`: each
value's form (`00:02.957`, `137752K`, `00:00:02`...) is the same, and the figures agree within
what two measurements of the same work can (CPU within a second, memory within a quarter).
Not compared: TRESUsageInTot's energy, fs/disk and pages (Ranch measures none of them: its
list holds cpu, mem and vmem, docs/slurm-compat.md).

Needs slurmdbd and MariaDB besides Slurm; skips and says why without them.
"""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_missing
from tests.conformance.slurmdbd import accounting_missing
from tests.conformance.test_step_listings import Side

PY = "/usr/bin/python3"
SPIN = "import time\nwhile time.process_time() < {s}: pass\n"
SCRIPT = f"""#!/bin/sh
{PY} -c "{SPIN.format(s=2)}a = b'x' * (120 << 20)
time.sleep(2)"
srun -n1 {PY} -c "{SPIN.format(s=1)}"
"""
FIELDS = ("JobID,TotalCPU,UserCPU,SystemCPU,CPUTime,CPUTimeRAW,MaxRSS,AveRSS,MaxVMSize,AveCPU,"
          "MinCPU,MaxRSSNode,MaxRSSTask,NTasks,TRESUsageInTot")
CPU_FIELDS = ("TotalCPU", "UserCPU", "SystemCPU")
# MaxVMSize only in form: Slurm's batch step counts srun's own address space (~80 MB) with the
# script's, Ranch's rrun's, which differs
MEM_FIELDS = ("MaxRSS", "AveRSS")


@pytest.fixture(scope="module")
def lines(tmp_path_factory) -> dict[str, dict[str, dict[str, str]]]:
    from ranch.cli.shims import write

    reason = slurm_missing() or accounting_missing()
    if reason:
        if os.environ.get("RANCH_REQUIRE_SLURMDBD") == "1":
            pytest.fail(f"RANCH_REQUIRE_SLURMDBD=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    if not os.access(PY, os.X_OK):
        pytest.skip(f"{PY} is missing")
    shims = tmp_path_factory.mktemp("shims")
    write(shims)
    slurm = SlurmCluster(SHAPE, accounting=True, extra_conf=(
        "JobAcctGatherType=jobacct_gather/linux\nJobAcctGatherFrequency=1\n"))
    try:
        try:
            slurm.start()
        except SlurmUnavailable as exc:
            pytest.fail(f"a private Slurm with slurmdbd could not start: {exc}", pytrace=False)
        with RanchCluster(SHAPE) as ranch:
            sides = {"slurm": Side(slurm, None), "ranch": Side(ranch, shims)}
            jobs = {}
            for name, side in sides.items():
                (side.dir / "use.sh").write_text(SCRIPT)
                done = side.run("sbatch", "-N1", "-n1", "-o", "use.out", "use.sh")
                assert done.returncode == 0, (name, done.stderr)
                jobs[name] = int(done.stdout.split()[-1])
            out: dict[str, dict[str, dict[str, str]]] = {}
            for name, side in sides.items():
                jid = jobs[name]
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and side.run(
                        "sacct", "-n", "-P", "-o", "State", "-j", str(jid)
                ).stdout.split() != ["COMPLETED"] * 3:
                    time.sleep(0.5)
                got = side.run("sacct", "-P", "-o", FIELDS, "-j", str(jid)).stdout.splitlines()
                head = got[0].split("|")
                out[name] = {}
                for line in got[1:]:
                    row = dict(zip(head, line.split("|"), strict=True))
                    out[name][row["JobID"].replace(str(jid), "J")] = row
            return out
    finally:
        slurm.stop()


def form(value: str) -> str:
    return re.sub(r"\d+", "9", value)


def seconds(text: str) -> float:
    parts = [float(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return parts[0] * 3600 + parts[1] * 60 + parts[2]


def kib(text: str) -> float:
    return float(text[:-1]) * 1024 ** "KMGT".index(text[-1])


@pytest.mark.parametrize("line", ["J", "J.batch", "J.0"])
def test_the_same_lines_in_the_same_forms(lines, line: str) -> None:
    slurm, ranch = lines["slurm"][line], lines["ranch"][line]
    for field in FIELDS.split(","):
        if field in ("TRESUsageInTot", *CPU_FIELDS):
            continue  # below: the figures, and what each measures
        if field in ("CPUTime", "CPUTimeRAW") and line == "J":
            continue  # the job's elapsed time differs by a second between the two systems
        assert form(ranch[field]) == form(slurm[field]), (line, field, slurm, ranch)
    for field in CPU_FIELDS:  # MM:SS.mmm, or 00:00:00 when a figure is 0
        assert (":" in ranch[field] and "." in ranch[field]) == (
            "." in slurm[field]) or seconds(slurm[field]) < 0.01 or seconds(ranch[field]) < 0.01


@pytest.mark.parametrize("line", ["J", "J.batch", "J.0"])
def test_the_figures_agree(lines, line: str) -> None:
    slurm, ranch = lines["slurm"][line], lines["ranch"][line]
    assert abs(seconds(ranch["TotalCPU"]) - seconds(slurm["TotalCPU"])) < 1.0, (slurm, ranch)
    for field in MEM_FIELDS:
        if slurm[field]:
            assert 0.75 <= kib(ranch[field]) / kib(slurm[field]) <= 1.33, (field, slurm, ranch)
    if line != "J":
        ours = ranch["TRESUsageInTot"].split(",")
        theirs = [kv for kv in slurm["TRESUsageInTot"].split(",")
                  if kv.split("=")[0] in ("cpu", "mem", "vmem")]
        assert [kv.split("=")[0] for kv in ours] == [kv.split("=")[0] for kv in theirs]
        assert [form(kv) for kv in ours] == [form(kv) for kv in theirs]
        mem = dict(kv.split("=", 1) for kv in ours)
        slurm_mem = dict(kv.split("=", 1) for kv in theirs)
        assert 0.75 <= kib(mem["mem"]) / kib(slurm_mem["mem"]) <= 1.33, (slurm, ranch)
