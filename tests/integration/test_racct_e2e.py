"""racct against a real rctld and rnoded: the finished-job history survives a SIGKILL of rctld
between a job's end and its purge (the job is listed once, recorded once), and sacct's output
forms (-p/-P, -X, -n, -b, -j forms, -s with -S, --json) and filters over real jobs."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .cluster import Cluster, free_port
from .test_jobs_e2e import CONF, cli, start, submit


def acct_cluster(tmp: Path, min_job_age: int) -> Cluster:
    port = free_port()
    text = CONF.format(port=port, nodes="n1", cpus=2, timeout=10, gres="")
    text = text.replace("KillWait=1\n", f"KillWait=1\nMinJobAge={min_job_age}\n")
    c = Cluster(tmp, ["n1"], conf_text=text)
    c.port, c.addr = port, ("127.0.0.1", port)
    return c


def history_lines(c: Cluster, job_id: int) -> list[dict]:
    folder = Path(c.state_dir) / "job_history"
    out = []
    for f in sorted(folder.glob("jobs.*.jsonl")) if folder.exists() else ():
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            if rec["job_id"] == job_id:
                out.append(rec)
    return out


def held(c: Cluster, job_id: int) -> bool:
    out = cli(c, "rqueue", "-h", "-t", "all", "-o", "%i").stdout.split()
    return str(job_id) in out


def test_sigkill_between_end_and_purge_keeps_the_job_exactly_once(tmp_path: Path) -> None:
    c = acct_cluster(tmp_path, min_job_age=4)
    with c:
        start(c)
        job = submit(c, "-J", "kept", "--wrap", "exit 3")
        c.wait_for(lambda: cli(c, "racct", "-n", "-X", "-P", "-o", "State", "-j",
                               str(job)).stdout == "FAILED\n", 30, what="job FAILED")
        c.kill_ctld()  # within MinJobAge of its end: the job is still in the snapshot
        c.start_ctld()
        c.wait_for(lambda: history_lines(c, job), 20, what="the job's history record")
        # past MinJobAge another job's change makes a snapshot, which purges the first
        deadline = time.monotonic() + 30
        while held(c, job) and time.monotonic() < deadline:
            submit(c, "--wrap", "true")
            c.wait_for(lambda: not cli(c, "rqueue", "-h").stdout.strip(), 20, what="queue empty")
        assert not held(c, job), "the finished job was never purged"
        assert len(history_lines(c, job)) == 1
        out = cli(c, "racct", "-j", str(job), "-P", "-o", "JobID,JobName,State,ExitCode").stdout
        assert out.splitlines() == ["JobID|JobName|State|ExitCode", f"{job}|kept|FAILED|3:0",
                                    f"{job}.batch|batch|FAILED|3:0"]
        # and once more after a clean restart
        c.stop_ctld()
        c.start_ctld()
        assert len(history_lines(c, job)) == 1
        out = cli(c, "racct", "-X", "-n", "-P", "-o", "JobID", "-j", str(job)).stdout
        assert out == f"{job}\n"


def test_sacct_forms_over_real_jobs(tmp_path: Path) -> None:
    c = acct_cluster(tmp_path, min_job_age=600)
    with c:
        start(c)
        ok = submit(c, "-J", "a-rather-long-job-name", "--mem", "50M", "-t", "30", "--wrap",
                    "true")
        arr = submit(c, "-a", "1-2", "--wrap", "true")
        c.wait_for(lambda: cli(c, "racct", "-n", "-X", "-P", "-o", "State").stdout.split()
                   == ["COMPLETED"] * 3, 30, what="three jobs COMPLETED")
        table = cli(c, "racct").stdout.splitlines()
        assert table[0] == ("JobID           JobName  Partition    Account  AllocCPUS      State "
                            "ExitCode ")
        assert table[1] == "------------ ---------- ---------- ---------- ---------- ---------- " \
                           "-------- "
        assert table[2].startswith(f"{ok:<12} a-rather-+       main ")
        assert table[3].startswith(f"{str(ok) + '.batch':<12}      batch ")
        p = cli(c, "racct", "-p", "-X", "-o", "JobID,JobIDRaw,ReqMem", "-j", str(ok)).stdout
        assert p.splitlines() == ["JobID|JobIDRaw|ReqMem|", f"{ok}|{ok}|50M|"]
        tasks = cli(c, "racct", "-P", "-n", "-X", "-o", "JobID,JobIDRaw", "-j", str(arr)).stdout
        assert tasks.splitlines() == [f"{arr}_1|{arr}", f"{arr}_2|{arr + 1}"]
        one = cli(c, "racct", "-P", "-n", "-o", "JobID", "-j", f"{arr}_2").stdout
        assert one.splitlines() == [f"{arr}_2", f"{arr}_2.batch"]
        step = cli(c, "racct", "-P", "-n", "-X", "-o", "JobID", "-j", f"{ok}.batch").stdout
        assert step == f"{ok}\n"
        brief = cli(c, "racct", "-b", "-X", "-n", "-j", str(ok)).stdout
        assert brief.split() == [str(ok), "COMPLETED", "0:0"]
        # -s without -S: only what is in that state now (nothing ended "now")
        assert cli(c, "racct", "-n", "-s", "CD").stdout == ""
        # with -s and -S, -E defaults to -S (sacct's DEFAULT TIME WINDOW): a window of one instant
        assert cli(c, "racct", "-n", "-X", "-s", "CD", "-S", "now-1hour").stdout == ""
        assert len(cli(c, "racct", "-n", "-X", "-s", "CD", "-S", "now-1hour", "-E", "now")
                   .stdout.splitlines()) == 3
        doc = json.loads(cli(c, "racct", "--json", "-j", str(ok)).stdout)
        [j] = doc["jobs"]
        assert j["state"]["current"] == ["COMPLETED"] and j["exit_code"]["status"] == "SUCCESS"
        assert j["steps"][0]["step"]["id"] == f"{ok}.batch"
        bad = cli(c, "racct", "-o", "JobID,Nope", check=False)
        assert bad.returncode == 1 and 'Invalid field requested: "Nope"' in bad.stderr
        # sacct's filters over the records (cli/sacct_filters.py), each against its field
        ids = ["-n", "-X", "-P", "-o", "JobID"]
        gid, cpus = cli(c, "racct", *ids[:-1], "GID,AllocCPUS", "-j",
                        str(ok)).stdout.strip().split("|")
        every = {str(ok), f"{arr}_1", f"{arr}_2"}
        for form, want in ((["-i", "1"], every), (["--nnodes=2-3"], set()),
                           (["-I", cpus], every), ([f"--ncpus={int(cpus) + 1}-9"], set()),
                           (["-g", gid], every), (["--gid", str(int(gid) + 1)], set()),
                           (["--reason=None"], every), (["-x", "1"], set()),
                           (["--wckeys=nosuch"], set()), (["-C", "nosuch"], set()),
                           (["-k", "30", "-K", "0:1800"], {str(ok)}),
                           (["--timelimit-min=31"], every - {str(ok)})):
            assert set(cli(c, "racct", *ids, *form).stdout.split()) == want, form
        script = cli(c, "racct", "-B", "-j", str(ok)).stdout
        assert script == f"Batch Script for {ok}\n{'-' * 80}\nNONE\n\n"
        # getopt_long's reading: -o takes the next word whatever it is; a prefix of ALL
        bad = cli(c, "racct", "-n", "-X", "-o", "-j", str(ok), check=False)
        assert bad.returncode == 1 and 'Invalid field requested: "-j"' in bad.stderr
        assert len(cli(c, "racct", "-n", "-X", "-P", "-o", "al", "-j", str(ok)).stdout
                   .split("|")) > 100
