"""What the accounting store costs rctld (issue 43): submission CPU with enforcement on vs off at
100 accounts x 1,000 users, and one usage recompute (PriorityCalcPeriod) at 10,000 running jobs.

Submission: a real rctld alone (no node daemons: held jobs need none), twice per round,
interleaved: "off" (no AccountingStorageType: today's behaviour) and "on"
(AccountingStorageType=accounting_storage/slurmdbd, AccountingStorageEnforce=associations,
limits,qos, the tree of --accounts accounts and --users users, each user in one account, loaded
with racctmgr before timing). One client submits --jobs held jobs over the protocol, each as a
user of the tree with its account (a connection a submission, as rbatch makes); rctld's user +
system CPU is read from /proc before and after. Goal: on at most +10 % over off.

Recompute: in-process, the same tree and --running jobs spread over its users: the pure
accrual (assoc/usage.py accrue, decay and every job's charge up its chain) and the owner's whole
period (ctld/accounts/store.py Accounts.accrue: accrual, the journal record of the tree and its
usage, the page's usage sample). Goal: under 100 ms.

    .venv/bin/python bench/acct_enforce_bench.py [--jobs 2000] [--rounds 3] [--running 10000]

Prints; asserts nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ranch.protocol import messages as m  # noqa: E402
from ranch.protocol.auth import create_key, load_key  # noqa: E402
from ranch.protocol.typedclient import request  # noqa: E402
from tests.integration.cluster import free_port  # noqa: E402

CONF = """\
ClusterName=bench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
AuthKeyFile={key}
HeartbeatInterval=1
SlurmdTimeout=30
MaxJobCount=200000
{accounting}NodeName=n[1-4] CPUs=8 RealMemory=8000
PartitionName=main Nodes=n[1-4] Default=YES
"""
ON = ("AccountingStorageType=accounting_storage/slurmdbd\n"
      "AccountingStorageEnforce=associations,limits,qos\n")


def tree_lines(accounts: int, users: int) -> list[tuple[str, ...]]:
    """racctmgr's lines for the tree: the accounts, then each account's users."""
    names = [f"acct{i}" for i in range(accounts)]
    lines = [("add", "account", ",".join(names))]
    for i, name in enumerate(names):
        members = [f"user{u}" for u in range(users) if u % accounts == i]
        if members:
            lines.append(("add", "user", ",".join(members), f"account={name}"))
    return lines


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def submissions(label: str, args: argparse.Namespace) -> float:
    """rctld's CPU ms per held submission, accounting `label` ("on" or "off")."""
    work = Path(tempfile.mkdtemp(prefix=f"acct-enforce-{label}-"))
    port = free_port()
    key_file = work / "ranch.key"
    key = create_key(str(key_file))
    conf = work / "cluster.conf"
    conf.write_text(CONF.format(port=port, key=key_file, accounting=ON if label == "on" else ""))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RANCH_"))}
    env["PYTHONPATH"] = str(ROOT)
    addr = ("127.0.0.1", port)
    with open(work / "rctld.log", "ab") as log:
        ctld = subprocess.Popen([sys.executable, "-m", "ranch.ctld", "-f", str(conf),
                                 "--state-dir", str(work / "state")], cwd=work, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        key = load_key(str(key_file))
        deadline = time.monotonic() + 30
        while True:
            try:
                request(addr, key, m.Ping(), timeout=2)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError((work / "rctld.log").read_text()[-2000:]) from None
                time.sleep(0.2)
        if label == "on":
            for words in tree_lines(args.accounts, args.users):
                reply = request(addr, key, m.AcctmgrRequest(words, ("immediate",)), timeout=60)
                assert isinstance(reply, m.AcctmgrReply) and reply.rc == 0, (words, reply)
        time.sleep(0.5)
        before, t0 = proc_cpu(ctld.pid), time.perf_counter()
        for i in range(args.jobs):
            user = i % args.users
            msg = m.SubmitJob("#!/bin/sh\ntrue\n", f"user{user}", 10000 + user, 10000,
                              str(work), name="bench", stdout="/dev/null", hold=True,
                              account=f"acct{user % args.accounts}")
            reply = request(addr, key, msg, timeout=30)
            assert isinstance(reply, m.SubmitReply), reply
        wall = time.perf_counter() - t0
        cpu = (proc_cpu(ctld.pid) - before) / args.jobs * 1000
        print(f"  {label}: {args.jobs / wall:.0f} submissions/s, rctld {cpu:.3f} ms CPU each, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        return cpu
    finally:
        ctld.send_signal(signal.SIGTERM)
        try:
            ctld.wait(30)
        except subprocess.TimeoutExpired:
            ctld.kill()
            ctld.wait()
        shutil.rmtree(work, ignore_errors=True)


def recompute(args: argparse.Namespace) -> None:
    """One calc period over --running jobs: pure accrual and the owner's whole period."""
    from ranch.assoc import usage
    from ranch.assoc.db import AcctDb
    from ranch.assoc.usage import RunningJob, Usage, UsageSettings
    from ranch.cli.acctmgr_session import respond
    from ranch.ctld.accounts.store import Accounts

    db = AcctDb.fresh().add_cluster("bench")
    for words in tree_lines(args.accounts, args.users):
        db = respond(["-i", *words], db, None, known_user=lambda n: True).db
    now = time.time()
    jobs = [RunningJob(f"user{i % args.users}", f"acct{(i % args.users) % args.accounts}",
                       "main", "normal", (("cpu", 4.0), ("mem", 8000.0), ("node", 1.0),
                                          ("gres/gpu", 0.0)), now - 3600 - i % 600,
                       math.inf, (), now + 3600) for i in range(args.running)]
    settings = UsageSettings()
    base = usage.accrue(Usage(), db, "bench", settings, jobs, now - 300)  # marks the time
    pure = []
    for r in range(args.repeat):
        t0 = time.perf_counter()
        got = usage.accrue(base, db, "bench", settings, jobs, now + r)
        pure.append((time.perf_counter() - t0) * 1000)
    assert got.assocs

    class Changes:
        def accounts_changed(self, record: dict) -> None:
            self.record = record

    owner = Accounts(cluster="bench", enabled=True, changes=Changes(), running=lambda: jobs)
    owner.db, owner.usage = db, base
    whole = []
    for r in range(args.repeat):
        owner.wall = lambda r=r: now + 1 + r
        t0 = time.perf_counter()
        owner.accrue()
        whole.append((time.perf_counter() - t0) * 1000)
    # enforcement's own share of a submission, in-process: what `on` adds to each
    flags = ("associations", "limits", "qos")
    t0 = time.perf_counter()
    for i in range(args.jobs):
        user = i % args.users
        got_admit = owner.admit(flags, f"user{user}", f"acct{user % args.accounts}", ("main",),
                                "", "", 1)
        assert isinstance(got_admit, tuple), got_admit
    admit_ms = (time.perf_counter() - t0) / args.jobs * 1000
    print(f"enforcement at submission (Accounts.admit, in-process): {admit_ms:.3f} ms each")
    print(f"usage recompute, {args.running:,} running jobs, {len(db.assocs):,} associations "
          f"({args.accounts} accounts x {args.users:,} users), median of {args.repeat}:")
    print(f"  accrual alone (assoc/usage.py accrue): {statistics.median(pure):.1f} ms "
          f"(best {min(pure):.1f})")
    print(f"  the owner's period (accrue + journal record + sample): "
          f"{statistics.median(whole):.1f} ms (best {min(whole):.1f})", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--accounts", type=int, default=100)
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--running", type=int, default=10000)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--only", choices=("submit", "recompute"))
    args = p.parse_args(argv)
    if args.only != "submit":
        recompute(args)
    if args.only == "recompute":
        return 0
    got: dict[str, list[float]] = {"off": [], "on": []}
    for rnd in range(args.rounds):
        print(f"round {rnd + 1}", flush=True)
        for label in ("off", "on"):
            got[label].append(submissions(label, args))
    off, on = statistics.median(got["off"]), statistics.median(got["on"])
    print(f"\nsubmission, {args.jobs:,} held jobs a run, medians of {args.rounds} rounds: "
          f"off {off:.3f} ms, on {on:.3f} ms of rctld CPU each: {100 * (on - off) / off:+.1f} % "
          "(goal: at most +10 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
