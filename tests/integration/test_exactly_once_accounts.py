"""The exactly-once fault test (test_exactly_once.py) with the accounting tree (issue 43):
racctmgr changes (accounts, users, QOS, their limits and shares) and jobs charged to the
accounts flow while rctld is SIGKILLed at random moments, some in the middle of a change.
After each restart the tree is what the acknowledged changes made (a change whose reply never
came may have landed or not, whole), and usage never goes back below what was read before a
change was acknowledged (that change's journal record holds the usage whole with the tree and
its last decay time), nor beyond what the jobs ran (a lost decay time would charge a job's run
twice). PriorityDecayHalfLife=0: usage only grows."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

from ranch.protocol import messages as m

from .cluster import Cluster, free_port
from .test_exactly_once import records

CONF = """\
ClusterName=once
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=15
MessageTimeout=2
KillWait=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageEnforce=associations
PriorityDecayHalfLife=0
PriorityUsageResetPeriod=MONTHLY
NodeName=n[1-2] CPUs=2 RealMemory=64
PartitionName=main Nodes=n[1-2] Default=YES
"""
SHOWS = (("show", "assoc", "format=account,parentname,user,share,qos,defaultqos,maxjobs,grpjobs"),
         ("show", "qos", "format=name,priority,maxwall,maxjobspu"),
         ("show", "user", "format=user,defaultaccount"))


def acctmgr(c: Cluster, words: tuple[str, ...], timeout: float = 5) -> m.AcctmgrReply:
    reply = c.request(m.AcctmgrRequest(words, ("immediate",) if words[0] != "show" else
                                       ("noheader", "parsable2")), timeout=timeout)
    assert isinstance(reply, m.AcctmgrReply), reply
    return reply


def tree(c: Cluster) -> list[str]:
    return [acctmgr(c, words).out for words in SHOWS]


def model(done: list[tuple[str, ...]]) -> list[str]:
    """The show lines of a tree that took `done`, in order, in-process (the same function
    rctld answers with, over a fresh tree)."""
    from ranch.assoc.db import AcctDb
    from ranch.cli.acctmgr_session import respond

    db = AcctDb.fresh().add_cluster("once")
    for words in done:
        reply = respond(["-i", *words], db, None, known_user=lambda n: n in ("root", "alice",
                                                                             "bob"))
        assert reply.rc == 0, (words, reply.err)
        db = reply.db
    return [respond(["-n", "-P", *w], db, None, known_user=lambda n: True).out
            for w in SHOWS]


def usage(c: Cluster) -> dict[tuple[str, str], float]:
    reply = c.request(m.ShareRequest(), timeout=5)
    assert isinstance(reply, m.ShareReply), reply
    return {(ln.account, ln.user): ln.raw_usage for ln in reply.lines}


def change(rng: random.Random, n: int, accounts: list[str],
           members: set[tuple[str, str]]) -> tuple[str, ...]:
    """One racctmgr change the tree accepts and that changes it (`n`: a number not used
    before, so no value is set twice)."""
    kind = rng.randrange(5)
    free = [(u, a) for u in ("root", "alice", "bob") for a in accounts[1:]
            if (u, a) not in members]
    if kind == 0 or len(accounts) < 3:
        name = f"a{n}"
        accounts.append(name)
        return ("add", "account", name, f"parent={rng.choice(accounts[:-1])}")
    if kind == 1 and free:
        user, account = rng.choice(free)
        members.add((user, account))
        return ("add", "user", user, f"account={account}")
    if kind == 2:
        return ("modify", "account", rng.choice(accounts[1:]), "set", f"fairshare={n}",
                f"grpjobs={n + 100}")
    if kind == 3:
        return ("add", "qos", f"q{n}", f"priority={n}")
    return ("modify", "qos", "normal", "set", f"priority={n}", f"maxjobspu={n + 100}")


def test_tree_and_usage_survive_kills(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("RANCH_ONCE_SEED", "43")))
    port = free_port()
    c = Cluster(tmp_path, ["n1", "n2"], conf_text=CONF.format(port=port))
    c.port, c.addr = port, ("127.0.0.1", port)
    with c:
        c.start()
        accounts = ["root"]
        members = {("root", "a0")}
        done: list[tuple[str, ...]] = []
        for words in (("add", "account", "a0"), ("add", "user", "root", "account=a0")):
            assert acctmgr(c, words).rc == 0
            done.append(words)
        accounts.append("a0")
        floor: dict[tuple[str, str], float] = {}
        jobs: list[int] = []
        kills = lost = 0
        deadline = time.monotonic() + 25
        n = 1
        while time.monotonic() < deadline:
            account = rng.choice(accounts[1:])
            msg = m.SubmitJob(script=f"#!/bin/sh\nsleep {rng.choice((0.5, 1, 2))}\n",
                              user="root", uid=0, gid=0, workdir=str(tmp_path),
                              stdout="/dev/null", account=account)
            reply = c.request(msg, timeout=5)
            if isinstance(reply, m.SubmitReply):  # refused only if `account` has no root
                jobs.append(reply.job_id)
            seen = usage(c)
            words = change(rng, n, accounts, members)
            n += 1
            if rng.random() < 0.35:  # killed while the change is on its way
                got: list = []
                t = threading.Thread(target=lambda w=words, out=got: out.append(_try(c, w)))
                t.start()
                time.sleep(rng.uniform(0, 0.03))
                c.kill_ctld()
                kills += 1
                t.join()
                c.start_ctld()
                now = tree(c)
                if got and got[0] is not None and got[0].rc == 0:
                    done.append(words)  # acknowledged: it must be there
                    _raise(floor, seen)
                elif now == model([*done, words]):
                    done.append(words)  # it landed before the kill, unanswered
                else:  # it never landed: what it would have made is not there
                    lost += 1
                    if words[:2] == ("add", "account"):
                        accounts.remove(words[2])
                    members.discard((words[2], words[3].removeprefix("account=")))
                assert now == model(done), f"after a kill during {words}"
            else:
                assert acctmgr(c, words).rc == 0, words
                done.append(words)
                _raise(floor, seen)  # that change's journal record holds `seen` or more
                if rng.random() < 0.3:
                    c.kill_ctld()
                    kills += 1
                    c.start_ctld()
                    assert tree(c) == model(done), "after a kill between changes"
            got_usage = usage(c)
            low = {k: (v, got_usage.get(k, 0.0)) for k, v in floor.items()
                   if got_usage.get(k, 0.0) < v - 1e-6}
            assert low == {}, f"usage went back below a journaled figure: {low}"
        assert kills >= 5 and len(jobs) >= 10, (kills, lost, len(jobs))
        assert max(floor.values()) > 0  # usage was read, journaled and checked
        assert tree(c) == model(done)
        # no run charged twice: each account's root user at most the CPU-seconds its jobs ran
        recs = records(c)
        ran: dict[str, float] = {}
        for j in jobs:
            r = recs.get(j) or {}
            if r.get("start_time"):
                end = r.get("end_time") or time.time()
                # a requeued job's earlier runs (a launch lost to a kill counts as one, as in
                # Slurm: it was RUNNING until its node said it had no such job) lay between
                # its submission and its last start; the record keeps only the last run
                held = end - (r["submit_time"] if r.get("restarts") else r["start_time"])
                ran[r["account"]] = ran.get(r["account"], 0.0) + held * (r.get("cpus") or 1)
        final = usage(c)
        over = {a: (final.get((a, "root"), 0.0), s) for a, s in ran.items()
                if final.get((a, "root"), 0.0) > s * 1.05 + 2}
        assert over == {}, f"usage beyond what the jobs ran (charged twice?): {over}"
        assert sum(final.get((a, "root"), 0.0) for a in ran) > 0  # something was charged


def _try(c: Cluster, words: tuple[str, ...]) -> m.AcctmgrReply | None:
    try:
        return acctmgr(c, words, timeout=3)
    except Exception:  # the connection died with rctld: no answer
        return None


def _raise(floor: dict[tuple[str, str], float], seen: dict[tuple[str, str], float]) -> None:
    for k, v in seen.items():
        floor[k] = max(floor.get(k, 0.0), v)
