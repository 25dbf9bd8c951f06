"""docs/admin-guide.md on real hosts: install, upgrade and restart a cluster under running jobs.

Hosts are network namespaces on one bridge (tests/deploy/hosts.py): `ctl` runs rctld, `n1` and
`n2` run rnoded, `login` runs the commands. Each runs Ranch installed from a wheel into its own
venv, as a service would (foreground, its config named by RANCH_CONF in a per-host etc/ranch);
never this source tree. The cluster starts on the previous release (RELEASES: 0.1.0, built from
`git archive`), then follows the guide's upgrade: the controller first (on the old release's
state directory), then the login host; jobs and steps from there with no controller address in
its environment; then each node's rnoded upgraded and restarted one by one while jobs run on
them (the restart with a step running there, which rrun follows across it); then rctld
restarted by SIGTERM and by SIGKILL. Every job's script records each run it starts:
0 requeued, 0 run twice, 0 node DOWN, every job done once.

Stopping rnoded by SIGTERM without touching its jobs is the `svc` branch's work (issue 31); before
it, SIGTERM DOWNs the node and requeues its job, and this test fails there as it should (with
svc merged it passed: 59 s, install included).
RANCH_DEPLOY_NODE_STOP=KILL runs the same steps with SIGKILL (which already keeps jobs), to check
the harness on its own.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from hosts import (
    Lab,
    export_tree,
    finish_wheel_build,
    install,
    start_wheel_build,
    wait_for,
    why_not,
)
from releases import commit_present, current, previous

PORT = 6817
PORTS = (60001, 60100)  # SrunPortRange: what the submit host's firewall opens for rrun
HOSTS = {"ctl": 1, "n1": 11, "n2": 12, "login": 20}
NODES = ("n1", "n2")
CPUS = min(2, len(os.sched_getaffinity(0)))
# The guide's cluster.conf; {root} is each host's "/" (every host has its own copy).
CLUSTER_CONF = """\
ClusterName=deploy
SlurmctldHost=ctl({ctl})
SlurmctldPort={port}
AuthKeyFile={root}/etc/ranch/ranch.key
StateSaveLocation={root}/var/lib/ranch
SrunPortRange={ports[0]}-{ports[1]}
HeartbeatInterval=2
NodeName=n1 NodeAddr={n1} CPUs={cpus} RealMemory=100
NodeName=n2 NodeAddr={n2} CPUs={cpus} RealMemory=100
PartitionName=main Nodes=n[1-2] Default=YES MaxTime=INFINITE
"""
# Each run appends a line to runs/JOBID; the job ends once the test creates `release`.
JOB = """\
#!/bin/sh
echo "$SLURM_JOB_ID $SLURMD_NODENAME $$" >> {work}/runs/$SLURM_JOB_ID
while [ ! -e {work}/release ]; do sleep 0.2; done
"""

why = why_not()
pytestmark = [pytest.mark.deploy, pytest.mark.skipif(why is not None, reason=why or "")]


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(previous release's venv, this tree's venv), each installed from its own wheel."""
    version, commit = previous()
    if not commit_present(commit):
        pytest.skip(f"release {version} ({commit}) is not in this clone: no upgrade to test")
    base = tmp_path_factory.mktemp("install")
    builds = {}
    for label, commit_or_none in (("old", commit), ("new", None)):
        tree = export_tree(base / f"src-{label}", commit_or_none)
        builds[label] = (start_wheel_build(tree, base / f"wheel-{label}"), base / f"wheel-{label}")
    wheels = {label: finish_wheel_build(*b) for label, b in builds.items()}
    assert wheels["old"].name.startswith(f"ranch-{version}-")
    assert wheels["new"].name.startswith(f"ranch-{current()}-")
    old, new = install((wheels["old"], base / "venv-old"), (wheels["new"], base / "venv-new"))
    return old, new


@pytest.fixture
def lab(tmp_path: Path):
    lab = Lab(tmp_path, HOSTS)
    lab.up()
    try:
        yield lab
    finally:
        lab.down()


