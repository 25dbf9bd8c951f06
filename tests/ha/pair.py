"""The controller pair on the namespace lab (tests/ha/lab.py), and what every scenario checks:
used by tests/ha/test_failover.py and bench/ha_bench.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import orjson

from tests.deadline import Deadline
from tests.ha.lab import ETCD_HOSTS, Lab, ip_of, python

PORT = 6817
CONF = """\
ClusterName=rha
SlurmctldHost=c1({c1})
SlurmctldHost=c2({c2})
SlurmctldPort={port}
StateStore={store}
EtcdEndpoints={endpoints}
AuthKeyFile={key}
HeartbeatInterval=1
MessageTimeout=3
MinJobAge=2
InactiveLimit=5
NodeName=n1 NodeAddr={n1} CPUs=1 RealMemory=64
NodeName=n2 NodeAddr={n2} CPUs=1 RealMemory=64
NodeName=n3 NodeAddr={n3} CPUs=2 RealMemory=64
NodeName=n4 NodeAddr={n4} CPUs=1 RealMemory=64
PartitionName=main Nodes=n1,n2 Default=YES
PartitionName=steps Nodes=n3,n4
"""
NODES = ("n1", "n2", "n3", "n4")
TAKEOVER_LIMIT = 10.0  # the goal with the default 5 s lease


def wait(pred, timeout: float, what: str, interval: float = 0.2):
    deadline = Deadline(timeout)  # stretched as the machine gets busier
    while not deadline.passed():
        got = pred()
        if got:
            return got
        time.sleep(interval)
    raise AssertionError(f"timed out after {deadline.elapsed():.1f} s waiting for {what}")


class Pair:
    """The lab with the cluster on it, and the checks every scenario makes."""

    def __init__(self, lab: Lab, store: str = "etcd") -> None:
        self.lab = lab
        d = lab.dir
        self.conf = d / "cluster.conf"
        self.key = d / "ranch.key"
        self.conf.write_text(CONF.format(c1=ip_of("c1"), c2=ip_of("c2"), port=PORT, store=store,
                                         endpoints=lab.endpoints(), key=self.key,
                                         n1=ip_of("n1"), n2=ip_of("n2"), n3=ip_of("n3"),
                                         n4=ip_of("n4")))
        from ranch.protocol.auth import create_key

        create_key(str(self.key))
        self.env = {"RANCH_CONF": str(self.conf), "RANCH_KEY_FILE": str(self.key)}
        self.acks = [d / "acks.0.jsonl"]  # one file per flow (start_flow)
        self.stop_flag = d / "stop"
        self.runs = d / "runs"

    def start_ctld(self, host: str) -> None:
        self.lab.spawn(host, host, [python(), "-m", "ranch.ctld", "-f", str(self.conf),
                                    "--name", host, "--state-dir", str(self.lab.dir / host),
                                    "--key-file", str(self.key)])

    def start_node(self, host: str) -> None:
        """n1 is given both controllers; the others only the first: they learn the pair from
        the config they are served (NodeSettings.controllers). n3 and n4 are the steps
        partition's (steps and allocations held across a takeover, out of the flow's way)."""
        servers = f"{ip_of('c1')}:{PORT}" + (f",{ip_of('c2')}:{PORT}" if host == "n1" else "")
        self.lab.spawn(host, host, [python(), "-m", "ranch.noded", "--server", servers,
                                    "--name", host, "--key-file", str(self.key),
                                    "--spool-dir", str(self.lab.dir / "spool" / host)])

    def cli(self, command: str, *argv: str, timeout: float = 40.0):
        return self.lab.run("cl", [python(), "-m", f"ranch.cli.{command}", *argv], env=self.env,
                            timeout=timeout)

    def leader(self) -> str:
        """The controller whose log says it serves (and has not lost the seat since)."""
        for host in ("c1", "c2"):
            log = self.lab.log(host)
            log = log[log.rfind("state store store=etcd"):]  # its latest start (a killed
            # run never wrote that it lost the seat)
            won = log.rfind("serving as the controller")
            if won >= 0 and log.rfind("acting no more") < won and host in self.lab.procs:
                return host
        return ""

    def reigns(self, host: str) -> int:
        return self.lab.log(host).count("serving as the controller")

    def nodes(self) -> dict[str, str]:
        done = self.cli("rinfo", "-N", "-h", "-o", "%N %t", timeout=20)
        if done.returncode != 0:
            return {}
        return dict(line.split() for line in done.stdout.splitlines() if line.strip())

    def jobs(self) -> dict[int, str]:
        done = self.cli("rqueue", "--json", "-t", "all")
        assert done.returncode == 0, done.stderr
        return {int(j["job_id"]): j["job_state"][0] if isinstance(j["job_state"], list)
                else j["job_state"] for j in json.loads(done.stdout)["jobs"]}

    def history(self) -> dict[int, str]:
        """racct's jobs and states (MinJobAge=2: most of the flow's jobs have left the
        controller's memory, so this is the job history, the old leader's included)."""
        done = self.cli("racct", "-X", "-P", "-n", "-o", "JobID,State", "-S", "2000-01-01")
        assert done.returncode == 0, done.stderr
        out = {}
        for row in done.stdout.split("\n"):
            job, _, state = row.partition("|")
            if job.isdigit():
                out[int(job)] = state.split()[0] if state else ""
        return out

    def acked(self, path: Path | None = None) -> list[dict]:
        """Every flow's acknowledged operations by time (or one flow's: `path`)."""
        out = []
        for f in [path] if path else self.acks:
            if f.exists():
                out += [orjson.loads(x) for x in f.read_bytes().splitlines() if x.strip()]
        return sorted(out, key=lambda r: r["t"])

    def paused(self) -> list[int]:
        return [sum(r["op"] == "paused" for r in self.acked(f)) for f in self.acks]

    def first_submit_after(self, t: float) -> float:
        """When the first submission whose request started after `t` was accepted (one in
        flight at `t` may have been the old controller's, or caught until its timeout)."""
        later = [r["t"] for r in self.acked() if r["op"] == "submit" and r.get("start", r["t"]) > t]
        return min(later) if later else 0.0

    def check(self, since: float) -> float:
        """The invariants, once the flow has gone on after a takeover; the takeover's time."""
        took = wait(lambda: self.first_submit_after(since), 60, "a submission accepted after "
                    "the fault")
        pause = Path(str(self.stop_flag) + ".pause")
        paused = self.paused()
        pause.touch()
        try:
            wait(lambda: all(a > b for a, b in zip(self.paused(), paused, strict=True)), 60,
                 "the flow to pause")
            self._check_still()
        finally:
            pause.unlink()
        return took - since

    def _check_still(self) -> None:
        records = self.acked()
        jobs = {**self.history(), **self.jobs()}  # those let go are in the history
        submitted = [r["job"] for r in records if r["op"] == "submit"]
        assert len(submitted) == len(set(submitted)), "a job id was acknowledged twice"
        lost = [j for j in submitted if j not in jobs]
        assert not lost, f"acknowledged submissions lost: {lost}"
        cancelled = [r["job"] for r in records if r["op"] == "cancel"]
        wrong = {j: jobs[j] for j in cancelled if jobs.get(j) != "CANCELLED"}
        assert not wrong, f"acknowledged cancels not kept: {wrong}"
        ran = [int(x) for x in self.runs.read_text().split()] if self.runs.exists() else []
        twice = sorted({j for j in ran if ran.count(j) > 1})
        assert not twice, f"jobs that ran twice: {twice}"
        # every node back with the new leader by itself, none DOWN; drains as acknowledged
        state = wait(lambda: (n := self.nodes()) and all("*" not in s for s in n.values())
                     and len(n) == len(NODES) and n, 40, "every node responding to the new "
                     "leader")
        assert not any(s.startswith("down") for s in state.values()), state
        # the last drain or resume acknowledged holds, unless one sent after it failed: its
        # reply may have been lost with the controller that had already made it durable
        ops = [r for r in records if r["op"] in ("node", "node-failed")]
        if ops and ops[-1]["op"] == "node":
            wants_drain = ops[-1]["state"] == "DRAIN"
            assert state["n2"].startswith("dr") == wants_drain, (ops[-1], state)

def start(lab: Lab, store: str = "etcd") -> Pair:
    """etcd's three members, c1 (then c2 standing by, with etcd), both nodes idle."""
    for h in ETCD_HOSTS:
        lab.start_etcd(h)
    wait(lab.etcd_healthy, 60, "etcd healthy", interval=0.5)
    p = Pair(lab, store)
    p.start_ctld("c1")
    if store == "etcd":
        wait(lambda: p.leader() == "c1", 60, "c1 to take the seat")
        p.start_ctld("c2")
        wait(lambda: "standing by" in lab.log("c2"), 60, "c2 to stand by")
    else:
        wait(lambda: p.cli("rcontrol", "ping").returncode == 0, 60, "c1 to serve")
    for n in NODES:
        p.start_node(n)
    wait(lambda: (s := p.nodes()) and len(s) == len(NODES)
         and all(v == "idle" for v in s.values()), 60, "every node idle")
    return p


def start_flow(p: Pair, probe: bool = False) -> None:
    """The flow of work; with `probe`, also a held submission started every 0.25 s (its own
    thread each), which tells when the new controller served to within that."""
    p.acks = [p.lab.dir / "acks.flow.jsonl"] + ([p.lab.dir / "acks.probe.jsonl"] if probe else [])
    for i, acks in enumerate(p.acks):
        p.lab.spawn(f"flow{i}", "cl", [python(), "tests/ha/flow.py", str(acks),
                                       str(p.stop_flag), str(p.runs),
                                       "drain" if i == 0 else "probe"], env=p.env)
    wait(lambda: sum(r["op"] == "submit" for r in p.acked()) >= 5, 60, "the flow to run")


def stop_flow(p: Pair) -> None:
    p.stop_flag.touch()
    for name in [n for n in p.lab.procs if n.startswith("flow")]:
        p.lab.kill(name, sig=15)
