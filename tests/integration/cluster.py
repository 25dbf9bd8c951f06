"""Real rctld and rnoded processes on 127.0.0.1 for integration tests (shared by every suite).

    with Cluster(tmp_path, nodes=["n1", "n2"]) as c:
        c.start()                      # rctld, then every node; waits until they are IDLE
        c.wait_for(lambda: c.state("n1") == "IDLE", what="n1 idle")
        c.request(m.UpdateNodes("n1", "DRAIN", "x", "alice"))

Processes run as `python -m ranch.ctld` / `python -m ranch.noded` (the installed commands'
entries) from the repo root (no install needed); logs go to files under the test's directory
(`c.log("rctld")` to read one).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ranch.protocol import messages as m
from ranch.protocol.auth import create_key, load_key
from ranch.protocol.client import ControllerUnreachable
from ranch.protocol.typedclient import request
from tests import logkeeper
from tests.deadline import Deadline
from tests.ports import free_port  # many tests import it from here

REPO = Path(__file__).resolve().parents[2]

CONF = """\
ClusterName=itest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout={slurmd_timeout}
MessageTimeout=3
ReturnToService={rts}
{extra}
NodeName={nodes} CPUs=1 RealMemory=64
PartitionName=main Nodes={nodes} Default=YES
"""


def wait_for(pred: Callable[[], Any], timeout: float = 15.0, what: str = "condition",
             interval: float = 0.05) -> Any:
    """Poll `pred` until it returns something truthy; AssertionError naming `what` at timeout
    (`timeout` seconds of a quiet machine, stretched as this one gets busier: tests/deadline)."""
    deadline = Deadline(timeout)
    last_exc: Exception | None = None
    while not deadline.passed():
        try:
            value = pred()
            if value:
                return value
        except (ControllerUnreachable, OSError, KeyError) as exc:
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {deadline.elapsed():.1f} s ({timeout:g} s quiet) "
                         f"waiting for {what}"
                         + (f" (last error: {last_exc})" if last_exc else ""))


class Cluster:
    def __init__(
        self,
        workdir: Path,
        nodes: Iterable[str] = ("n1", "n2", "n3"),
        *,
        rts: int = 1,
        extra: str = "",
        conf_text: str | None = None,
        ctld_fd_limit: int | None = None,
        slurmd_timeout: int = 3,
    ) -> None:
        """`ctld_fd_limit`: rctld's RLIMIT_NOFILE, soft and hard (as prlimit sets it).
        `slurmd_timeout`: 3 s finds a lost node fast; a test that restarts rnoded and must not
        see it DOWN asks for more (a loaded machine can take longer than 3 s to start one)."""
        self.dir = Path(workdir)
        logkeeper.watch(self.dir)  # kept if the test fails
        self._watched = {self.dir}
        self.dir.mkdir(parents=True, exist_ok=True)
        self.node_names = list(nodes)
        self.port = free_port()
        self.addr = ("127.0.0.1", self.port)
        self.key_file = str(self.dir / "ranch.key")
        self.state_dir = str(self.dir / "state")
        self.conf_path = self.dir / "cluster.conf"
        self.conf_path.write_text(conf_text or CONF.format(
            port=self.port, rts=rts, extra=extra, nodes=",".join(self.node_names),
            slurmd_timeout=slurmd_timeout))
        create_key(self.key_file)
        self.ctld_fd_limit = ctld_fd_limit
        self.ctld: subprocess.Popen | None = None
        self.nodes: dict[str, subprocess.Popen] = {}
        self._key: bytes | None = None

    # -- processes -------------------------------------------------------------------------

    def _env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        env["RANCH_KEY_FILE"] = self.key_file
        env.pop("RANCH_SERVER", None)
        env.update(extra or {})
        return env

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None):
        limit = self.ctld_fd_limit if name == "rctld" else None

        def lower() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        with open(self.dir / f"{name}.log", "ab") as log:  # the child keeps its own copy
            return subprocess.Popen([sys.executable, *argv], cwd=REPO, env=self._env(env),
                                    stdout=log, stderr=subprocess.STDOUT,
                                    preexec_fn=None if limit is None else lower)

    def start_ctld(self, *extra_args: str, wait: bool = True,
                   env: dict[str, str] | None = None) -> subprocess.Popen:
        self.ctld = self._spawn("rctld", [
            "-m", "ranch.ctld", "-f", str(self.conf_path),
            "--listen", f"127.0.0.1:{self.port}",
            "--state-dir", self.state_dir, "--key-file", self.key_file, *extra_args], env)
        if wait:
            wait_for(lambda: isinstance(self.request(m.Ping(), timeout=1), m.Pong),
                     what="rctld to answer Ping")
        return self.ctld

    def start_node(self, name: str, *, env: dict[str, str] | None = None,
                   fake_gpus: int = 0, run_jobs: bool = False,
                   args: Iterable[str] = ()) -> subprocess.Popen:
        """`run_jobs`: kept for callers; rnoded runs every user's jobs, root's included unless
        DisableRootJobs refuses them at submission."""
        argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{self.port}", "--name", name,
                "--spool-dir", str(self.dir / "spool" / name)]
        if fake_gpus:
            argv += ["--fake-gpus", str(fake_gpus)]
        argv += args
        self.nodes[name] = self._spawn(name, argv, env)
        return self.nodes[name]

    def start(self, timeout: float = 20.0) -> None:
        """rctld, then every node; returns when all nodes show IDLE."""
        self.start_ctld()
        for name in self.node_names:
            self.start_node(name)
        self.wait_for(lambda: all(self.state(n) == "IDLE" for n in self.node_names),
                      timeout, what="every node IDLE")

    def kill_node(self, name: str) -> None:
        proc = self.nodes.pop(name)
        proc.kill()
        proc.wait()

    def stop_node(self, name: str, timeout: float = 5.0) -> int:
        proc = self.nodes.pop(name)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout)

    def leave_node(self, name: str, timeout: float = 5.0) -> int:
        """rnoded's SIGUSR1: the node leaves (DOWN, its jobs requeued), then rnoded stops."""
        proc = self.nodes.pop(name)
        proc.send_signal(signal.SIGUSR1)
        return proc.wait(timeout)

    def kill_ctld(self) -> None:
        assert self.ctld is not None
        self.ctld.kill()
        self.ctld.wait()
        self.ctld = None

    def stop_ctld(self, timeout: float = 5.0) -> int:
        assert self.ctld is not None
        self.ctld.send_signal(signal.SIGTERM)
        rc = self.ctld.wait(timeout)
        self.ctld = None
        return rc

    def stop(self) -> None:
        """SIGTERM every child, wait, SIGKILL what is left; close the logs."""
        procs = list(self.nodes.values()) + ([self.ctld] if self.ctld else [])
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.nodes.clear()
        self.ctld = None
        self._reap_jobs()
        if self.dir in self._watched:  # its logs stay kept for the test running now
            self._watched.discard(self.dir)
            logkeeper.unwatch(self.dir)

    def _reap_jobs(self) -> None:
        """Jobs outlive rnoded by design (a restarted rnoded re-adopts them): once the test is
        over, end every process still running from this cluster's spool (a job's supervisor and
        its script's process group: a multi-node job's holder loops until killed)."""
        mark = str(self.dir)
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read().decode(errors="replace")
                pid = int(entry)
                if mark not in cmdline:
                    continue
                group = os.getpgid(pid)
                if group != os.getpgrp():  # never the test run's own group
                    os.killpg(group, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                continue

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- queries ---------------------------------------------------------------------------

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = load_key(self.key_file)
        return self._key

    def run_cli(self, module: str, *argv: str, timeout: float = 30.0
                ) -> subprocess.CompletedProcess:
        """Run a command (`ranch.cli.rinfo`, `ranch.cli.rbatch`, ...) against this cluster, as a
        user would:
        the controller from RANCH_SERVER, the key from RANCH_KEY_FILE."""
        env = self._env({"RANCH_SERVER": f"127.0.0.1:{self.port}"})
        return subprocess.run([sys.executable, "-m", module, *argv], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=timeout)

    def request(self, msg: Any, timeout: float = 5.0) -> Any:
        return request(self.addr, self.key, msg, timeout=timeout)

    def snapshot(self, metrics: bool = False) -> dict[str, dict]:
        snap = self.request(m.GetSnapshot(metrics=metrics))
        assert isinstance(snap, m.Snapshot), snap
        return {rec["name"]: rec for rec in snap.nodes}

    def state(self, name: str) -> str:
        return self.snapshot()[name]["complete"]

    def wait_for(self, pred: Callable[[], Any], timeout: float = 15.0,
                 what: str = "condition") -> Any:
        try:
            return wait_for(pred, timeout, what)
        except AssertionError as exc:
            tail = self.log('rctld')[-3000:]
            raise AssertionError(f"{exc}\n--- rctld log tail ---\n{tail}") from None

    def log(self, name: str) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


LiveCluster = Cluster  # the name other suites may prefer beside ctld.cluster.Cluster