class Cluster:
    """The steps of the guide, and what the login host sees."""

    def __init__(self, lab: Lab, old: Path, new: Path) -> None:
        self.lab, self.old, self.new = lab, old, new
        self.login = lab["login"]
        # The login host's release: the old one until the controller is upgraded (a newer
        # command may speak a protocol version the older controller refuses).
        self.commands = old
        self.work = self.login.root / "work"  # the users' shared folder (one filesystem here)
        (self.work / "runs").mkdir()
        self.node_stop = signal.SIGKILL if os.environ.get("RANCH_DEPLOY_NODE_STOP") == "KILL" \
            else signal.SIGTERM

    # -- set-up ---------------------------------------------------------------------------

    def write_configs(self) -> None:
        addrs = {name: self.lab[name].addr for name in HOSTS}
        for h in self.lab.hosts.values():
            h.conf.write_text(CLUSTER_CONF.format(root=h.root, port=PORT, ports=PORTS,
                                                  cpus=CPUS, **addrs))

    def distribute_key(self) -> None:
        """The key rctld made on its first start, copied to every other host, owner-only."""
        key = (self.lab["ctl"].etc / "ranch.key").read_bytes()
        for h in self.lab.hosts.values():
            if h.name != "ctl":
                target = h.etc / "ranch.key"
                target.write_bytes(key)
                target.chmod(0o600)

    def start_rctld(self, venv: Path) -> None:
        """rctld as its unit starts it; it answers the login host once that has the key."""
        ctl = self.lab["ctl"]
        ctl.start("rctld", venv, "rctld", "-f", str(ctl.conf))
        wait_for("rctld made its key", (ctl.etc / "ranch.key").exists)
        if (self.login.etc / "ranch.key").exists():
            self.wait_rctld()

    def wait_rctld(self) -> None:
        def ping() -> bool:
            done = self.login.run(self.commands, "rcontrol", "ping", check=False)
            assert done.returncode == 0, f"{done.stderr}\nrctld's log ends:\n" + \
                self.lab["ctl"].log("rctld")[-1500:]
            return True

        wait_for("rctld answers the login host", ping)

    def start_rnoded(self, name: str, venv: Path) -> None:
        h = self.lab[name]
        h.start("rnoded", venv, "rnoded", "--server", f"{self.lab['ctl'].addr}:{PORT}",
                "--name", name, "--key-file", str(h.etc / "ranch.key"),
                "--spool-dir", str(h.root / "var/spool/ranch" / name))

    # -- what the login host sees -----------------------------------------------------------

    def cmd(self, *argv: str, check: bool = True):
        return self.login.run(self.commands, *argv, check=check)

    def node_states(self) -> dict[str, str]:
        out = self.cmd("rinfo", "-N", "-h", "-o", "%N %t").stdout.split()
        return dict(zip(out[::2], out[1::2], strict=True))

    def node(self, name: str) -> dict[str, str]:
        return _fields(self.cmd("rcontrol", "show", "node", name).stdout)

    def job(self, job_id: int) -> dict[str, str]:
        return _fields(self.cmd("rcontrol", "show", "job", str(job_id)).stdout)

    def events(self) -> list[dict]:
        return json.loads(self.cmd("rcontrol", "events", "--json").stdout)["events"]

    def registrations(self, name: str) -> int:
        return sum(1 for e in self.events() if e.get("kind") == "registered"
                   and e.get("node") == name)

    def runs(self, job_id: int) -> list[str]:
        path = self.work / "runs" / str(job_id)
        return path.read_text().splitlines() if path.exists() else []

    def submit(self, node: str) -> int:
        script = self.work / "job.sh"
        script.write_text(JOB.format(work=self.work))
        out = self.cmd("rbatch", "--parsable", "-w", node, "-n1", "--mem", "10",
                       "-o", str(self.work / "slurm-%j.out"), str(script)).stdout
        return int(out.strip())

    def step_across(self, node: str, job_id: int):
        """A step in the node's held job (rrun from the login host), its task waiting for
        `go-NODE` between its two lines."""
        gate = self.work / f"go-{node}"
        proc = self.login.start(f"step-{node}", self.commands, "rrun", "--jobid", str(job_id),
                                "--overlap", "-w", node, "-N1", "-n1", "sh", "-c",
                                f"echo before; while [ ! -e {gate} ]; do sleep 0.1; done; "
                                "echo after; exit 3")
        wait_for(f"the step on {node} started",
                 lambda: "before" in self.login.log(f"step-{node}"))
        return proc

    def check_step_across(self, node: str, job_id: int, proc) -> None:
        label = f"step-{node}"
        try:
            rc = proc.wait(60)
        finally:
            self.login.procs.pop(label, None)
        out = self.login.log(label)
        assert rc == 3, out
        assert out.splitlines()[:2] == ["before", "after"], out
        assert f"error: {node}: task 0: Exited with exit code 3" in out, out
        wait_for(f"the step across {node}'s restart recorded", lambda: f"{job_id}.0|FAILED|3:0"
                 in self.cmd("racct", "-j", str(job_id), "-n", "-P", "-o",
                             "JobID,State,ExitCode").stdout.split())

    # -- the checks ------------------------------------------------------------------------

    def all_responding(self) -> dict[str, str]:
        states = self.node_states()
        ok = all(s in ("idle", "mix", "alloc") for s in states.values())
        assert ok and set(states) == set(NODES), f"node states {states}"
        return states

    def check_jobs(self, jobs: dict[str, int], step: str) -> None:
        """Every held job still RUNNING on its node, started once, never requeued."""
        for node, job_id in jobs.items():
            info = self.job(job_id)
            assert info["JobState"] == "RUNNING", f"{step}: job {job_id}: {info}"
            assert info["NodeList"] == node and info["Restarts"] == "0", f"{step}: {info}"
            assert len(self.runs(job_id)) == 1, f"{step}: job {job_id} ran {self.runs(job_id)}"

    def downs(self) -> list[dict]:
        return [e for e in self.events() if e.get("kind") == "state" and
                "DOWN" in str(e.get("new", ""))]


