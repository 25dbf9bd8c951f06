"""Changing jobs after submission against real Slurm 22.05 (issue 48): `scontrol update JobId=`
of every key a user combines (TimeLimit with +N/-N, Name, Comment, Priority, Nice, Partition,
NumNodes, Dependency, ArrayTaskThrottle) with a user's rights (`-u alice`) and an admin's, a
running job's lowered limit ending it TIMEOUT, array throttles (`--array=1-4%2`), uhold,
requeuehold and release, `scancel 12_[4-6]` and `'12_[7,8]'`, `squeue -j` of an ended and an
unknown job, and `%L` at a job's start. The same script runs on both at once, in two threads;
job ids are compared by the name the script gave each job."""

from __future__ import annotations

import re
import time

import pytest

from tests.conformance.conftest import start_slurm
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.reboot_lab import wait
from tests.conformance.shape import SHAPE
from tests.conformance.sidebyside import run_both

# a second partition of one node with a 5-minute MaxTime, on both systems
EXTRA = "PartitionName=debug Nodes=c1 MaxTime=5 State=UP\n"
RANCH_NAMES = {"control": "scontrol: ", "queue": "squeue: ", "cancel": "scancel: ",
               "batch": "sbatch: "}


class Script:
    """What one system answered, step by step, its job ids written as the script's names."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.seen: list[tuple[str, object]] = []
        self.names: dict[str, str] = {}

    def sub(self, text: str) -> str:
        for jid, name in sorted(self.names.items(), key=lambda kv: -len(kv[0])):
            # a whole word (or `12_3`, `12|...`): never the digits of a time or a task range
            text = re.sub(rf"(?<![^\s|]){jid}(?=[_\s|]|$)", name, text, flags=re.M)
        return text

    def run(self, *argv: str) -> tuple[int, str, str]:
        r = self.cluster.run(*argv)
        # Ranch's commands run here as `python -m ranch.cli.rcontrol`: their own names
        err = re.sub(r"^r(control|queue|cancel|batch): ", lambda m: RANCH_NAMES[m.group(1)],
                     r.stderr.strip(), flags=re.M)
        return r.returncode, self.sub(r.stdout.strip()), self.sub(err)

    def note(self, label: str, value: object) -> None:
        self.seen.append((label, value))

    def submit(self, name: str, *argv: str) -> str:
        # alice may not enter the suite's own directories
        r = self.cluster.run("sbatch", "--parsable", "--uid=alice", "-D", "/tmp", "-o", "/dev/null",
                             *argv)
        assert r.returncode == 0, f"{self.cluster.name}: sbatch {argv}: {r.stderr}"
        jid = r.stdout.strip().split(";")[0]
        self.names[jid] = name
        return jid

    def alice(self, *argv: str) -> tuple[int, str, str]:
        return self.run("scontrol", "-u", "alice", *argv)

    def show(self, jid: str, *keys: str) -> dict[str, str]:
        text = self.cluster.run("scontrol", "show", "job", "-o", jid).stdout
        found = dict(re.findall(r"(\w+)=(\S*)", text))
        return {k: found.get(k, "-") for k in keys}

    def queue(self, jid: str, fmt: str = "%i|%t|%r", states: str = "all") -> list[str]:
        out = self.cluster.run("squeue", "-h", "-t", states, "-j", jid, "-o", fmt).stdout
        return sorted(self.sub(line) for line in out.splitlines())

    def state(self, jid: str) -> str:
        return self.show(jid, "JobState")["JobState"]


def script(cluster) -> list[tuple[str, object]]:
    s = Script(cluster)
    # a running job whose owner lowers its limit: it ends TIMEOUT at the new one (checked last)
    t = s.submit("T", "-t", "3", "--wrap", "exec sleep 300")
    wait(lambda: s.state(t) == "RUNNING", 30, f"T running on {cluster.name}")
    s.note("raise a running job's limit", s.alice("update", f"JobId={t}", "TimeLimit=+1"))
    s.note("lower it", s.alice("update", f"JobId={t}", "TimeLimit=-2"))
    s.note("T", s.show(t, "TimeLimit", "JobState"))

    # a pending job, updated by its owner
    p = s.submit("P", "--begin=now+3600", "-t", "10", "--wrap", "true")
    for words in (["TimeLimit=+5"], ["TimeLimit=-3"], ["TimeLimit=20"], ["Name=renamed"],
                  ["JobName=again"], ["Comment=hello"], ["Priority=5"], ["Nice=-5"],
                  ["Nice=10"], ["Partition=nosuch"], ["NumNodes=2"], ["NumNodes=0"],
                  ["Bogus=1"], ["TimeLimit=abc"], ["ArrayTaskThrottle=abc"],
                  ["ArrayTaskThrottle=-1"], []):
        s.note(f"alice update P {words}", s.alice("update", f"JobId={p}", *words))
    s.note("P", s.show(p, "JobName", "Comment", "TimeLimit", "Nice", "NumNodes", "Partition"))
    s.note("P to debug", s.alice("update", f"JobId={p}", "NumNodes=1", "Partition=debug"))
    s.note("P over debug's MaxTime", s.alice("update", f"JobId={p}", "TimeLimit=30"))
    s.note("P within it", s.alice("update", f"JobId={p}", "TimeLimit=4"))
    s.note("admin over it", s.run("scontrol", "update", f"JobId={p}", "TimeLimit=30"))
    s.note("P after", s.show(p, "TimeLimit", "Partition", "NumNodes"))
    s.note("unknown job", s.alice("update", "JobId=999999", "Comment=x"))
    # holds: an admin's uhold is the user's to release; release of a job not held is no error
    s.note("uhold", s.run("scontrol", "uhold", p))
    s.note("held", s.queue(p, "%i|%t|%r|%Q"))
    s.note("release", s.alice("release", p))
    s.note("release again", s.alice("release", p))
    s.note("requeuehold of a pending job", s.alice("requeuehold", p))
    s.note("hold of an unknown job", s.run("scontrol", "hold", "999999"))
    s.note("requeue of an unknown job", s.run("scontrol", "requeue", "999999"))

    # a never-satisfiable dependency, cleared: the job runs
    f = s.submit("F", "--wrap", "exit 1")
    wait(lambda: s.state(f) == "FAILED", 30, f"F failed on {cluster.name}")
    d = s.submit("D", f"--dependency=afterok:{f}", "--wrap", "true")
    wait(lambda: s.show(d, "Reason")["Reason"] == "DependencyNeverSatisfied", 30,
         f"D never satisfiable on {cluster.name}")
    s.note("clear D's dependency", s.alice("update", f"JobId={d}", "Dependency="))
    wait(lambda: s.state(d) == "COMPLETED", 30, f"D ran on {cluster.name}")
    s.note("D", s.show(d, "JobState", "Dependency"))

    # an array throttle, then more room for it
    a = s.submit("A", "--array=1-4%2", "--wrap", "exec sleep 120")

    def running(n: int):
        return lambda: len(s.queue(a, "%i", "R")) == n

    wait(running(2), 30, f"two of A running on {cluster.name}")
    time.sleep(2)  # a third would have started by now were the throttle ignored
    s.note("A throttled", s.queue(a, "%i|%t", "all"))
    s.note("A pending", s.queue(a, "%i|%r|%K", "PD"))
    s.note("A's throttle", s.show(f"{a}_1", "ArrayTaskThrottle"))
    s.note("throttle 3", s.alice("update", f"JobId={a}", "ArrayTaskThrottle=3"))
    wait(running(3), 30, f"three of A running on {cluster.name}")
    s.note("A at 3", len(s.queue(a, "%i", "R")))
    assert s.cluster.run("scancel", a).returncode == 0
    wait(lambda: not s.queue(a, "%i", "PD,R"), 30, f"A gone on {cluster.name}")

    # requeuehold of a running job; its owner releases it; %L at a start
    r = s.submit("R", "-t", "5", "--wrap", "exec sleep 120")
    wait(lambda: s.state(r) == "RUNNING", 30, f"R running on {cluster.name}")
    s.note("requeuehold", s.alice("requeuehold", r))
    wait(lambda: s.state(r) == "PENDING", 30, f"R requeued on {cluster.name}")
    s.note("R held", (s.queue(r, "%t|%r"), s.show(r, "Reason")))
    s.note("release R", s.alice("release", r))
    wait(lambda: s.state(r) == "RUNNING", 60, f"R running again on {cluster.name}")
    m, left, limit = s.cluster.run("squeue", "-h", "-j", r, "-o", "%M|%L|%l").stdout.split("|")

    def secs(text: str) -> int:
        total = 0
        for part in text.split(":"):
            total = total * 60 + int(part)
        return total

    s.note("R's time used + left", (limit, secs(m) + secs(left) == secs(limit)))
    assert s.cluster.run("scancel", r).returncode == 0

    # scancel of array tasks by a bracket list
    b = s.submit("B", "--begin=now+3600", "--array=1-10", "--wrap", "true")
    s.note("scancel B_[4-6]", s.run("scancel", f"{b}_[4-6]"))
    s.note("scancel B_[7,8]", s.run("scancel", f"{b}_[7,8]"))
    s.note("B", s.run("squeue", "-h", "-j", b, "-o", "%i|%t|%K"))
    assert s.cluster.run("scancel", b).returncode == 0

    # squeue -j of an ended job and of an unknown one
    s.note("squeue -j F", s.run("squeue", "-j", f))
    s.note("squeue -h -j F", s.run("squeue", "-h", "-j", f))
    s.note("squeue -j F -t all", s.run("squeue", "-h", "-j", f, "-t", "all", "-o", "%i %t"))
    s.note("squeue -j unknown", s.run("squeue", "-j", "999999"))
    s.note("squeue -j unknown,F", s.run("squeue", "-h", "-j", f"999999,{f}"))

    # T ends at its lowered limit: Slurm looks every 30 s, so within 90 s of its start
    wait(lambda: s.state(t) not in ("RUNNING", "COMPLETING"), 150, f"T ended on {cluster.name}")
    s.note("T ended", s.show(t, "JobState", "Reason", "TimeLimit"))
    assert s.cluster.run("scancel", p, d).returncode == 0
    return s.seen


@pytest.fixture(scope="module")
def sessions() -> dict[str, list]:
    slurm = start_slurm(SHAPE, extra_conf=EXTRA)
    try:
        ranch = RanchCluster(SHAPE, extra_conf=EXTRA)
        ranch.dir.chmod(0o755)  # the nodes' spool within: alice's jobs run their scripts there
        with ranch:
            return run_both(slurm, ranch, script, timeout=400)
    finally:
        slurm.stop()


def test_job_updates_holds_throttles_and_listings_match_slurm(sessions) -> None:
    slurm, ranch = sessions["slurm"], sessions["ranch"]
    assert [s for s, _ in ranch] == [s for s, _ in slurm]
    wrong = [f"{step}:\n  Slurm {want!r}\n  Ranch {got!r}"
             for (step, want), (_, got) in zip(slurm, ranch, strict=True) if got != want]
    assert not wrong, "\n".join(wrong)
