"""What jobs use, measured end to end (issue 48): real rctld and rnoded (as root: the job's memory
cgroup where the kernel has one), real jobs. A job spinning one CPU for 4 s of CPU time shows
~4 s TotalCPU in racct and ~100 % CPU efficiency in rseff; one holding 120 MB of a 200 MB request
~60 % memory efficiency; a step's CPU is its own and the job line's is the sum; a job's fake
GPUs are sampled (racct's GPU fields, rseff, --json); and reportseff, unchanged, reads the same
efficiencies through the Slurm-named shims."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .cluster import Cluster, free_port
from .test_jobs_e2e import cli, start, submit

REPO = Path(__file__).resolve().parents[2]
CONF = """\
ClusterName=usage
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=10
MessageTimeout=3
ReturnToService=1
KillWait=1
MinJobAge=600
NodeName=n1 CPUs=2 RealMemory=1000 Gres=gpu:2
PartitionName=main Nodes=n1 Default=YES
"""
# CPU time, not wall time: the figure holds on a loaded machine (only the efficiency depends
# on how much of the wall time the process got)
SPIN = ("import time\nt = time.time()\nwhile time.process_time() < {s}: pass\n"
        "print(time.time() - t)\n")  # how long the spin took: the machine's load
HOLD = "import time\na = b'x' * (120 << 20)\ntime.sleep(3)\n"
RRUN = f"{sys.executable} -m ranch.cli.rrun"


def seconds(text: str) -> float:
    """racct's TotalCPU (`MM:SS.mmm` or `[D-]HH:MM:SS`) in seconds."""
    parts = [float(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return parts[0] * 3600 + parts[1] * 60 + parts[2]


def percent(report: str, what: str) -> float:
    found = re.search(rf"^{what}: ([0-9.]+)%", report, re.M)
    assert found, report
    return float(found.group(1))


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """One cluster; the jobs below, ended; and what the Slurm-named shims' PATH is."""
    work = tmp_path_factory.mktemp("usage")
    port = free_port()
    c = Cluster(work, ["n1"], conf_text=CONF.format(port=port))
    c.port, c.addr = port, ("127.0.0.1", port)
    c.fake_gpus = 2  # type: ignore[attr-defined]
    (work / "spin.py").write_text(SPIN.format(s=4))
    (work / "spin2.py").write_text(SPIN.format(s=2))
    (work / "hold.py").write_text(HOLD)
    py = sys.executable
    with c:
        start(c)
        # alone on the node: its efficiency is the CPU it got of its wall time
        jobs = {"spin": submit(c, "-n1", "-o", f"{work}/spin.out", "--wrap",
                               f"{py} {work}/spin.py")}
        c.wait_for(lambda: cli(c, "racct", "-n", "-X", "-P", "-o", "State", "-j",
                               str(jobs["spin"])).stdout == "COMPLETED\n", 60, what="spin ended")
        jobs |= {
            "hold": submit(c, "-n1", "--mem=200M", "--wrap", f"{py} {work}/hold.py"),
            "step": submit(c, "-n1", "--wrap", f"{RRUN} -n1 {py} {work}/spin2.py"),
            "gpu": submit(c, "-n1", "--gres=gpu:2", "--wrap", "sleep 3"),
        }
        ids = ",".join(str(j) for j in jobs.values())
        c.wait_for(lambda: cli(c, "racct", "-n", "-X", "-P", "-o", "State", "-j", ids).stdout
                   .split() == ["COMPLETED"] * len(jobs), 90, what="every job COMPLETED")
        yield c, jobs, work


def test_a_spinning_job_shows_its_cpu_time_and_full_efficiency(ran) -> None:
    c, jobs, _ = ran
    jid = str(jobs["spin"])
    lines = cli(c, "racct", "-n", "-P", "-o", "JobID,TotalCPU,UserCPU,SystemCPU,CPUTime,"
                "AllocCPUS,Elapsed,MaxRSS,AveCPU,ElapsedRaw", "-j", jid).stdout.splitlines()
    job, batch = (line.split("|") for line in lines)
    assert 3.9 <= seconds(job[1]) <= 5.5, lines
    assert job[1] == batch[1]  # the job line adds up its steps: here the batch script alone
    assert seconds(batch[2]) + seconds(batch[3]) == pytest.approx(seconds(batch[1]), abs=0.002)
    assert job[5] == "1" and job[4] == job[6]  # CPUTime: Elapsed x AllocCPUS
    assert job[7] == "" and re.fullmatch(r"\d+K", batch[7])  # MaxRSS: on the step line only
    assert re.fullmatch(r"00:00:0[4-5]", batch[8])
    report = cli(c, "rseff", jid).stdout
    assert "Cores: 1" in report and "State: COMPLETED (exit code 0)" in report
    missing = cli(c, "rseff", "999999", check=False)  # seff's answer and status
    assert (missing.returncode, missing.stdout, missing.stderr) == (2, "", "Job not found.\n")
    assert "CPU Utilized: 00:00:04\n" in report or "CPU Utilized: 00:00:05\n" in report
    # seff's arithmetic: the CPU (whole seconds, rounded) over Elapsed x cores
    cput, wall = round(seconds(job[1])), int(job[9])
    efficiency = percent(report, "CPU Efficiency")
    assert efficiency == pytest.approx(100 * cput / wall, abs=0.01), report
    # ~100 % when the spin had a CPU to itself; a loaded machine (2 cores shared by every
    # test run) stretches its wall time, and its efficiency with it
    spun = float((ran[2] / "spin.out").read_text().split()[-1])
    if spun < 4.5:
        assert efficiency >= 70.0, (report, spun)


def test_a_job_holding_120_of_200_mb_shows_60_percent(ran) -> None:
    c, jobs, _ = ran
    jid = str(jobs["hold"])
    out = cli(c, "racct", "-n", "-P", "--units=M", "-o", "JobID,MaxRSS,ReqMem,TRESUsageInTot",
              "-j", f"{jid}.batch").stdout.strip().split("|")
    assert out[0] == f"{jid}.batch" and out[2] == ""  # sacct: ReqMem on the job line only
    assert 120 <= float(out[1].rstrip("M")) <= 140, out
    assert re.fullmatch(r"cpu=00:00:0\d,mem=[0-9.]+M,vmem=[0-9.]+M", out[3]), out
    report = cli(c, "rseff", jid).stdout
    assert 58.0 <= percent(report, "Memory Efficiency") <= 70.0, report
    assert re.search(r"^Memory Efficiency: [0-9.]+% of 200.00 MB$", report, re.M), report


def test_a_step_is_measured_on_its_own_and_the_job_adds_it_up(ran) -> None:
    c, jobs, _ = ran
    jid = str(jobs["step"])
    rows = dict(line.split("|", 1) for line in cli(
        c, "racct", "-n", "-P", "-o", "JobID,TotalCPU,MaxRSSNode,MaxRSSTask,NTasks", "-j", jid
    ).stdout.splitlines())
    step = rows[f"{jid}.0"].split("|")
    assert 1.9 <= seconds(step[0]) <= 3.0 and step[1:] == ["n1", "0", "1"], rows
    total = seconds(rows[jid].split("|")[0])
    assert total == pytest.approx(seconds(rows[f"{jid}.batch"].split("|")[0]) + seconds(step[0]),
                                  abs=0.002)
    doc = json.loads(cli(c, "racct", "--json", "-j", jid).stdout)
    steps = {s["step"]["id"]: s for s in doc["jobs"][0]["steps"]}
    got = steps[f"{jid}.0"]
    assert got["time"]["total"]["seconds"] >= 1
    totals = {t["type"]: t["count"] for t in got["tres"]["requested"]["total"]}
    assert totals["cpu"] >= 1900 and totals["mem"] > 0


def test_gpu_use_is_sampled_for_the_gpus_the_job_held(ran) -> None:
    c, jobs, _ = ran
    jid = str(jobs["gpu"])
    util, top, mem, each = cli(c, "racct", "-n", "-X", "-P", "-o",
                               "GPUUtil,GPUUtilMax,GPUMem,GPUUsage", "-j", jid
                               ).stdout.strip().split("|")
    assert 0 <= float(util.rstrip("%")) <= float(top.rstrip("%")) <= 100, util
    assert re.fullmatch(r"\d+K|[0-9.]+[MG]", mem), mem
    assert [g.split(":")[0] for g in each.split(",")] == ["n1/0", "n1/1"], each
    assert cli(c, "racct", "-n", "-X", "-P", "-o", "GPUUtil", "-j", str(jobs["spin"])
               ).stdout == "\n"  # a job without GPUs has nothing there
    report = cli(c, "rseff", jid).stdout
    assert "GPUs: 2 (n1/0, n1/1)" in report and "GPU Utilization: " in report, report
    doc = json.loads(cli(c, "racct", "--json", "-X", "-j", jid).stdout)
    gpus = doc["jobs"][0]["gpus"]
    assert [g["index"] for g in gpus] == [0, 1] and all(g["samples"] >= 1 for g in gpus)
    assert all(g["memory"]["total_mib"] > 0 for g in gpus)
    # the job's record (rcontrol show job --json, the HTTP API's GET /api/v1/jobs/ID) has them
    shown = json.loads(cli(c, "rcontrol", "--json", "show", "job", jid).stdout)["jobs"][0]
    assert [(g["node"], g["index"]) for g in shown["gpus_used"]] == [("n1", 0), ("n1", 1)]


def test_reportseff_reads_the_same_efficiencies(ran) -> None:
    if shutil.which("reportseff", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("reportseff is not installed (pip install -e '.[test]')")
    c, jobs, work = ran
    bindir = work / "shims"
    subprocess.run([sys.executable, "-m", "ranch.cli.shims", str(bindir)], cwd=REPO, check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
           "RANCH_SERVER": f"127.0.0.1:{c.port}", "RANCH_KEY_FILE": c.key_file,
           "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)
    tool = os.path.join(os.path.dirname(sys.executable), "reportseff")
    ids = [str(jobs["spin"]), str(jobs["hold"]), str(jobs["step"])]
    done = subprocess.run([tool, "--no-color", "--parsable", "--format",
                           "JobID,State,CPUEff,MemEff", *ids], env=env, cwd=work,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split("|")[0]: line.split("|") for line in done.stdout.splitlines()[1:]}
    for jid in ids:
        seff = cli(c, "rseff", jid).stdout
        assert rows[jid][1] == "COMPLETED", done.stdout
        cpu = percent(seff, "CPU Efficiency")
        if rows[jid][2] == "---":  # reportseff's word for 0.0 (the job that mostly slept)
            assert cpu < 0.05, (done.stdout, seff)
        else:
            assert float(rows[jid][2]) == pytest.approx(cpu, abs=1.0), (done.stdout, seff)
    assert rows[str(jobs["spin"])][2] != "---"
    # memory efficiency where memory was asked for (reportseff prints --- otherwise, seff 0 %)
    hold = str(jobs["hold"])
    assert float(rows[hold][3]) == pytest.approx(
        percent(cli(c, "rseff", hold).stdout, "Memory Efficiency"), abs=1.0), rows
    assert rows[str(jobs["spin"])][3] == "---"
    # its default table, which stopped on "Failed to parse time ''" before racct measured
    plain = subprocess.run([tool, "--no-color", *ids], env=env, cwd=work, capture_output=True,
                           text=True, timeout=60)
    assert plain.returncode == 0 and "Failed" not in plain.stdout + plain.stderr, plain


def test_the_figures_survive_a_controller_sigkill(ran) -> None:
    c, jobs, _ = ran
    ids = ",".join(str(j) for j in jobs.values())
    fields = "JobID,TotalCPU,MaxRSS,AveRSS,MaxVMSize,TRESUsageInTot,GPUUsage"
    before = cli(c, "racct", "-P", "-o", fields, "-j", ids).stdout
    c.kill_ctld()  # the state file and its journal keep them (MinJobAge holds the jobs)
    c.start_ctld()
    c.wait_for(lambda: cli(c, "racct", "-P", "-o", fields, "-j", ids, check=False).stdout
               == before, 30, what="the same figures after the restart")
