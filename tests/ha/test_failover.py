"""A controller pair on etcd, on real hosts made of network namespaces (tests/ha/lab.py): three
etcd members, two rctld, two rnoded and a client, under a steady flow of submissions, cancels,
drains and resumes (tests/ha/flow.py). The leader is SIGKILLed, then cut off the network and
healed, then one etcd member is stopped. Each time: a standby serves, the deposed leader acts no
more, every acknowledged submission/cancel/drain is there, no job runs twice, no node is DOWN,
and the commands and rnoded found the new leader by themselves (they are given only the
config's SlurmctldHost list, or --server h1,h2)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.deadline import scaled
from tests.ha.held import Held
from tests.ha.lab import Lab, ip_of, missing, python
from tests.ha.pair import PORT, TAKEOVER_LIMIT, Pair, start, start_flow, stop_flow, wait

pytestmark = pytest.mark.skipif(bool(missing()), reason=missing() or "lab available")

@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    lab = Lab(Path(tmp_path_factory.mktemp("ha")))
    try:
        lab.up()
        p = start(lab)
        start_flow(p)
        yield p
    finally:
        if "p" in locals():
            stop_flow(p)
        lab.stop()


def _keep_flowing(p: Pair, seconds: float) -> None:
    n = sum(r["op"] == "submit" for r in p.acked())
    wait(lambda: sum(r["op"] == "submit" for r in p.acked()) >= n + 3, seconds,
         "more submissions")


def test_leader_killed(pair: Pair) -> None:
    """... with an rrun step of a batch job, a ralloc's step and an rrun's own allocation
    running through it (tests/ha/held.py)."""
    old = pair.leader()
    other = "c2" if old == "c1" else "c1"
    # a finished job that has left the leader's memory (MinJobAge) lives in its history alone
    purged = wait(lambda: [r["job"] for r in pair.acked() if r["op"] == "submit"
                           and r["job"] not in pair.jobs()], 60, "a job let go by the leader")
    held = Held(pair)
    held.start()
    t0 = time.time()
    pair.lab.kill(old)
    took = pair.check(t0)
    assert pair.leader() == other
    assert took <= scaled(TAKEOVER_LIMIT), f"takeover took {took:.1f} s"
    held.check()
    # the new leader serves the old one's job history and event log
    assert set(purged) <= set(pair.history()), purged
    done = pair.cli("rcontrol", "events", "--json")
    assert done.returncode == 0, done.stderr
    before = [e for e in json.loads(done.stdout)["events"] if e["time"] < t0]
    assert {e["node"] for e in before} >= {"n1", "n2", "n3"}, before[-5:]
    _keep_flowing(pair, 30)
    stood = pair.lab.log(old).count("standing by")  # its log goes on from run to run
    pair.start_ctld(old)  # back as the standby
    wait(lambda: pair.lab.log(old).count("standing by") > stood, 60, f"{old} to stand by")


def test_leader_cut_off_and_healed(pair: Pair) -> None:
    old = pair.leader()
    other = "c2" if old == "c1" else "c1"
    reigns = pair.reigns(other)
    # counted, not assumed: whether `old` stood by before depends on which tests ran first
    stood = pair.lab.log(old).count("standing by")
    t0 = time.time()
    pair.lab.partition(old)
    try:
        wait(lambda: pair.reigns(other) > reigns, 30, f"{other} to take the seat")
        # the cut-off leader stopped acting by itself, before the other could win
        assert "acting no more" in pair.lab.log(old)
        took = pair.check(t0)
    finally:
        pair.lab.heal(old)
    # commands time out on the cut host first (MessageTimeout), as Slurm's do: the seat itself
    # changes in ~5 s
    assert took <= scaled(TAKEOVER_LIMIT + 10), f"takeover took {took:.1f} s"
    wait(lambda: pair.lab.log(old).count("standing by") > stood, 60, f"{old} back as standby")
    assert pair.leader() == other
    # once healed, the deposed controller refuses work and names the leader
    done = pair.lab.run("cl", [python(), "-m", "ranch.cli.rbatch",
                               "--server", f"{ip_of(old)}:{PORT}",
                               "--wrap", "true"], env=pair.env)
    assert done.returncode != 0 and re.search(r"not the controller; the controller is c\d",
                                              done.stderr), done.stderr
    _keep_flowing(pair, 30)


def test_etcd_member_stopped(pair: Pair) -> None:
    leader = pair.leader()
    t0 = time.time()
    pair.lab.kill("etcd-e1")
    try:
        _keep_flowing(pair, 40)
        pair.check(t0)
        assert pair.leader() == leader, "an etcd member's loss must not move the seat"
    finally:
        pair.lab.start_etcd("e1")
    wait(pair.lab.etcd_healthy, 60, "etcd healthy again", interval=0.5)
    ping = pair.cli("rcontrol", "ping")
    assert ping.returncode == 0
    assert ping.stdout.splitlines() == ["Slurmctld(primary) at c1 is UP",
                                        "Slurmctld(backup) at c2 is UP"], ping.stdout


def test_takeover_on_purpose(pair: Pair) -> None:
    """rcontrol takeover, as for maintenance of the active host: the seat moves at once (the
    lease is revoked, no TTL to wait), with nothing lost; the old leader stands by."""
    old = pair.leader()
    other = "c2" if old == "c1" else "c1"
    reigns = pair.reigns(other)
    t0 = time.time()
    done = pair.cli("rcontrol", "takeover")
    assert done.returncode == 0 and done.stdout == "", done.stderr
    wait(lambda: pair.reigns(other) > reigns, 15, f"{other} to take the seat")
    took = pair.check(t0)
    assert took <= scaled(5.0), f"a takeover on purpose took {took:.1f} s"
    assert pair.leader() == other
    assert "takeover requested" in pair.lab.log(old)