def _fields(text: str) -> dict[str, str]:
    """Key=Value words of `rcontrol show` (values without blanks are enough here)."""
    out = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep and key not in out:
            out[key] = value
    return out


def test_install_upgrade_restart_under_running_jobs(venvs: tuple[Path, Path], lab: Lab) -> None:
    old, new = venvs
    t0 = time.monotonic()
    c = Cluster(lab, old, new)
    # 0.1.0 installed its packages at the top level; 0.2.0 has one package, ranch
    for venv, module in ((old, "ctld"), (new, "ranch.ctld")):
        where = lab["login"].run(venv, "python", "-c",
                                 f"import {module} as m; print(m.__file__)")
        assert where.stdout.startswith(str(venv)), f"not the installed wheel: {where.stdout}"

    # 1. The previous release, installed as the guide says: config everywhere, rctld (which
    #    makes the key on its first start), the key copied to every host, rnoded on the nodes.
    c.write_configs()
    c.start_rctld(old)
    c.distribute_key()
    c.wait_rctld()
    for name in NODES:
        c.start_rnoded(name, old)
    wait_for("both nodes idle under 0.1.0", lambda: c.node_states() == dict.fromkeys(NODES, "idle"))
    assert {c.node(n)["Version"] for n in NODES} == {previous()[0]}
    jobs = {name: c.submit(name) for name in NODES}  # they run until the test ends them
    wait_for("jobs running", lambda: all(c.runs(j) for j in jobs.values()))
    c.check_jobs(jobs, "started under 0.1.0")

    # 2. Upgrade the controller first, on the state directory the old one saved; then the
    #    login host.
    assert lab["ctl"].stop("rctld", signal.SIGTERM) == 0, lab["ctl"].log("rctld")
    c.start_rctld(new)
    c.commands = new
    assert c.cmd("rcontrol", "ping").stdout.strip().endswith(" is UP")
    wait_for("old nodes back with the new controller", c.all_responding)
    c.check_jobs(jobs, "controller upgraded")

    # 3. Jobs and steps from the login host: RANCH_CONF only, no address in the environment.
    env = lab["login"].env(new)
    assert not any(k in env for k in ("RANCH_SERVER", "RANCH_KEY_FILE", "SLURM_CONF"))
    step = c.cmd("rrun", "-N2", "-n2", "--mem", "10", "-l", "sh", "-c",
                 "echo $SLURMD_NODENAME").stdout
    assert sorted(step.split()) == ["0:", "1:", "n1", "n2"], step
    short = int(c.cmd("rbatch", "--parsable", "-n1", "--mem", "10", "-o",
                      str(c.work / "short-%j.out"), "--wrap", "echo done").stdout)
    wait_for("short job completed", lambda: c.job(short)["JobState"] == "COMPLETED")
    assert (c.work / f"short-{short}.out").read_text() == "done\n"

    # 4. Each node in turn: the old rnoded stopped, the new one started on its spool (the
    #    upgrade), then the new one restarted; its job runs on throughout.
    #    The restart of the new one comes with a step running on the node (issue 46): rrun
    #    gets the line its task wrote before, the one it wrote while no rnoded ran, its code.
    for name in NODES:
        h = lab[name]
        for what in ("upgraded", "restarted"):
            seen = c.registrations(name)
            across = c.step_across(name, jobs[name]) if what == "restarted" else None
            h.stop("rnoded", c.node_stop)
            if across is not None:
                (c.work / f"go-{name}").touch()
            c.start_rnoded(name, new)
            wait_for(f"{name} registered again", lambda n=name, s=seen: c.registrations(n) > s)
            assert c.node(name)["Version"] == current()
            wait_for(f"{name} responding", c.all_responding)
            c.check_jobs(jobs, f"{name}'s rnoded {what}")
            if across is not None:
                c.check_step_across(name, jobs[name], across)
    assert c.downs() == []

    # 5. The controller restarted, by SIGTERM and by SIGKILL, jobs still running.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        lab["ctl"].stop("rctld", sig)
        c.start_rctld(new)
        wait_for(f"nodes back after rctld's {sig.name}", c.all_responding)
        c.check_jobs(jobs, f"rctld restarted by {sig.name}")

    # 6. The held jobs end: each ran once, none requeued, no node ever DOWN.
    (c.work / "release").touch()
    for job_id in jobs.values():
        wait_for(f"job {job_id} completed", lambda j=job_id: c.job(j)["JobState"] == "COMPLETED")
        assert c.job(job_id)["Restarts"] == "0"
        assert len(c.runs(job_id)) == 1, c.runs(job_id)
    assert c.node_states() == dict.fromkeys(NODES, "idle")
    assert c.downs() == []
    print(f"deployment test: {time.monotonic() - t0:.1f} s after the install")
