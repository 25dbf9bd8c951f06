"""The job layer's own fault test: every acknowledged job runs exactly once and ends, with array
tasks ending together on one node, a node leaving and coming back, and rctld and rnoded killed
(SIGKILL or SIGTERM) at random. Each run of a script leaves a marker file JOBID.RUN.PID, so a
run counted twice, or a run the controller never asked for, is seen from outside.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from ranch.protocol import messages as m
from ranch.protocol.client import ControllerUnreachable
from ranch.protocol.errors import ProtocolError

from .cluster import Cluster, free_port

# HeartbeatInterval=1 and MessageTimeout=2: the missing-job grace (3 beats + MessageTimeout) is
# 5 s, so a job of a few seconds is already past it when it ends.
CONF = """\
ClusterName=once
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout={timeout}
MessageTimeout=2
ReturnToService=1
KillWait=1
NodeName={nodes} CPUs={cpus} RealMemory=64
PartitionName=main Nodes={nodes} Default=YES
"""
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
# the missing-job grace (3 beats + MessageTimeout) and the one more beat rctld waits: seconds
# after a launch past which a run missing from a heartbeat is taken for lost
PAST_GRACE = 3 * 1 + 2 + 1


def cluster(tmp: Path, nodes: list[str], cpus: int, timeout: int = 10) -> Cluster:
    port = free_port()
    c = Cluster(tmp, nodes, conf_text=CONF.format(port=port, nodes=",".join(nodes), cpus=cpus,
                                                  timeout=timeout))
    c.port, c.addr = port, ("127.0.0.1", port)
    (tmp / "marks").mkdir()
    return c


def script(tmp: Path, body: str) -> str:
    """Marks its run first, then runs `body`."""
    return (f"#!/bin/sh\n: > {tmp}/marks/$SLURM_JOB_ID.${{SLURM_RESTART_COUNT:-0}}.$$\n"
            f"{body}\n")


def submit(c: Cluster, body: str, **kw) -> tuple[int, ...] | None:
    """The job ids rctld acknowledged; None when rctld was down (nothing was promised)."""
    msg = m.SubmitJob(script=script(c.dir, body), user="once", uid=os.getuid(), gid=os.getgid(),
                      workdir=str(c.dir), env=(("PATH", os.environ.get("PATH", "")),),
                      name="once", stdout="/dev/null", **kw)
    try:
        reply = c.request(msg, timeout=3)
    except (ControllerUnreachable, ProtocolError, OSError):
        return None
    if not isinstance(reply, m.SubmitReply):
        return None
    return reply.job_ids or (reply.job_id,)


def records(c: Cluster) -> dict[int, dict]:
    got = c.request(m.GetJobs(), timeout=10)
    assert isinstance(got, m.JobList), got
    return {j["job_id"]: j for j in got.jobs}


def marks(tmp: Path) -> Counter:
    """(job id, run) -> how many times a script of that run started."""
    out: Counter = Counter()
    for f in (tmp / "marks").iterdir():
        jid, run, _pid = f.name.split(".")
        out[int(jid), int(run)] += 1
    return out


def wait_ended(c: Cluster, jobs: list[int], timeout: float) -> dict[int, dict]:
    c.wait_for(lambda: all(j in (r := records(c)) and r[j]["state"] in ENDED for j in jobs),
               timeout, what=f"every one of {len(jobs)} jobs ended")
    return records(c)


def beaten_after(c: Cluster, nodes: list[str], t: float) -> None:
    """Wait until every node in `nodes` has had a heartbeat taken by rctld after wall time `t`
    (rctld's own record of the node's last beat: a loaded machine only makes it later)."""
    c.wait_for(lambda: all((rec["last_heartbeat"] or 0.0) > t
                           for n, rec in c.snapshot().items() if n in nodes),
               60 + t - time.time(), what=f"heartbeats of {','.join(nodes)} after {t:.1f}")


def past_grace(c: Cluster, jobs: list[int], nodes: list[str]) -> None:
    """Until the nodes' beats come past the missing-job grace of every run of `jobs`: from
    then on, a run a heartbeat leaves out is requeued."""
    recs = records(c)
    beaten_after(c, nodes, max(recs[j]["start_time"] for j in jobs) + PAST_GRACE)


def start(c: Cluster) -> None:
    c.start_ctld()
    for name in c.node_names:
        c.start_node(name)
    c.wait_for(lambda: all(c.state(n) == "IDLE" for n in c.node_names), 30, what="nodes IDLE")


def test_array_tasks_ending_together_each_run_once(tmp_path: Path) -> None:
    """D3: the tasks of an array, two on each node, end within a millisecond of each other
    (their scripts wait on one FIFO) long after the missing-job grace. A node's first ending
    asks for a heartbeat at once, while the other task is between leaving the node's running
    list and recording its ending. No task may be taken for lost and run again."""
    nodes = ["n1", "n2", "n3", "n4"]  # CPUs=2 each: the machine's own count caps a node's
    with cluster(tmp_path, nodes, cpus=2) as c:
        start(c)
        all_jobs: list[int] = []
        for rnd in range(3):
            go = tmp_path / f"go{rnd}"
            os.mkfifo(go)
            ids = submit(c, f"cat {go} > /dev/null", array="0-7")
            assert ids is not None and len(ids) == 8
            all_jobs += ids
            c.wait_for(lambda ids=ids: all(marks(tmp_path)[j, 0] for j in ids), 30,
                       what="every task running")
            past_grace(c, list(ids), nodes)  # any task lost now is requeued
            os.close(os.open(go, os.O_WRONLY))  # every reader sees its end of file at once
            recs = wait_ended(c, list(ids), 30)
            assert {recs[j]["state"] for j in ids} == {"COMPLETED"}, recs
        recs = records(c)
        runs = marks(tmp_path)
        again = {j: recs[j]["restarts"] for j in all_jobs if recs[j]["restarts"]}
        assert again == {}, f"tasks requeued though they ran to their end: {again}"
        extra = {k: n for k, n in runs.items() if k[1] != 0 or n != 1}
        assert extra == {}, f"runs beyond one each: {extra}"
        assert "node lost a job" not in c.log("rctld")


def test_kills_and_a_returning_node_run_each_job_once(tmp_path: Path) -> None:
    """Short jobs and arrays flow while rctld and rnoded are killed (SIGKILL or SIGTERM) at
    random and come back within SlurmdTimeout: every acknowledged job's script starts exactly
    once and the job completes (a run that never started may be sent again or requeued).
    Then a node leaves for longer than SlurmdTimeout holding a job pinned to it: the job is
    requeued, and relaunched on the node when it returns while its old run still runs there:
    run 0 and run 1 each start exactly once, and the job completes."""
    rng = random.Random(int(os.environ.get("RANCH_ONCE_SEED", "30")))
    # SlurmdTimeout=15: a restarted rnoded (a Python start on a loaded machine can take seconds)
    # is back well within it, so no job of the random phase may be requeued
    with cluster(tmp_path, ["n1", "n2", "n3"], cpus=2, timeout=15) as c:
        start(c)
        acked: list[int] = []
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:
            for _ in range(rng.randint(1, 4)):
                ids = submit(c, f"sleep {rng.choice((0.1, 0.5, 1, 2))}",
                             array="0-3" if rng.random() < 0.3 else "")
                acked += ids or ()
            time.sleep(rng.uniform(0.2, 1.0))
            what = rng.random()
            sig = rng.choice((signal.SIGKILL, signal.SIGTERM))
            if what < 0.3 and c.ctld is not None:
                c.ctld.send_signal(sig)
                c.ctld.wait(10)
                c.start_ctld()
            elif what < 0.6:
                name = rng.choice(c.node_names)
                proc = c.nodes.pop(name)
                proc.send_signal(sig)
                proc.wait(10)
                time.sleep(rng.uniform(0, 1))  # away, but back within SlurmdTimeout
                c.start_node(name)
        recs = wait_ended(c, acked, 120)
        runs = marks(tmp_path)
        assert len(acked) >= 20, "too little was acknowledged to judge"
        bad = {j: (recs[j]["state"], recs[j]["restarts"]) for j in acked
               if recs[j]["state"] != "COMPLETED"}
        assert bad == {}, f"jobs that did not complete: {bad}"
        per_job = Counter()
        for (jid, _run), n in runs.items():
            per_job[jid] += n
        wrong = {j: sorted(k for k in runs if k[0] == j) for j in acked if per_job[j] != 1}
        assert wrong == {}, f"jobs whose script did not start exactly once: {wrong}"

        # the long absence: n2's rnoded killed while the job runs, back after n2 went DOWN
        go = tmp_path / "go-away"
        [jid] = submit(c, f"while [ ! -e {go} ]; do sleep 0.05; done", nodelist="n2") or [0]
        c.wait_for(lambda: runs_of(tmp_path, jid) == {0: 1}, 30, what="run 0 running")
        c.kill_node("n2")
        c.wait_for(lambda: "DOWN" in c.state("n2"), 45, what="n2 DOWN")
        c.wait_for(lambda: records(c)[jid]["restarts"] == 1, 30, what="the job requeued")
        c.start_node("n2")
        c.wait_for(lambda: runs_of(tmp_path, jid) == {0: 1, 1: 1}, 30, what="run 1 running")
        past_grace(c, [jid], ["n2"])  # with the old run ended on the node
        go.touch()
        recs = wait_ended(c, [jid], 30)
        assert (recs[jid]["state"], recs[jid]["restarts"]) == ("COMPLETED", 1)
        assert runs_of(tmp_path, jid) == {0: 1, 1: 1}


def runs_of(tmp: Path, jid: int) -> dict[int, int]:
    return {run: n for (j, run), n in marks(tmp).items() if j == jid}


def test_allocations_waiting_across_controller_kills_run_once(tmp_path: Path) -> None:
    """Issue 46: ralloc waiting for resources while rctld is killed (SIGKILL and SIGTERM, at
    random moments of the wait and of the commands' runs) keeps asking, is granted its job
    once the controller is back, runs its command once and releases it: each allocation's
    command leaves one marker, and none is "granted to nobody" (allocation unclaimed)."""
    import subprocess
    import sys

    c = cluster(tmp_path, ["n1"], cpus=1)  # one CPU: the allocations wait their turn
    start(c)
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}"})
    env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    clients = []
    for i in range(4):
        with open(tmp_path / f"ralloc{i}.err", "wb") as err:
            clients.append(subprocess.Popen(
                [sys.executable, "-m", "ranch.cli.ralloc", "-N1", "sh", "-c",
                 f": > {tmp_path}/marks/$SLURM_JOB_ID.0.$$; sleep 1"],
                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err))
    rng = random.Random(46)
    try:
        for kill in (True, False, True):
            time.sleep(rng.uniform(0.5, 2.0))
            if kill:
                c.kill_ctld()
            else:
                c.stop_ctld(timeout=30)
            time.sleep(rng.uniform(0.2, 1.5))  # the clients meet a controller that is away
            c.start_ctld()
        c.wait_for(lambda: all(p.poll() is not None for p in clients), 120,
                   what="every ralloc done")
    finally:
        for p in clients:
            if p.poll() is None:
                p.kill()
                p.wait()
    errs = [(tmp_path / f"ralloc{i}.err").read_text(errors="replace") for i in range(4)]
    assert [p.returncode for p in clients] == [0] * 4, errs
    granted = [int(e.split("Granted job allocation ")[1].split()[0]) for e in errs]
    assert len(set(granted)) == 4, errs
    assert marks(tmp_path) == Counter({(jid, 0): 1 for jid in granted})  # each ran once
    recs = wait_ended(c, granted, 30)
    assert all(recs[j]["state"] == "COMPLETED" for j in granted), {j: recs[j] for j in granted}
    assert "allocation unclaimed" not in c.log("rctld")
    c.stop()
