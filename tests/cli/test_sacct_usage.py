"""racct's usage fields and rseff's report over records (issue 48): sacct 22.05's formats as a
private Slurm with jobacct_gather/linux printed them (TotalCPU `00:02.957`, MaxRSS `137752K`,
TRESUsageInTot `cpu=00:00:02,...,mem=137752K,...,vmem=219460K`), what sacct prints where
nothing measured (`00:00:00`, empty), and seff's wording and arithmetic."""

from __future__ import annotations

import pytest

from ranch.cli import rseff
from ranch.cli.sacct_fields import parse_format, rows
from ranch.cli.sacct_usage import cpu_text

BATCH = {"user_s": 2.586, "system_s": 0.371, "tasks": 1, "max_rss_kib": 137752,
         "max_rss_node": "c1", "max_rss_task": 0, "rss_kib": 137752, "max_vm_kib": 219460,
         "max_vm_node": "c1", "max_vm_task": 0, "vm_kib": 219460, "min_cpu_s": 2.957,
         "min_cpu_node": "c1", "min_cpu_task": 0}
STEP = {**BATCH, "user_s": 1.437, "system_s": 0.031, "max_rss_kib": 13428, "rss_kib": 13428,
        "max_vm_kib": 16568, "vm_kib": 16568, "min_cpu_s": 1.468}


def record(usage: dict | None = BATCH, steps: list | None = None, **extra) -> dict:
    rec = {"job_id": 1, "state": "COMPLETED", "start_time": 1000.0, "end_time": 1008.0,
           "cpus": 2, "node_count": 1, "batch_host": "c1", "user": "root", "gid": 0,
           "cluster": "conf", "mem_per_node": 200, "exit_code": 0,
           "steps": steps if steps is not None else [
               {"id": 0, "name": "python3", "state": "COMPLETED", "cpus": 2, "ntasks": 1,
                "start_time": 1004.0, "end_time": 1006.0, "nodes": "c1", "usage": STEP}]}
    if usage is not None:
        rec["usage"] = usage
    return {**rec, **extra}


def table(rec: dict, fields: str) -> list[list[str]]:
    return rows([rec], parse_format(fields), 2000.0, steps=True)


@pytest.mark.parametrize("seconds,text", [
    (0, "00:00:00"), (4.012, "00:04.012"), (2.957, "00:02.957"), (61.5, "01:01.500"),
    (3723.2, "01:02:03"), (90000.0, "1-01:00:00"), (5.0, "00:00:05"), (0.0004, "00:00:00")])
def test_total_cpu_reads_as_sacct_prints_it(seconds: float, text: str) -> None:
    assert cpu_text(seconds) == text


def test_measured_lines_match_what_slurm_printed() -> None:
    got = table(record(), "JobID,TotalCPU,UserCPU,SystemCPU,CPUTime,CPUTimeRAW,MaxRSS,AveRSS,"
                "MaxVMSize,AveCPU,MaxRSSNode,MaxRSSTask,TRESUsageInTot")
    assert got[0] == ["1", "00:04.425", "00:04.023", "00:00.402", "00:00:16", "16", "", "", "",
                      "", "", "", ""]
    assert got[1] == ["1.batch", "00:02.957", "00:02.586", "00:00.371", "00:00:16", "16",
                      "137752K", "137752K", "219460K", "00:00:02", "c1", "0",
                      "cpu=00:00:02,mem=137752K,vmem=219460K"]
    assert got[2] == ["1.0", "00:01.468", "00:01.437", "00:00.031", "00:00:04", "4", "13428K",
                      "13428K", "16568K", "00:00:01", "c1", "0",
                      "cpu=00:00:01,mem=13428K,vmem=16568K"]


def test_unmeasured_lines_print_as_slurm_without_measuring() -> None:
    rec = record(usage=None, steps=[{"id": 0, "name": "x", "state": "COMPLETED", "cpus": 2,
                                     "start_time": 1004.0, "end_time": 1006.0}])
    got = table(rec, "JobID,TotalCPU,UserCPU,CPUTime,MaxRSS,AveCPU,TRESUsageInTot")
    assert got == [["1", "00:00:00", "00:00:00", "00:00:16", "", "", ""],
                   ["1.batch", "00:00:00", "00:00:00", "00:00:16", "", "", ""],
                   ["1.0", "00:00:00", "00:00:00", "00:00:04", "", "", ""]]


