"""Hosts made of network namespaces for the controller-pair tests: three etcd members, two rctld,
four rnoded and a client, each in its own namespace on one bridge (shared/ha-lab/netns-lab.sh,
in Python, with this suite's prefix and subnet).

Names start with RHA_PREFIX ("rha-"), addresses are 10.201.0.0/24; the bridge lives in a
namespace of its own, so the machine's own namespace gets no interface. Processes are started
here and ended here, by their Popen objects; namespaces are deleted by the names made here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests import logkeeper

REPO = Path(__file__).resolve().parents[2]
PREFIX = os.environ.get("RHA_PREFIX", "rha-")
NET = os.environ.get("RHA_NET", "10.201.0")
HUB = f"{PREFIX}hub"
BRIDGE = f"br-{PREFIX}"[:15].rstrip("-")
HOSTS = {"e1": 1, "e2": 2, "e3": 3, "c1": 11, "c2": 12, "n1": 21, "n2": 22, "n3": 23, "n4": 24,
         "cl": 30}
ETCD_HOSTS = ("e1", "e2", "e3")


def missing() -> str:
    """Why the lab cannot run here ("" when it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "etcd"):
        if shutil.which(tool) is None:
            return f"needs {tool} (apt-get install iproute2 etcd-server)"
    return ""


def ip_of(host: str) -> str:
    return f"{NET}.{HOSTS[host]}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class Lab:
    def __init__(self, workdir: Path) -> None:
        self.dir = Path(workdir)
        logkeeper.watch(self.dir)  # kept if the test fails
        self.dir.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self.made: list[str] = []

    # -- network ------------------------------------------------------------------------

    def up(self) -> None:
        self.down_net()  # what an earlier, killed run of this suite left
        _ip("netns", "add", HUB)
        self.made.append(HUB)
        _ip("-n", HUB, "link", "set", "lo", "up")
        _ip("-n", HUB, "link", "add", BRIDGE, "type", "bridge", "stp_state", "0",
            "forward_delay", "0")
        _ip("-n", HUB, "link", "set", BRIDGE, "up")
        for host in HOSTS:
            ns = PREFIX + host
            _ip("netns", "add", ns)
            self.made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", HUB, "link", "add", f"v-{host}", "type", "veth", "peer", "name", f"e-{host}")
            _ip("-n", HUB, "link", "set", f"e-{host}", "netns", ns)
            _ip("-n", ns, "link", "set", f"e-{host}", "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{ip_of(host)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", HUB, "link", "set", f"v-{host}", "master", BRIDGE, "up")

    def down_net(self) -> None:
        listed = _ip("netns", "list", check=False).stdout.split()
        for ns in [HUB, *(PREFIX + h for h in HOSTS)]:
            if ns in listed:
                _ip("netns", "del", ns, check=False)

    def partition(self, host: str) -> None:
        _ip("-n", HUB, "link", "set", f"v-{host}", "down")

    def heal(self, host: str) -> None:
        _ip("-n", HUB, "link", "set", f"v-{host}", "up")

    # -- processes ----------------------------------------------------------------------

    def spawn(self, name: str, host: str, argv: list[str], env: dict[str, str] | None = None
              ) -> subprocess.Popen:
        full = dict(os.environ)
        full["PYTHONPATH"] = str(REPO) + os.pathsep + full.get("PYTHONPATH", "")
        full.pop("RANCH_SERVER", None)
        full.update(env or {})
        with open(self.dir / f"{name}.log", "ab") as log:  # the child keeps its own copy
            proc = subprocess.Popen(["ip", "netns", "exec", PREFIX + host, *argv], cwd=REPO,
                                    env=full, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        self.procs[name] = proc
        return proc

    def run(self, host: str, argv: list[str], env: dict[str, str] | None = None,
            timeout: float = 30.0) -> subprocess.CompletedProcess:
        full = dict(os.environ)
        full["PYTHONPATH"] = str(REPO) + os.pathsep + full.get("PYTHONPATH", "")
        full.pop("RANCH_SERVER", None)
        full.update(env or {})
        return subprocess.run(["ip", "netns", "exec", PREFIX + host, *argv], cwd=REPO,
                              env=full, capture_output=True, text=True, timeout=timeout)

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout: float = 10.0) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def log(self, name: str) -> str:
        try:
            return (self.dir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""

    # -- etcd ---------------------------------------------------------------------------

    def endpoints(self) -> str:
        return ",".join(f"{ip_of(h)}:2379" for h in ETCD_HOSTS)

    def start_etcd(self, host: str) -> None:
        ip = ip_of(host)
        data = self.dir / host / "data"
        state = "existing" if (data / "member").exists() else "new"
        cluster = ",".join(f"{h}=http://{ip_of(h)}:2380" for h in ETCD_HOSTS)
        self.spawn(f"etcd-{host}", host, [
            "etcd", "--name", host, "--data-dir", str(data),
            "--listen-peer-urls", f"http://{ip}:2380",
            "--initial-advertise-peer-urls", f"http://{ip}:2380",
            "--listen-client-urls", f"http://{ip}:2379",
            "--advertise-client-urls", f"http://{ip}:2379",
            "--initial-cluster", cluster, "--initial-cluster-state", state,
            "--initial-cluster-token", f"{PREFIX}ranch",
            "--pre-vote=true", "--logger", "zap", "--log-level", "warn"])

    def etcd_healthy(self) -> bool:
        done = self.run("cl", ["etcdctl", "--endpoints", self.endpoints(),
                               "--command-timeout=2s", "endpoint", "health"], timeout=10,
                        env={"ETCDCTL_API": "3"})
        return done.returncode == 0

    def stop(self) -> None:
        """Every process started here (SIGTERM, then SIGKILL), then the namespaces. etcd goes
        last and by SIGKILL: the controllers give their seat up through it as they stop, and
        a member told to stop while its peers go waits ~7 s for them (its data is thrown away
        with the lab)."""
        daemons = {n: p for n, p in self.procs.items() if not n.startswith("etcd-")}
        for proc in daemons.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 8
        for proc in daemons.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for name in [n for n in self.procs if n not in daemons]:
            self.kill(name)
        self.procs.clear()
        self._reap_jobs()
        self.down_net()
        logkeeper.unwatch(self.dir)  # kept still for the test running now

    def _reap_jobs(self) -> None:
        """Jobs outlive rnoded by design: end what still runs from this lab's spool dirs."""
        mark = str(self.dir)
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if mark not in f.read().decode(errors="replace"):
                        continue
                pid = int(entry)
                group = os.getpgid(pid)
                if group != os.getpgrp():  # a job's supervisor leads its script's group
                    os.killpg(group, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                continue


def python() -> str:
    return sys.executable
