"""A job step across rnoded's restart (issue 46): systemctl restart rnoded (SIGTERM) or a crash
(SIGKILL) while an rrun step runs. rrun stays attached and gets every line, those written while
no rnoded ran included, and the task's exit code; the step's record ends when its task ends,
with that code; a SIGTERM'd rnoded exits within seconds even with a step running, or with a
StepEnd it cannot deliver; the step's TotalCPU counts what its task used while no rnoded ran."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .cluster import Cluster, wait_for
from .test_jobs_e2e import alive, cli, job_state, jobs_cluster, start, start_node, submit

STOP_DEADLINE = 5.0  # rnoded's exit after SIGTERM, whatever runs (the unit SIGKILLs at 30 s)
# The task: five lines, then (rnoded stopped meanwhile) fifteen more and exit 7, all while no
# rnoded runs; the test lets it go on by creating `go`.
TASK = ("echo $$ > pid; for i in 1 2 3 4 5; do echo line $i; done; touch ready; "
        "while [ ! -e go ]; do sleep 0.05; done; "
        "i=6; while [ $i -le 20 ]; do echo line $i; i=$((i+1)); done; exit 7")
# ... and, across the restart, spins 0.5 s of CPU in a child it reaps: the step's TotalCPU
# (its shim's wait4 of the task, issue 48) counts it though no rnoded ran then
SPIN = f"{sys.executable} -c 'import time\nwhile time.process_time() < 0.5: pass'"
SPIN_TASK = TASK.replace("exit 7", f"{SPIN}; exit 7")


@pytest.fixture
def c(tmp_path: Path):
    cluster = jobs_cluster(tmp_path, ["n1"], cpus=2)
    cluster.clients = []  # type: ignore[attr-defined]
    try:
        start(cluster)
        yield cluster
    finally:
        for p in cluster.clients:  # type: ignore[attr-defined]
            if p.poll() is None:  # a failed test's rrun: never left behind
                p.kill()
                p.communicate()
        cluster.stop()


def rrun(c: Cluster, *argv: str) -> subprocess.Popen:
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
    p = subprocess.Popen([sys.executable, "-m", "ranch.cli.rrun", *argv], cwd=c.dir, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    c.clients.append(p)  # type: ignore[attr-defined]
    return p


def step_row(c: Cluster, jid: int) -> list[str]:
    out = cli(c, "racct", "-j", str(jid), "-P", "-n", "-o", "JobID,State,ExitCode").stdout
    rows = [line.split("|") for line in out.splitlines()]
    return next((r for r in rows if r[0] == f"{jid}.0"), [])


def cpu_seconds(text: str) -> float:
    """racct's TotalCPU (`MM:SS.mmm`) in seconds."""
    minutes, _, rest = text.rpartition(":")
    return float(minutes or 0) * 60 + float(rest)


def stop(c: Cluster, how: signal.Signals) -> float:
    """Stop n1's rnoded with `how`; the seconds it took to exit."""
    proc = c.nodes.pop("n1")
    t0 = time.monotonic()
    proc.send_signal(how)
    proc.wait(30)
    return time.monotonic() - t0


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_step_runs_on_across_an_rnoded_restart(c: Cluster, how: signal.Signals) -> None:
    jid = submit(c, "-N1", "-o", "/dev/null", "--wrap", "sleep 300")
    c.wait_for(lambda: job_state(c, jid) == "RUNNING", 30, what="job running")
    p = rrun(c, "--jobid", str(jid), "-N1", "sh", "-c", SPIN_TASK)
    wait_for(lambda: (c.dir / "ready").exists(), 30, what="the task's first lines")
    task = int((c.dir / "pid").read_text())
    took = stop(c, how)
    if how == signal.SIGTERM:
        assert took < STOP_DEADLINE, f"rnoded took {took:.1f} s to stop with a step running"
        print(f"rnoded stopped {took:.2f} s after SIGTERM, a step and a batch job running")
    # the rest of the task's output and its end come while no rnoded runs
    (c.dir / "go").touch()
    wait_for(lambda: not alive(task), 15, what="the task's end")
    assert p.poll() is None  # rrun waits for the node's return
    assert step_row(c, jid)[1:] == ["RUNNING", "0:0"]
    start_node(c, "n1")
    out, err = p.communicate(timeout=60)
    assert out.splitlines() == [f"line {i}" for i in range(1, 21)], err
    assert p.returncode == 7, err
    assert "error: n1: task 0: Exited with exit code 7" in err
    assert "connection lost" not in err
    c.wait_for(lambda: step_row(c, jid)[1:] == ["FAILED", "7:0"], 20,
               what="the step's record ended with its task's code")
    assert job_state(c, jid) == "RUNNING"  # the job itself ran on throughout
    out = cli(c, "racct", "-j", f"{jid}.0", "-P", "-n", "-o", "TotalCPU,UserCPU").stdout
    total, user = (cpu_seconds(x) for x in out.strip().split("|"))
    # the spin's (process_time() is a system call: user and system share it), measured while
    # no rnoded ran
    assert 0.5 <= total < 5 and 0 < user < total, out