def test_units_and_gpu_fields() -> None:
    rec = record(_units="M", gpu_usage=[
        {"node": "c1", "index": 0, "util_ave": 80.0, "util_max": 99.0, "mem_max_mib": 30000,
         "mem_total_mib": 81559, "samples": 4},
        {"node": "c1", "index": 1, "util_ave": 40.0, "util_max": 50.0, "mem_max_mib": 1000,
         "mem_total_mib": 81559, "samples": 4}])
    got = table(rec, "JobID,MaxRSS,GPUUtil,GPUUtilMax,GPUMem,GPUUsage")
    assert got[0] == ["1", "", "60.0%", "99.0%", "30000M", "c1/0:80.0%:30000M,c1/1:40.0%:1000M"]
    assert got[1][:3] == ["1.batch", "134.52M", ""]
    assert parse_format("gpuutil%12") == [("GPUUtil", 12)]
    assert "GPUUtil" not in [f for f, _ in parse_format("ALL")]


def test_rseff_reports_as_seff() -> None:
    """Slurm 22.05's seff on the same figures (its step 1.0 of 2 tasks, 13428K largest, is
    below the batch script's 137752K, so the batch's one task counts)."""
    text = rseff.report(record())
    assert text.splitlines() == [
        "Job ID: 1", "Cluster: conf", "User/Group: root/root", "State: COMPLETED (exit code 0)",
        "Nodes: 1", "Cores per node: 2", "CPU Utilized: 00:00:04",
        "CPU Efficiency: 25.00% of 00:00:16 core-walltime", "Job Wall-clock time: 00:00:08",
        "Memory Utilized: 134.52 MB", "Memory Efficiency: 67.26% of 200.00 MB"]


def test_rseff_edge_cases() -> None:
    pending = rseff.report(record(usage=None, steps=[], state="PENDING", cpus=1))
    assert pending.splitlines()[-2:] == ["Cores: 1",
                                         "Efficiency not available for jobs in the PENDING state."]
    # nothing measured: seff's ntasks stays 0, which it words as an estimate
    bare = rseff.report(record(usage=None, steps=[], mem_per_node=0, mem_per_cpu=0))
    assert "CPU Utilized: 00:00:00\n" in bare
    assert "Memory Utilized: 0.00 MB (estimated maximum)\n" in bare
    assert "Memory Efficiency: 0.00% of 0.00 MB (0.00 MB/node)\n" in bare
    # a step of 2 tasks with the largest task: its peak times 2, per core when asked per CPU
    wide = {**STEP, "max_rss_kib": 200 * 1024}
    per_cpu = rseff.report(record(mem_per_node=0, mem_per_cpu=250, steps=[
        {"id": 0, "ntasks": 2, "cpus": 2, "usage": wide}]))
    assert "Memory Utilized: 400.00 MB (estimated maximum)\n" in per_cpu
    assert "Memory Efficiency: 80.00% of 500.00 MB (250.00 MB/core)\n" in per_cpu
    running = rseff.report(record(state="RUNNING", end_time=None))
    assert running.endswith("WARNING: Efficiency statistics may be misleading for RUNNING jobs.\n")
    debug = rseff.report(record(), debug=True).splitlines()
    assert debug[1] == "Slurm data: 1  root root COMPLETED conf 2 1 1 204800 1 4 8 137752 0"
    assert rseff.time2str(90061) == "1-01:01:01" and rseff.kbytes2str(3 * 1024 ** 3) == "3.00 TB"


def test_long_and_all_lists_fill_every_usage_field() -> None:
    from ranch.cli.sacct_fields import LONG_FORMAT

    for fields in (LONG_FORMAT, "ALL"):
        got = table(record(), fields)
        names = [f for f, _ in parse_format(fields)]
        batch = dict(zip(names, got[1], strict=True))
        assert batch["MaxVMSizeNode"] == "c1" and batch["MinCPU"] == "00:00:02"
        assert batch["TRESUsageInMax"] == "mem=137752K,vmem=219460K"
        assert batch["TRESUsageInMaxNode"] == "mem=c1,vmem=c1"
