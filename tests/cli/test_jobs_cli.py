"""rbatch, rqueue, rcancel and rcontrol's job commands against a real rctld and rnoded: golden
outputs (times masked) and the errors users see."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from launcher import Controller
from test_golden import check_golden, mask

ADMIN = "goldenadmin"
CONF = """\
ClusterName=jobs
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
AuthKeyFile={key}
HeartbeatInterval=1
SlurmdTimeout=30
NodeName=w[1-2] CPUs=2 RealMemory=64 TmpDisk=0
PartitionName=all Nodes=w[1-2] Default=YES
PartitionName=small Nodes=w2 MaxTime=5
PartitionName=off Nodes=w1 State=DOWN
"""
_TIME = re.compile(r"(?<= )0:\d\d(?= )")  # rqueue's TIME column (a few seconds of running)
_VOLATILE = re.compile(r"\b(RunTime|GroupId|AllocNode:Sid)=\S+")
_UID = re.compile(r"(UserId=\w+)\(\d+\)")


def mask_jobs(text: str) -> str:
    text = _TIME.sub("<T>", mask(text))
    return _UID.sub(r"\1(<UID>)", _VOLATILE.sub(lambda m: f"{m.group(1)}=<X>", text))


@pytest.fixture(scope="module")
def queue(tmp_path_factory):
    """Two running jobs, and pending ones for each common reason."""
    work = tmp_path_factory.mktemp("jobs")
    ctl = Controller(work, CONF)
    ctl.env["LOGNAME"] = ADMIN
    started = False
    try:
        ctl.start()
        started = True
        for n in ("w1", "w2"):
            ctl.start_node(n)
        ctl.wait_states({"w1": "idle", "w2": "idle"}, timeout=60)
        submits = [
            ["--wrap", "sleep 300"],  # 1: w1 (mix)
            ["-c", "2", "-J", "big", "--mem", "32", "--wrap", "sleep 300"],  # 2: w2 (alloc)
            ["-c", "2", "--wrap", "sleep 300"],  # 3: Resources
            ["--wrap", "sleep 300"],  # 4: Priority (behind 3)
            ["-p", "off", "--wrap", "true"],  # 5: PartitionDown
            ["-p", "small", "-t", "10", "--wrap", "true"],  # 6: PartitionTimeLimit
            ["-H", "-o", "out-%j.txt", "--wrap", "true"],  # 7: held
        ]
        for i, argv in enumerate(submits, 1):
            done = ctl.run("rbatch", "-D", str(work), *argv)
            assert (done.returncode, done.stdout) == (0, f"Submitted batch job {i}\n"), done.stderr
        yield ctl
    finally:
        try:
            if started:  # no sleep of ours outlives the test
                ctl.run("rcancel", "-u", ADMIN)
                ctl.wait_for(lambda: not ctl.run("rqueue", "-h").stdout.strip(), 15,
                             "queue empty")
        finally:
            ctl.stop()


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("rqueue.txt", []),
        ("rqueue_l.txt", ["-l"]),
        ("rqueue_t_o.txt", ["-t", "PD", "-o", "%.5i %.10P %.20r %C %m %l %b"]),
        ("rqueue_w_h.txt", ["-w", "w2", "-h"]),
        ("rqueue_u_p.txt", ["-u", ADMIN, "-p", "small,off"]),
    ],
)
def test_rqueue_views(queue: Controller, name: str, argv: list[str]) -> None:
    done = queue.run("rqueue", *argv)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    check_golden(name, mask_jobs(done.stdout))


def test_rqueue_json(queue: Controller) -> None:
    done = queue.run("rqueue", "--json", "-j", "2,3")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert set(doc) >= {"jobs", "meta", "errors", "warnings"}
    three, two = doc["jobs"]  # squeue order: PENDING before RUNNING
    assert (two["job_id"], two["job_state"], two["nodes"], two["name"]) == (
        2, ["RUNNING"], "w2", "big")
    assert two["memory_per_node"] == {"set": True, "infinite": False, "number": 32}
    assert three["state_reason"] == "Resources" and three["user_name"] == ADMIN


def test_rinfo_shows_the_allocations(queue: Controller) -> None:
    done = queue.run("rinfo", "-N", "-p", "all", "-o", "%N %t %C")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    assert rows[1:] == [["w1", "mix", "1/1/0/2"], ["w2", "alloc", "2/0/0/2"]], rows
    snap = queue.nodes()
    assert (snap["w1"]["cpus_alloc"], snap["w2"]["cpus_alloc"]) == (1, 2)
    assert snap["w2"]["alloc_mem"] == 32


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("show_job.txt", ["show", "job", "2"]),
        ("show_job_o.txt", ["-o", "show", "job", "7"]),
    ],
)
def test_rcontrol_show_job(queue: Controller, name: str, argv: list[str]) -> None:
    done = queue.run("rcontrol", *argv)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    check_golden(name, mask_jobs(done.stdout).replace(str(queue.dir), "<DIR>"))


def test_squeue_and_sinfo_command_lines(queue: Controller) -> None:
    """squeue's getopt_long reading (a word after -j is its list wherever it stands, a required
    argument takes the next word), --sort, --start and -w's node check; sinfo's -S."""

    def ids(*argv: str) -> list[str]:
        done = queue.run("rqueue", "-h", "-o", "%i", *argv)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert ids("--sort=-i") == ["7", "6", "5", "4", "3", "2", "1"]
    assert ids("-S", "-D,i")[:2] == ["1", "2"]  # one node each: then by id
    assert sorted(ids("--start")) == ["3", "4", "5", "6", "7"]  # squeue --start: pending only
    assert ids("2", "-j") == ids("-j", "2") == ids("--jobs=2") == ["2"]
    for argv, said in ((["-A"], "option requires an argument -- 'A'"),
                       (["-A", "-j", "2"], "Unrecognized option: 2"),
                       (["--sort=x"], "Invalid sort specification: x"),
                       (["-w", "nosuch"], "Invalid node name nosuch"),
                       (["-j", "abc"], "Invalid job id: abc"),
                       (["--st=1"], "option '--st=1' is ambiguous"),
                       (["-s", "5"], "Invalid job_step id: 5.??")):
        done = queue.run("rqueue", *argv)
        assert done.returncode == 1 and said in done.stderr, (argv, done.stderr)
    done = queue.run("rinfo", "-h", "-o", "%P", "--sort=-P")
    assert (done.returncode, done.stdout.split()) == (0, ["small", "off", "all*"]), done.stderr
    done = queue.run("rinfo", "-h", "-o", "%P %D", "--sort=#P")
    assert done.stdout.split()[::2] == ["all*", "small", "off"]


def test_refusals_are_clear_and_change_nothing(queue: Controller) -> None:
    cases = [
        (["-c", "3", "--wrap", "x"], "Requested node configuration is not available: the job "
         "needs 3 CPU(s) per node; the nodes of partition all have 2 at most (cpus_per_task)"),
        (["--mem", "4G", "--wrap", "x"], "Requested node configuration is not available: the "
         "job needs 4096 MB of memory per node; the nodes of partition all have 64 MB at most "
         "(mem_mib)"),
        (["-p", "nope", "--wrap", "x"], "invalid partition specified: nope (partition)"),
        (["-w", "w9", "--wrap", "x"], "invalid node name specified: w9 (nodelist)"),
    ]  # -n 5, more CPUs than the partition's nodes hold: queued (EnforcePartLimits=NO)
    for argv, message in cases:
        done = queue.run("rbatch", *argv)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"rbatch: error: Batch job submission failed: {message}\n"
    done = queue.run("rbatch", "-N", "3-2", "--wrap", "x")
    # sbatch's words (proc_args.c verify_node_count), its exit status
    assert done.returncode == 255 and "Maximum node count 2 is less than minimum node count 3" \
        in done.stderr
    done = queue.run("rbatch", "--mem", "lots", "--wrap", "x")
    assert done.returncode == 255 and "--mem lots" in done.stderr
    script = Path(queue.dir) / "not_a_script.txt"
    script.write_text("echo hi\n")
    done = queue.run("rbatch", str(script))
    assert done.returncode == 1 and "does not look like a batch script" in done.stderr
    done = queue.run("rcancel", "999")  # scancel: no such job is no error without -v
    assert (done.returncode, done.stderr) == (0, "")
    done = queue.run("rcancel", "-v", "999")
    assert done.returncode == 0
    assert "rcancel: error: Kill job error on job id 999: Invalid job id specified" in done.stderr
    done = queue.run("rqueue", "-t", "XX")
    assert done.returncode == 1 and "invalid job state 'XX'" in done.stderr
    done = queue.run("rqueue", "-o", "%i %_")  # squeue 22.05: printed as written, a warning
    assert done.returncode == 0 and done.stdout.splitlines()[:2] == ["JOBID %_", "3 %_"]
    assert done.stderr == "rqueue: error: Invalid job format specification: _\n"
    done = queue.run("rcontrol", "hold", "1")
    assert done.returncode == 1 and "no longer pending" in done.stderr
    assert len(json.loads(queue.run("rqueue", "--json", "-t", "all").stdout)["jobs"]) == 7


def test_script_directives_and_cancel(queue: Controller) -> None:
    script = Path(queue.dir) / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH -J fromscript\n#RANCH --partition=small\n"
                      "#SBATCH -t 2\n\n# a comment\necho hi\n#SBATCH -J ignored\n")
    done = queue.run("rbatch", "-t", "3", str(script), "arg1")
    assert done.returncode == 0, done.stderr
    job_id = int(done.stdout.split()[-1])
    done = queue.run("rcontrol", "-o", "show", "job", str(job_id))
    assert "JobName=fromscript" in done.stdout and "Partition=small" in done.stdout
    assert "TimeLimit=00:03:00" in done.stdout  # the command line wins
    assert f"Command={script}" in done.stdout
    # scontrol -u: the change is asked for as that user (not the job's owner: refused); an
    # unknown one is scontrol's error, with its exit status 0
    done = queue.run("rcontrol", "-u", "nobody", "hold", str(job_id))
    assert done.returncode == 1 and "Access/permission denied" in done.stderr
    done = queue.run("rcontrol", "--uid=nosuchuser", "hold", str(job_id))
    assert (done.returncode, done.stderr) == (0, 'rcontrol: error: --uid="nosuchuser" invalid\n')
    done = queue.run("rcancel", str(job_id))
    assert done.returncode == 0, done.stderr
    done = queue.run("rqueue", "-h", "-t", "CA", "-o", "%i %T")
    assert done.stdout.split() == [str(job_id), "CANCELLED"]
    # scancel of a job that ended: silent, exit 0; -v says why, still 0; --signal checks the
    # ids against the active jobs first: "Invalid job id specified", exit 1
    done = queue.run("rcancel", str(job_id))
    assert (done.returncode, done.stderr) == (0, "")
    done = queue.run("rcancel", "-v", str(job_id))
    assert done.returncode == 0 and "already completing or completed" in done.stderr
    done = queue.run("rcancel", "--signal=USR1", str(job_id))
    assert done.returncode == 1
    assert f"Kill job error on job id {job_id}: Invalid job id specified" in done.stderr
    done = queue.run("rcancel", "999999")
    assert (done.returncode, done.stderr) == (0, "")
    # an empty filter is a filter (the ids are checked); an unknown -u user is refused
    done = queue.run("rcancel", "--account=", "999999")
    assert done.returncode == 1 and "Invalid job id specified" in done.stderr
    done = queue.run("rcancel", "-u", "nosuchuser")
    assert (done.returncode, done.stderr) == (1, "rcancel: error: Invalid user name: nosuchuser\n")