def test_sigterm_stops_rnoded_promptly_with_a_step_end_undelivered(c: Cluster) -> None:
    """The controller is away when a step ends: its StepEnd waits in the spool, rnoded still
    stops at once on SIGTERM, and the next rnoded delivers it."""
    jid = submit(c, "-N1", "-o", "/dev/null", "--wrap", "sleep 300")
    c.wait_for(lambda: job_state(c, jid) == "RUNNING", 30, what="job running")
    p = rrun(c, "--jobid", str(jid), "-N1", "sh", "-c", TASK)
    wait_for(lambda: (c.dir / "ready").exists(), 30, what="the task's first lines")
    c.stop_ctld()
    (c.dir / "go").touch()
    out, err = p.communicate(timeout=60)  # rrun hears the end from the node, not rctld
    assert p.returncode == 7, err
    assert out.splitlines() == [f"line {i}" for i in range(1, 21)]
    wait_for(lambda: "StepEnd not sent yet" in c.log("n1"), 30, what="StepEnd retried")
    took = stop(c, signal.SIGTERM)
    assert took < STOP_DEADLINE, f"rnoded took {took:.1f} s to stop with a StepEnd unsent"
    print(f"rnoded stopped {took:.2f} s after SIGTERM, a StepEnd unsent")
    c.start_ctld()
    start_node(c, "n1")
    c.wait_for(lambda: step_row(c, jid)[1:] == ["FAILED", "7:0"], 30,
               what="the step's end delivered by the next rnoded")


def _blocked_writing(pid: int) -> bool:
    try:
        return "pipe" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def _asleep(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] == "S"


def _unsent(pid: int) -> int:
    """The most bytes queued unsent (or unacknowledged) on one of process `pid`'s TCP sockets."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    most = 0
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        words = line.split()
        if words[9] in inodes:
            most = max(most, int(words[4].split(":")[0], 16))
    return most


def test_output_an_rnoded_read_but_never_got_to_rrun_is_sent_again(c: Cluster) -> None:
    """rnoded is SIGKILLed holding output it read from a task's pipe but could not send: rrun
    is stopped, the connection is full, and the task blocks on its full pipe. The next rnoded
    sends again, from its spool, what follows the count rrun says it took: every line comes
    once (without the spool, the piece the killed rnoded held was lost)."""
    lines = 1_000_000  # ~6.9 MB: more than the pipe and the connection hold
    jid = submit(c, "-N1", "-o", "/dev/null", "--wrap", "sleep 300")
    c.wait_for(lambda: job_state(c, jid) == "RUNNING", 30, what="job running")
    p = rrun(c, "--jobid", str(jid), "-N1", "sh", "-c",
             f"echo $$ > pid; while [ ! -e go ]; do sleep 0.05; done; exec seq {lines}")
    wait_for(lambda: (c.dir / "pid").exists(), 30, what="the task's start")
    task = int((c.dir / "pid").read_text())
    rnoded = c.nodes["n1"].pid
    os.kill(p.pid, signal.SIGSTOP)
    try:
        (c.dir / "go").touch()
        seen: list[tuple] = []

        def stalled() -> bool:
            """Twice in a row: the task blocked on its full pipe, rnoded asleep (so not about
            to read that pipe: waiting to send a piece it read) with bytes queued for rrun."""
            now = (_blocked_writing(task), _asleep(rnoded), _unsent(rnoded))
            seen.append(now)
            return now[0] and now[1] and now[2] > 0 and seen[-2:-1] == [now]

        wait_for(stalled, 60, what="the task blocked on its pipe, rnoded on its connection")
        stop(c, signal.SIGKILL)
    finally:
        os.kill(p.pid, signal.SIGCONT)
    start_node(c, "n1")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    got = out.splitlines()
    assert len(got) == lines and got == [str(i) for i in range(1, lines + 1)], (
        f"{len(got)} lines; {err}")
    # the case at hand: the killed rnoded held a piece it had read (a whole CHUNK, as a rule)
    assert "bytes rrun never got" in c.log("n1")
