"""The workload side: the Lublin-Feitelson generator (seeded; its marginals where the
reference measured the model's published 10,000-job trace), SWF in and out, the controller's
job history read from its files, and the same report from the same seed."""

from __future__ import annotations

import io
import itertools
import json

import pytest

from ranch.conf.build import parse_config_text
from ranch.ctld.state import journalfile
from ranch.sim import history
from ranch.sim.engine import Simulator
from ranch.sim.lublin import Model, day_weights, generate
from ranch.sim.report import percentile, summary
from ranch.sim.trace import read_swf, whole_nodes, write_swf

CONF = """\
ClusterName=sim
SlurmctldHost=h(127.0.0.1)
NodeName=n[1-16] CPUs=8 RealMemory=100
PartitionName=main Nodes=n[1-16] Default=YES MaxTime=INFINITE State=UP
SchedulerType={sched}
"""


def test_same_seed_same_jobs_and_same_report() -> None:
    a, b = generate(300, seed=7, max_procs=128), generate(300, seed=7, max_procs=128)
    assert a == b
    assert generate(300, seed=8, max_procs=128) != a
    cfg = parse_config_text(CONF.format(sched="sched/backfill"))
    assert summary(Simulator(cfg).run(a)) == summary(Simulator(cfg).run(b))


def test_marginals_follow_the_model_as_measured_on_lublin_256() -> None:
    # ../shared/sched-reference.md section 4, measured on the model's lublin_256.swf: 24.9 %
    # serial, size p50 8, runtime p10/p50/p90/p99 = 7/137/15,577/36,138 s, interarrival p50 116 s
    jobs = generate(10000, seed=1, max_procs=256)
    sizes = [j.procs for j in jobs]
    runs = [j.runtime for j in jobs]
    gaps = [b.submit - a.submit for a, b in itertools.pairwise(jobs)]
    assert sum(s == 1 for s in sizes) / len(sizes) == pytest.approx(0.249, abs=0.02)
    assert 4 <= percentile(sizes, 50) <= 16
    assert max(sizes) <= 256
    assert sum(s > 1 and s & (s - 1) == 0 for s in sizes) / len(sizes) > 0.4  # the bias
    assert percentile(runs, 50) == pytest.approx(137, rel=0.25)
    assert percentile(runs, 90) == pytest.approx(15577, rel=0.25)
    assert percentile(runs, 99) == pytest.approx(36138, rel=0.25)
    assert percentile(gaps, 50) == pytest.approx(116, rel=0.3)


def test_size_and_runtime_are_correlated() -> None:
    jobs = generate(5000, seed=2, max_procs=256)
    small = [j.runtime for j in jobs if j.procs <= 2]
    big = [j.runtime for j in jobs if j.procs >= 32]
    assert percentile(big, 50) > 2 * percentile(small, 50)


def test_the_day_has_a_cycle() -> None:
    w = day_weights(Model())
    assert sum(w) / len(w) == pytest.approx(1)
    assert max(w[20:36]) > 3 * min(w[0:12])  # 10:00-18:00 busier than 00:00-06:00
    jobs = generate(4000, seed=3, max_procs=64)
    hours = [int((j.submit / 3600 + 8) % 24) for j in jobs]  # the trace starts at 08:00
    day = sum(10 <= h < 18 for h in hours)
    night = sum(0 <= h < 6 for h in hours)
    assert day > 2 * night


