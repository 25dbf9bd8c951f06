"""Reads off the leader (issue 47) on the namespace lab: with SlurmctldParameters=standby_read_ms,
the standby answers listings from its copy of the state read from etcd while held submissions
flow (tests/ha/flow.py's probe), the leader is SIGKILLed, the standby takes the seat, and the
old leader comes back as a standby following the new one. A poller asks both controllers all
along (tests/ha/readpoll.py), and every reply is held to the truth: each submission the leader
acknowledged before (the reply's send time - the age it states) is in it."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from tests.deadline import scaled
from tests.ha.lab import ETCD_HOSTS, Lab, ip_of, missing, python
from tests.ha.pair import PORT, TAKEOVER_LIMIT, Pair, wait

pytestmark = pytest.mark.skipif(bool(missing()), reason=missing() or "lab available")

BOUND_MS = 1000


def _replies(path: Path) -> list[dict]:
    if not path.exists():
        return []
    # the poller may be mid-line: only lines it has ended are read
    return [orjson.loads(x) for x in path.read_bytes().split(b"\n")[:-1] if x.strip()]


def _served_by_standby(replies: list[dict], host: str, after: float = 0.0) -> list[dict]:
    return [r for r in replies if r["host"] == ip_of(host) and r["got"] == "JobList"
            and r["age"] > 0 and r["sent"] > after]


@pytest.fixture
def pair(tmp_path):
    lab = Lab(tmp_path)
    try:
        lab.up()
        for h in ETCD_HOSTS:
            lab.start_etcd(h)
        wait(lab.etcd_healthy, 60, "etcd healthy", interval=0.5)
        p = Pair(lab)
        p.conf.write_text(p.conf.read_text()
                          + f"SlurmctldParameters=standby_read_ms={BOUND_MS}\n")
        p.start_ctld("c1")
        wait(lambda: p.leader() == "c1", 60, "c1 to take the seat")
        p.start_ctld("c2")
        wait(lambda: "standing by" in lab.log("c2"), 60, "c2 to stand by")
        yield p
    finally:
        if "p" in locals():
            p.stop_flag.touch()
        lab.stop()


def test_a_standby_never_shows_a_state_older_than_it_says(pair: Pair) -> None:
    lab = pair.lab
    acks, polls = lab.dir / "acks.jsonl", lab.dir / "polls.jsonl"
    lab.spawn("flow", "cl", [python(), "tests/ha/flow.py", str(acks), str(pair.stop_flag),
                             str(pair.runs), "probe"], env=pair.env)
    lab.spawn("poll", "cl", [python(), "tests/ha/readpoll.py", str(polls), str(pair.stop_flag),
                             str(pair.key), f"{ip_of('c1')}:{PORT}", f"{ip_of('c2')}:{PORT}"])
    wait(lambda: len([r for r in _served_by_standby(_replies(polls), "c2") if r["jobs"]]) >= 20,
         60, "c2 to serve listings with jobs as a standby")
    # rqueue through the config (standby_read_ms: the standby c2 asked first) is answered
    done = pair.cli("rqueue", "-h", "-o", "%i")
    assert done.returncode == 0 and done.stdout.split(), done.stderr

    t_kill = time.time()
    lab.kill("c1")
    wait(lambda: pair.leader() == "c2", scaled(TAKEOVER_LIMIT + 10), "c2 to take the seat")
    t_won = time.time()
    wait(lambda: sum(r["op"] == "submit" and r["t"] > t_won for r in pair.acked(acks)) >= 5,
         60, "submissions to the new leader")
    pair.start_ctld("c1")  # back as a standby: it follows c2's writes
    wait(lambda: len(_served_by_standby(_replies(polls), "c1", t_won)) >= 20, 60,
         "c1 to serve listings as a standby of c2")
    t_back = time.time()
    wait(lambda: any(r["op"] == "submit" and r["t"] > t_back + 1 for r in pair.acked(acks)),
         60, "a submission after c1 came back")
    t_mark = time.time()
    newest = max(j for t, j in ((r["t"], r["job"]) for r in pair.acked(acks)
                               if r["op"] == "submit") if t <= t_mark)
    # c1's copy must come to show what was acknowledged by t_mark
    wait(lambda: any(newest in r["jobs"] for r in _served_by_standby(_replies(polls), "c1",
                                                                      t_mark)),
         30, "c1 as a standby to show what c2 acknowledged")
    pair.stop_flag.touch()
    lab.kill("poll", sig=15)
    lab.kill("flow", sig=15)

    submitted = [(r["t"], r["job"]) for r in pair.acked(acks) if r["op"] == "submit"]
    replies = _replies(polls)
    checked = 0
    for r in replies:
        if r["got"] != "JobList":
            assert r["got"] == "unreachable" or r["code"] == "standby", r
            continue
        assert r["age"] <= BOUND_MS / 1000, r
        as_of = r["sent"] - r["age"]
        missing_jobs = [j for t, j in submitted if t <= as_of and j not in set(r["jobs"])]
        assert not missing_jobs, (f"a reply stating age {r['age']:.3f} s misses jobs acknowledged "
                                  f"before {as_of:.3f}: {missing_jobs[:5]}", r["host"])
        checked += 1
    # served by the standby c2 while c1 was dead and before c2 won, and by c1 following c2
    during = _served_by_standby(replies, "c2", t_kill)
    assert [r for r in during if r["received"] < t_won], "c2 served nothing during the takeover"
    assert checked >= 100, checked
    ages = sorted(r["age"] for r in replies if r["got"] == "JobList" and r["age"] > 0)
    print(f"replies {len(replies)}, checked {checked}, by a standby {len(ages)} (age p50 "
          f"{ages[len(ages) // 2]:.3f} s, max {ages[-1]:.3f} s), refused "
          f"{sum(r.get('code') == 'standby' for r in replies)}, takeover "
          f"{t_won - t_kill:.1f} s")
