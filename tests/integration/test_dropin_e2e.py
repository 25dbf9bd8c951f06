"""sbatch's options end to end (issue 22): real rctld and rnoded processes, real rbatch,
rqueue, rcancel and rcontrol commands, real job processes. Dependencies, Features, --signal
before the time limit, --export, the file patterns, --test-only, MailProg, what show job and
squeue show of the kept options, and squeue's and scancel's filters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from .cluster import REPO, Cluster, free_port, wait_for

CONF = """\
ClusterName=dropin
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=10
MessageTimeout=3
KillWait=1
MinJobAge=600
MailProg={mailprog}
NodeName=n1 CPUs=2 RealMemory=256 Features=intel,ib
NodeName=n2 CPUs=2 RealMemory=256 Features=amd
PartitionName=main Nodes=n[1-2] Default=YES
"""
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    work = tmp_path_factory.mktemp("dropin")
    mailprog = work / "mail.sh"
    mailprog.write_text(f'#!/bin/sh\necho "$1|$2|$3|$SLURM_JOB_ID|$SLURM_JOB_MAIL_TYPE" '
                        f'>> {work}/mail.log\n')
    mailprog.chmod(0o755)
    port = free_port()
    cluster = Cluster(work, ["n1", "n2"],
                      conf_text=CONF.format(port=port, mailprog=mailprog))
    cluster.port, cluster.addr = port, ("127.0.0.1", port)
    with cluster:
        cluster.start_ctld()
        for name in cluster.node_names:
            argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{port}", "--name", name,
                    "--spool-dir", str(work / "spool" / name)]
            cluster.nodes[name] = cluster._spawn(name, argv)
        cluster.wait_for(lambda: all(cluster.state(n) == "IDLE" for n in ("n1", "n2")), 30,
                         what="nodes IDLE")
        yield cluster


def run(c: Cluster, module: str, *argv: str, env: dict[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess:
    """A command as a user runs it, from the cluster's directory (the jobs' workdir)."""
    full = {**os.environ, "PYTHONPATH": str(REPO), "RANCH_KEY_FILE": c.key_file,
            "RANCH_SERVER": f"127.0.0.1:{c.port}", **(env or {})}
    done = subprocess.run([sys.executable, "-m", f"ranch.cli.{module}", *argv], cwd=c.dir, env=full,
                          capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, f"{module} {argv}: {done.stderr}"
    return done


def sub(c: Cluster, *argv: str, env: dict[str, str] | None = None) -> int:
    out = run(c, "rbatch", "--parsable", *argv, env=env).stdout
    return int(out.strip())


def rec(c: Cluster, job_id: int) -> dict:
    out = run(c, "rqueue", "--json", "-t", "all", "-j", str(job_id)).stdout
    return next(j for j in json.loads(out)["jobs"] if j["job_id"] == job_id)


def state(c: Cluster, job_id: int) -> str:
    return rec(c, job_id)["job_state"][0]


def reason(c: Cluster, job_id: int) -> str:
    return rec(c, job_id)["state_reason"]


def wait_state(c: Cluster, job_id: int, *states: str, timeout: float = 30) -> None:
    c.wait_for(lambda: state(c, job_id) in states, timeout, what=f"job {job_id} {states}")


def show(c: Cluster, job_id: int) -> str:
    return run(c, "rcontrol", "show", "job", str(job_id)).stdout


def test_dependencies(c: Cluster) -> None:
    a = sub(c, "--wrap", "sleep 4; exit 3")
    never = sub(c, "-d", f"afterok:{a}", "--mail-type=INVALID_DEPEND", "--wrap", "true")
    notok = sub(c, "-d", f"afternotok:{a}", "--wrap", "true")
    killed = sub(c, "--dependency", f"afterok:{a}", "--kill-on-invalid-dep=yes", "--wrap", "true")
    either = sub(c, "-d", f"afterok:{a}?afterany:{a}", "--wrap", "true")
    listing = run(c, "rqueue", "-h", "-o", "%i|%r|%E").stdout
    assert f"{never}|Dependency|afterok:{a}(unfulfilled)" in listing
    assert f"{either}|Dependency|afterok:{a}(unfulfilled)?afterany:{a}(unfulfilled)" in listing
    wait_state(c, a, "FAILED")
    for j in (notok, either):
        wait_state(c, j, "COMPLETED")
    c.wait_for(lambda: reason(c, never) == "DependencyNeverSatisfied", what="never satisfied")
    assert state(c, never) == "PENDING"
    assert f"Reason=DependencyNeverSatisfied Dependency=afterok:{a}(failed)" in show(c, never)
    assert (state(c, killed), reason(c, killed)) == ("CANCELLED", "DependencyNeverSatisfied")
    mail = c.dir / "mail.log"
    wait_for(lambda: mail.exists() and "Invalid dependency" in mail.read_text(), what="mail")
    assert f"Slurm Job_id={never} Name=wrap Invalid dependency" in mail.read_text()
    run(c, "rcancel", str(never))
    # singleton: one running job of a name and user at a time
    first = sub(c, "-J", "solo", "--wrap", "sleep 4")
    second = sub(c, "-J", "solo", "-d", "singleton", "--wrap", "true")
    wait_state(c, first, "RUNNING")
    assert reason(c, second) == "Dependency"
    wait_state(c, second, "COMPLETED")
    assert rec(c, second)["start_time"]["number"] >= rec(c, first)["end_time"]["number"]


def test_constraints_place_on_nodes_with_the_features(c: Cluster) -> None:
    amd = sub(c, "-C", "amd", "-o", "amd-%j.out", "--wrap", "echo $SLURMD_NODENAME")
    both = sub(c, "--constraint=intel&ib", "-o", "both-%j.out", "--wrap",
               "echo $SLURMD_NODENAME")
    either = sub(c, "-C", "(amd|intel)&ib", "-o", "either-%j.out", "--wrap",
                 "echo $SLURMD_NODENAME")
    for j in (amd, both, either):
        wait_state(c, j, "COMPLETED")
    assert (c.dir / f"amd-{amd}.out").read_text() == "n2\n"
    assert (c.dir / f"both-{both}.out").read_text() == "n1\n"
    assert (c.dir / f"either-{either}.out").read_text() == "n1\n"
    assert "Features=intel&ib " in show(c, both)
    done = run(c, "rbatch", "-C", "gpu", "--wrap", "x", check=False)
    assert done.returncode == 1 and "Invalid feature specification" in done.stderr
    done = run(c, "rbatch", "-C", "intel", "-w", "n2", "--wrap", "x", check=False)
    assert done.returncode == 1 and "n2 lack the features intel" in done.stderr


def test_signal_reaches_the_job_before_its_time_limit(c: Cluster) -> None:
    shell = c.dir / "sig_b.sh"
    shell.write_text("#!/bin/bash\n#SBATCH --signal=B:USR2@3\n#SBATCH -t 0:06\n"
                     "trap 'echo $(( $(date +%s) - start )); exit 0' USR2\n"
                     "start=$(date +%s)\nwhile true; do sleep 0.1; done\n")
    child = c.dir / "sig_tasks.sh"
    child.write_text(
        "#!/bin/bash\n#SBATCH --signal=USR1@3\n#SBATCH -t 0:06\n"
        f"{sys.executable} -c 'import signal, sys\n"
        "signal.signal(signal.SIGUSR1, lambda *a: (print(\"task got USR1\"), sys.exit(0)))\n"
        "signal.pause()'\n"
        "echo shell still here\n")
    b = sub(c, "-o", "sig_b.out", str(shell))
    t = sub(c, "-o", "sig_tasks.out", str(child))
    for j in (b, t):
        wait_state(c, j, "COMPLETED", timeout=20)  # not TIMEOUT: the signal came first
    waited = int((c.dir / "sig_b.out").read_text().strip())
    assert 1 <= waited <= 5, waited  # the limit is 6 s; the signal is due 3 s before it
    assert (c.dir / "sig_tasks.out").read_text() == "task got USR1\nshell still here\n"


def test_export_applies_to_the_job_environment(c: Cluster) -> None:
    env = {"FOO": "bar", "BAZ": "qux"}
    show_env = "echo FOO=$FOO BAZ=$BAZ NEW=$NEW HOME=$HOME EXP=$SLURM_EXPORT_ENV"
    jobs = {
        "all": sub(c, "-o", "exp-all.out", "--wrap", show_env, env=env),
        "none": sub(c, "--export=NONE", "-o", "exp-none.out", "--wrap", show_env, env=env),
        "list": sub(c, "--export=FOO,NEW=1", "-o", "exp-list.out", "--wrap", show_env, env=env),
        "var": sub(c, "-o", "exp-var.out", "--wrap", show_env,
                   env={**env, "SBATCH_EXPORT": "BAZ"}),
    }
    for j in jobs.values():
        wait_state(c, j, "COMPLETED")
    out = {k: (c.dir / f"exp-{k}.out").read_text().split() for k in jobs}
    assert out["all"][:3] == ["FOO=bar", "BAZ=qux", "NEW="]
    home = os.path.expanduser("~")
    assert out["none"] == ["FOO=", "BAZ=", "NEW=", f"HOME={home}", "EXP=NONE"]
    assert out["list"][:3] == ["FOO=bar", "BAZ=", "NEW=1"] and out["list"][4] == "EXP=FOO,NEW=1"
    assert out["var"][:2] == ["FOO=", "BAZ=qux"]


def test_file_patterns_input_and_open_mode(c: Cluster) -> None:
    script = c.dir / "pat.sh"
    script.write_text("#!/bin/sh\n#SBATCH -J pat\n#SBATCH -e dask-worker-%J.err\n"
                      "#SBATCH -o out-%x-%u-%N-%n-%s-%t-%5j-%%.txt\n"
                      "echo out; echo err >&2; cat\n")
    (c.dir / "in.txt").write_text("from stdin\n")
    j = sub(c, "-i", "in.txt", str(script))
    wait_state(c, j, "COMPLETED")
    user = rec(c, j)["user_name"]
    node = rec(c, j)["nodes"]
    assert (c.dir / f"dask-worker-{j}.err").read_text() == "err\n"
    out = c.dir / f"out-pat-{user}-{node}-0-batch-0-{j:05d}-%.txt"
    assert out.read_text() == "out\nfrom stdin\n"
    arr = sub(c, "--array=1-2", "-o", "arr-%A_%a.out", "--wrap", "echo $SLURM_ARRAY_TASK_ID")
    c.wait_for(lambda: all(t["job_state"][0] == "COMPLETED" for t in json.loads(
        run(c, "rqueue", "--json", "-t", "all", "-j", str(arr)).stdout)["jobs"]), what="array")
    assert [(c.dir / f"arr-{arr}_{t}.out").read_text() for t in (1, 2)] == ["1\n", "2\n"]
    kept = c.dir / "kept.out"
    kept.write_text("before\n")
    a = sub(c, "--open-mode=append", "-o", "kept.out", "--wrap", "echo after")
    wait_state(c, a, "COMPLETED")
    assert kept.read_text() == "before\nafter\n"
    t = sub(c, "-o", "kept.out", "--wrap", "echo only")
    wait_state(c, t, "COMPLETED")
    assert kept.read_text() == "only\n"


def test_test_only_answers_and_submits_nothing(c: Cluster) -> None:
    before = len(json.loads(run(c, "rqueue", "--json", "-t", "all").stdout)["jobs"])
    done = run(c, "rbatch", "--test-only", "-N", "2", "--wrap", "true")
    assert done.stdout == ""
    words = done.stderr.split()
    assert words[:2] == ["rbatch:", "Job"] and words[3:6] == ["to", "start", "at"]
    assert " using 2 processors on nodes n[1-2] in partition main" in done.stderr
    assert time.strptime(words[6], "%Y-%m-%dT%H:%M:%S")
    assert len(json.loads(run(c, "rqueue", "--json", "-t", "all").stdout)["jobs"]) == before
    assert sub(c, "--hold", "--wrap", "true") == int(words[2])  # the id was not used up
    run(c, "rcancel", words[2])
    done = run(c, "rbatch", "--test-only", "-N", "3", "--wrap", "true", check=False)
    assert done.returncode == 1 and "allocation failure" in done.stderr


def test_mail_and_the_kept_options_shown(c: Cluster) -> None:
    j = sub(c, "-J", "mailer", "--mail-type=BEGIN,END", "--mail-user=ann", "--wrap", "true")
    wait_state(c, j, "COMPLETED")
    mail = c.dir / "mail.log"
    wait_for(lambda: mail.exists() and f"|{j}|Ended" in mail.read_text(), what="END mail")
    lines = [x for x in mail.read_text().splitlines() if f"|{j}|" in x]
    assert lines[0].startswith(f"-s|Slurm Job_id={j} Name=mailer Began, Queued time 00:00:0")
    assert lines[0].endswith(f"|ann|{j}|Began")
    assert lines[1].startswith(f"-s|Slurm Job_id={j} Name=mailer Ended, Run time 00:00:0")
    assert f", COMPLETED, ExitCode 0|ann|{j}|Ended" in lines[1]
    k = sub(c, "-A", "Physics", "-q", "high", "--wckey=w1", "--comment", "a note", "--nice=5",
            "--hint=compute_bound", "--mem-per-cpu=10", "--ntasks-per-node=1", "--hold",
            "--mail-type=FAIL", "--exclusive=user", "--wrap", "true")
    text = show(c, k)
    for part in ("Nice=5 Account=physics QOS=high WCKey=w1", "Comment=a note",
                 "MinMemoryCPU=10M", "NtasksPerN:B:S:C=1:0:*:*", "OverSubscribe=USER",
                 "MailUser=", "MailType=FAIL"):
        assert part in text, (part, text)
    assert run(c, "rqueue", "-h", "-j", str(k), "-o", "%a|%q|%k|%w|%y").stdout == \
        "physics|high|a note|w1|5\n"
    doc = rec(c, k)
    assert (doc["account"], doc["qos"], doc["wckey"], doc["nice"]) == ("physics", "high", "w1", 5)
    run(c, "rcancel", str(k))


def test_squeue_and_scancel_filters(c: Cluster) -> None:
    alphas = [sub(c, "-H", "-J", "alpha", "--wrap", "true") for _ in range(2)]
    beta = sub(c, "-H", "-J", "beta", "--wrap", "true")
    arr = sub(c, "-H", "--array=1-3", "-J", "gamma", "--wrap", "true")
    ids = run(c, "rqueue", "-h", "--name=alpha", "-o", "%i").stdout.split()
    assert sorted(map(int, ids)) == alphas
    header = run(c, "rqueue", "--name=beta", "-O", "jobid:8,name:7,state").stdout
    # squeue keeps each field's padding, the last one's too (20 wide by default)
    assert header.splitlines() == [f"JOBID   NAME   {'STATE':<20}",
                                   f"{beta:<8}beta   {'PENDING':<20}"]
    assert run(c, "rqueue", "-h", "-n", "gamma", "-o", "%i").stdout == f"{arr}_[1-3]\n"
    assert run(c, "rqueue", "-h", "-r", "-n", "gamma", "-o", "%i").stdout.split() == [
        f"{arr}_1", f"{arr}_2", f"{arr}_3"]
    mine = run(c, "rqueue", "-h", "--me", "--states=PENDING", "-o", "%i").stdout
    assert str(beta) in mine
    run(c, "rcancel", "--name=alpha")
    assert all(state(c, j) == "CANCELLED" for j in alphas) and state(c, beta) == "PENDING"
    run(c, "rcancel", "--state=RUNNING", "--name=beta")  # beta is pending: untouched
    assert state(c, beta) == "PENDING"
    run(c, "rcancel", "--me", "--state=PENDING")
    assert state(c, beta) == "CANCELLED" and state(c, arr) == "CANCELLED"


def test_wait_returns_the_jobs_exit_code(c: Cluster) -> None:
    done = run(c, "rbatch", "--wait", "--wrap", "exit 3", check=False)
    assert done.returncode == 3 and done.stdout.startswith("Submitted batch job ")
    done = run(c, "rbatch", "-W", "-Q", "--wrap", "true")
    assert done.stdout == ""