def test_time_limits_are_rounded_up_and_cover_the_runtime() -> None:
    jobs = generate(500, seed=4, max_procs=64)
    assert all(j.time_limit is not None and j.time_limit * 60 >= j.runtime for j in jobs)
    assert {j.time_limit for j in jobs} <= {15, 60, 240} | {1440 * k for k in range(1, 20)}
    exact = generate(500, seed=4, max_procs=64, exact=True)
    assert all(j.time_limit == -(-int(j.runtime) // 60) or j.time_limit == 1 for j in exact)


def test_swf_round_trip_keeps_jobs_and_accounts() -> None:
    jobs = generate(50, seed=5, max_procs=32)
    buf = io.StringIO()
    write_swf(buf, jobs, {"MaxProcs": "32"})
    back, header = read_swf(io.StringIO(buf.getvalue()))
    assert header["MaxProcs"] == "32" and header["RanchAccounts"] == "acct0 acct1 acct2"
    assert [(j.id, round(j.submit), j.runtime, j.procs, j.time_limit, j.account, j.uid)
            for j in back] == [(j.id, round(j.submit), j.runtime, j.procs, j.time_limit,
                                j.account, j.uid) for j in jobs]
    assert all(len(line.split()) == 18 for line in buf.getvalue().splitlines()
               if not line.startswith(";"))


def test_swf_of_the_archive_skips_jobs_that_never_ran() -> None:
    text = ("; UnixStartTime: 0\n"
            "1 0 5 100 4 -1 -1 -1 -1 -1 1 3 2 -1 1 -1 -1 -1\n"  # no requested time or procs
            "2 10 0 -1 4 -1 -1 4 600 -1 0 3 2 -1 1 -1 -1 -1\n"  # never ran
            "3 20 0 50 2 -1 -1 8 600 -1 5 3 2 -1 1 -1 -1 -1\n"  # cancelled
            "4 30 0 50 2 -1 -1 8 90 -1 1 3 -1 -1 1 2 -1 -1\n")
    jobs, _ = read_swf(io.StringIO(text))
    assert [(j.id, j.procs, j.time_limit, j.account, j.partition) for j in jobs] == [
        (1, 4, None, "g2", ""), (4, 8, 2, "", "p2")]
    assert whole_nodes(jobs)[1].nodes == 8


def test_history_files_read_as_the_controller_writes_them(tmp_path) -> None:
    d = tmp_path / "job_history"
    d.mkdir()
    base = 1_700_000_000.0
    recs = [
        {"job_id": 5, "restarts": 0, "submit_time": base, "start_time": base + 10,
         "end_time": base + 70, "time_limit": 5, "node_count": 2, "cpus": 8, "uid": 1000,
         "user": "alice", "account": "physics", "partition": "main", "state": "COMPLETED"},
        {"job_id": 6, "restarts": 0, "submit_time": base + 5, "start_time": None,
         "end_time": base + 6, "state": "CANCELLED"},  # never ran: not in the workload
        {"job_id": 7, "restarts": 0, "submit_time": base + 8, "start_time": base + 9,
         "end_time": base + 20, "time_limit": None, "node_count": 1, "cpus": 1,
         "account": "chem", "partition": "main,other", "state": "FAILED"},
    ]
    with open(d / "jobs.20231114.jsonl", "wb") as f:
        for r in recs:
            f.write(journalfile.encode(r))
        f.write(b'{"crc":"00000000","job_id":9}\n')  # damaged: skipped
    jobs = history.jobs_of(history.read_records(str(tmp_path)))
    assert [(j.submit, j.runtime, j.nodes, j.cpus_per_node, j.account, j.partition,
             j.time_limit) for j in jobs] == [
        (0.0, 60.0, 2, 4, "physics", "main", 5), (8.0, 11.0, 1, 1, "chem", "main", None)]


def test_the_command_reports_before_and_after(tmp_path, capsys) -> None:
    from ranch.cli import rsimulate

    before, after = tmp_path / "a.conf", tmp_path / "b.conf"
    before.write_text(CONF.format(sched="sched/builtin"))
    after.write_text(CONF.format(sched="sched/backfill"))
    swf = tmp_path / "w.swf"
    with open(swf, "w") as f:
        write_swf(f, generate(120, seed=9, max_procs=128))
    assert rsimulate.main(["--conf", str(before), "--conf-after", str(after), "--swf",
                           str(swf), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["before"]["scheduler"] == "sched/builtin"
    assert got["after"]["backfilled"] > 0
    assert got["change"]["utilisation"] == pytest.approx(
        got["after"]["utilisation"] - got["before"]["utilisation"])
    assert set(got["after"]["accounts"]) == {"acct0", "acct1", "acct2"}
    assert rsimulate.main(["--conf", str(before), "--swf", str(swf)]) == 0
    assert "ACCOUNT" in capsys.readouterr().out
    assert rsimulate.main(["--conf", str(tmp_path / "none.conf"), "--swf", str(swf)]) == 1
