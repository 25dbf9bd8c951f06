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
import shutil
import subprocess
import time

import pytest

from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_missing
from tests.conformance.slurmdbd import accounting_missing
from tests.conformance.test_step_listings import Side

PY = "/usr/bin/python3"
SPIN = "import time\nwhile time.process_time() < {s}: pass\n"
SCRIPTS = {
    "use": f"""#!/bin/sh
{PY} -c "{SPIN.format(s=2)}a = b'x' * (120 << 20)
time.sleep(2)"
srun -n1 {PY} -c "{SPIN.format(s=1)}"
""",
    # seff's cases: CPU alone, memory held of a request, a step of two tasks per CPU
    "spin": f"#!/bin/sh\n{PY} -c \"{SPIN.format(s=3)}\"\n",
    "hold": f"#!/bin/sh\n{PY} -c \"import time\na = b'x' * (120 << 20)\ntime.sleep(3)\"\n",
    "pair": f"#!/bin/sh\nsrun -n2 {PY} -c \"{SPIN.format(s=2)}\"\n",
}
SEFF_JOBS = {"spin": ("-n1",), "hold": ("-n1", "--mem=200M"),
             "pair": ("-n2", "--mem-per-cpu=100M")}
FIELDS = ("JobID,TotalCPU,UserCPU,SystemCPU,CPUTime,CPUTimeRAW,MaxRSS,AveRSS,MaxVMSize,AveCPU,"
          "MinCPU,MaxRSSNode,MaxRSSTask,NTasks,TRESUsageInTot")
CPU_FIELDS = ("TotalCPU", "UserCPU", "SystemCPU")
# MaxVMSize only in form: Slurm's batch step counts srun's own address space (~80 MB) with the
# script's, Ranch's rrun's, which differs
MEM_FIELDS = ("MaxRSS", "AveRSS")


def seff_program() -> list[str] | None:
    """Slurm's seff (contribs/seff: perl, with libslurmdb-perl), from PATH or RANCH_SEFF."""
    found = os.environ.get("RANCH_SEFF") or shutil.which("seff")
    if not found:
        return None
    return ["perl", found] if not os.access(found, os.X_OK) else [found]


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """Both systems, started once for this module."""
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
            yield {"slurm": Side(slurm, None), "ranch": Side(ranch, shims)}
    finally:
        slurm.stop()


def run_jobs(sides, scripts: dict[str, tuple[str, ...]]) -> dict[str, dict[str, int]]:
    """Each script (name -> its sbatch options) submitted on both, waited for until sacct has
    the job and every step COMPLETED."""
    jobs: dict[str, dict[str, int]] = {}
    for name, side in sides.items():
        jobs[name] = {}
        for key, options in scripts.items():
            (side.dir / f"{key}.sh").write_text(SCRIPTS[key])
            done = side.run("sbatch", *options, "-o", f"{key}.out", f"{key}.sh")
            assert done.returncode == 0, (name, done.stderr)
            jobs[name][key] = int(done.stdout.split()[-1])
    for name, side in sides.items():
        for jid in jobs[name].values():
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                states = side.run("sacct", "-n", "-P", "-o", "State", "-j", str(jid)).stdout
                if len(states.split()) >= 2 and set(states.split()) == {"COMPLETED"}:
                    break
                time.sleep(0.5)
    return jobs


@pytest.fixture(scope="module")
def lines(sides) -> dict[str, dict[str, dict[str, str]]]:
    jobs = run_jobs(sides, {"use": ("-N1", "-n1")})
    out: dict[str, dict[str, dict[str, str]]] = {}
    for name, side in sides.items():
        jid = jobs[name]["use"]
        got = side.run("sacct", "-P", "-o", FIELDS, "-j", str(jid)).stdout.splitlines()
        head = got[0].split("|")
        out[name] = {}
        for line in got[1:]:
            row = dict(zip(head, line.split("|"), strict=True))
            out[name][row["JobID"].replace(str(jid), "J")] = row
    return out


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


def test_rseff_words_and_figures_as_seff(sides) -> None:
    """Slurm 22.05's seff beside rseff (through the shims' `seff`) on the same three jobs: the
    same lines in the same words; CPU Utilized, Memory Utilized and Memory Efficiency agree
    (the CPU efficiency and wall-clock time depend on each system's launch and the load)."""
    seff = seff_program()
    if seff is None:
        pytest.skip("Slurm's seff is not installed (contribs/seff and libslurmdb-perl; or "
                    "RANCH_SEFF=PATH of the script)")
    jobs = run_jobs(sides, SEFF_JOBS)
    for key in SEFF_JOBS:
        reports = {}
        for name, side in sides.items():
            jid = str(jobs[name][key])
            env = side.system.env()
            if side.shims is not None:  # Ranch's, as a user with the shims on PATH runs it
                env["PATH"] = f"{side.shims}{os.pathsep}{env.get('PATH', '')}"
            argv = seff if side.shims is None else [str(side.shims / "seff")]
            done = subprocess.run([*argv, jid], env=env, capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0, (name, done.stdout, done.stderr)
            reports[name] = dict(line.split(": ", 1) for line in done.stdout.splitlines()
                                 if ": " in line)
        slurm, ranch = reports["slurm"], reports["ranch"]
        assert list(ranch) == list(slurm), (key, slurm, ranch)
        skip = {"Job ID", "CPU Efficiency", "Job Wall-clock time"}
        for label in slurm:
            if label not in skip:
                assert form(ranch[label]) == form(slurm[label]), (key, label, slurm, ranch)
        assert abs(seconds(ranch["CPU Utilized"]) - seconds(slurm["CPU Utilized"])) <= 1
        mem = [float(r["Memory Utilized"].split()[0]) for r in (slurm, ranch)]
        assert abs(mem[1] - mem[0]) <= max(2.0, 0.15 * mem[0]), (key, slurm, ranch)
