"""Relays on real hosts made of network namespaces (issue 47; tests/ha/lab.py, no etcd): rctld on
c1, a relay rnoded on n1 (RelayNodes=n1), three relayed rnoded on n2-n4, batch jobs on the
relayed nodes, each recording its own runs. The relay is SIGKILLed while the jobs run and beat:
its nodes reach rctld straight within seconds, none is marked DOWN or NOT_RESPONDING, every job
completes exactly once and each node got its launch once. The relay restarted takes its link
again, the relayed rnoded restarted with SIGTERM go back through it, and the relay stopped with
SIGTERM under new jobs gives the same. A relay that forges (it
holds the cluster key, not the nodes') is refused frame by frame and changes nothing.

Run it under `flock /tmp/ranch-netns.lock` (it makes namespaces)."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from tests.ha.lab import Lab, ip_of, missing, python
from tests.ha.pair import wait

pytestmark = pytest.mark.skipif(bool(missing()), reason=missing() or "lab available")

PORT = 6817
CONF = """\
ClusterName=relays
SlurmctldHost=c1({c1})
SlurmctldPort={port}
AuthKeyFile={key}
HeartbeatInterval=1
SlurmdTimeout=5
MessageTimeout=3
ReturnToService=1
RelayNodes=n1
NodeName=n1 NodeAddr={n1} CPUs=1 RealMemory=64
NodeName=n2 NodeAddr={n2} CPUs=2 RealMemory=64
NodeName=n3 NodeAddr={n3} CPUs=2 RealMemory=64
NodeName=n4 NodeAddr={n4} CPUs=2 RealMemory=64
PartitionName=main Nodes=n[2-4] Default=YES
"""
RELAYED = ("n2", "n3", "n4")
JOBS = 6  # two per relayed node, all running when the relay dies


def _registered(log: str, node: str) -> list[str]:
    """The peers `node` registered from, in order."""
    return re.findall(rf'node registered node={node} peer="?([^" ]+(?: \(relay \w+\))?)', log)


def _forger_refused(lab: Lab, key: Path) -> None:
    """A relay holding the cluster key, on the client's host, forges n3's registration, n4's
    heartbeat and an admin's DOWN of n2 (tests/ha/relayforger.py): each is refused and its
    session closed, no reply is readable with the cluster key, and no node changes."""
    mark = len(lab.log("rctld"))
    done = lab.run("cl", [python(), "-m", "tests.ha.relayforger", f"{ip_of('c1')}:{PORT}",
                          str(key), "n3", "n4", "n2"])
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"gone": ["n2", "n3", "n4"], "readable": []}, seen
    wait(lambda: lab.log("rctld")[mark:].count("(relay forger)") >= 2
         and "relayed frame refused relay=forger" in lab.log("rctld")[mark:], 10,
         "the refusals logged")
    log = lab.log("rctld")[mark:]
    rejected = re.findall(r"frame rejected .*\(relay forger\)", log)
    assert len(rejected) == 2, log  # the Register and the Heartbeat: not their nodes' keys
    assert re.search(r"relayed frame refused relay=forger .*node=n2 .*UpdateNodes", log), log
    assert not re.findall(r"node=n[2-4] old=\S+ new=", log), log  # no node's state moved
    assert not re.findall(r"node registered node=n[2-4]", log), log


def _relay_lost(lab: Lab, env: dict[str, str], runs: Path, sig: int) -> float:
    """JOBS jobs on the relayed nodes; the relay stopped by `sig` while they run and beat: the
    nodes reach rctld straight within seconds, none is DOWN or NOT_RESPONDING, every job ends
    COMPLETED having run once, and each launch reached its node once. The seconds the nodes
    took to move."""
    settled = len(lab.log("rctld"))  # from here on, no node may be judged unresponsive
    ran_before = len(list(runs.iterdir()))
    jobs = []
    for _ in range(JOBS):
        done = lab.run("cl", [python(), "-m", "ranch.cli.rbatch", "-N1", "-n1",
                              "-o", str(runs.parent / "job%j.out"), "--wrap",
                              f"echo $SLURM_JOB_ID >> {runs}/$SLURM_JOB_ID.$SLURMD_NODENAME;"
                              " sleep 8"], env=env)
        assert done.returncode == 0, done.stderr
        jobs.append(int(done.stdout.split()[-1]))
    wait(lambda: lab.log("rctld")[settled:].count("job started") >= JOBS, 20,
         "every job running")
    wait(lambda: len(list(runs.iterdir())) >= ran_before + JOBS, 20,
         "every job's script started")
    assert all(_registered(lab.log("rctld"), h)[-1].endswith("(relay n1)") for h in RELAYED)

    t0 = time.time()
    lab.kill("n1", sig)
    wait(lambda: all(not _registered(lab.log("rctld"), h)[-1].endswith("(relay n1)")
                     for h in RELAYED), 15, "every relayed node back straight")
    moved = time.time() - t0
    wait(lambda: all(f"job ended job={j} state=COMPLETED" in lab.log("rctld") for j in jobs),
         40, "every job completed")
    log = lab.log("rctld")
    for h in RELAYED:
        changes = re.findall(rf"node={h} old=\S+ new=(\S+)", log[settled:])
        assert not [c for c in changes if "DOWN" in c or "NOT_RESPONDING" in c], (h, changes)
    for j in jobs:
        assert log.count(f"job started job={j} ") == 1, f"job {j} started more than once"
        assert log.count(f"job ended job={j} ") == 1
        (record,) = list(runs.glob(f"{j}.*"))
        assert record.read_text().split() == [str(j)], "each job ran exactly once"
    for h in RELAYED:  # each launch reached its node once, through the relay or not
        mine = [p.name for p in runs.iterdir() if p.name.endswith(f".{h}")]
        launched = re.findall(r"job (\d+) started: script pid", lab.log(h))
        assert sorted(launched) == sorted(p.split(".")[0] for p in mine), (h, launched)
    assert moved < 10, f"the nodes took {moved:.1f} s to move"
    return moved


def test_relay_killed_under_load(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    try:
        lab.up()
        conf, key = tmp_path / "cluster.conf", tmp_path / "ranch.key"
        conf.write_text(CONF.format(c1=ip_of("c1"), port=PORT, key=key, **{
            h: ip_of(h) for h in ("n1", "n2", "n3", "n4")}))
        from ranch.protocol.auth import create_key

        create_key(str(key))
        env = {"RANCH_CONF": str(conf), "RANCH_KEY_FILE": str(key)}
        lab.spawn("rctld", "c1", [python(), "-m", "ranch.ctld", "-f", str(conf),
                                  "--state-dir", str(tmp_path / "state"),
                                  "--key-file", str(key)])

        def node(host: str) -> None:
            lab.spawn(host, host, [python(), "-m", "ranch.noded", "--server",
                                   f"{ip_of('c1')}:{PORT}", "--name", host, "--key-file",
                                   str(key), "--spool-dir", str(tmp_path / "spool" / host)])

        node("n1")
        wait(lambda: "relay connected relay=n1" in lab.log("rctld"), 20, "the relay's link")
        for host in RELAYED:
            node(host)
        # each registers straight once (to be issued its credential), then moves to n1
        wait(lambda: all(any("(relay n1)" in p for p in _registered(lab.log("rctld"), h))
                         for h in RELAYED), 20, "every node through the relay")
        runs = tmp_path / "runs"
        runs.mkdir()
        killed = _relay_lost(lab, env, runs, signal.SIGKILL)

        # the relay comes back; each relayed node's rnoded restarted with SIGTERM (as an
        # upgrade does) goes back through it, from its cached config and credential, without a
        # straight registration; then the relay is stopped as a service is, under load again
        node("n1")
        wait(lambda: lab.log("rctld").count("relay connected relay=n1") >= 2, 20,
             "the relay's link again")
        for h in RELAYED:
            before = len(_registered(lab.log("rctld"), h))
            lab.kill(h, signal.SIGTERM)
            node(h)
            wait(lambda h=h, n=before: len(_registered(lab.log("rctld"), h)) > n, 20,
                 f"{h} back")
            assert all("(relay n1)" in p for p in _registered(lab.log("rctld"), h)[before:])
        stopped = _relay_lost(lab, env, runs, signal.SIGTERM)
        _forger_refused(lab, key)
        print(f"relayed nodes back straight {killed:.2f} s after the relay's SIGKILL, "
              f"{stopped:.2f} s after its SIGTERM")
    finally:
        lab.stop()
