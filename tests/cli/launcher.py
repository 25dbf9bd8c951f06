"""A real rctld (and rnoded processes) on loopback for the CLI's end-to-end and golden tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.deadline import Deadline
from tests.ports import free_port  # tests import it from here

REPO = Path(__file__).resolve().parents[2]


class Controller:
    """rctld started from `conf_text` (with {port} and {key} filled in) in `workdir`."""

    def __init__(self, workdir: Path, conf_text: str) -> None:
        from ranch.protocol.auth import create_key

        self.dir = workdir
        self.port = free_port()
        self.key_path = str(workdir / "ranch.key")
        self.key = create_key(self.key_path)
        self.conf_path = workdir / "cluster.conf"
        self.conf_path.write_text(conf_text.format(port=self.port, key=self.key_path))
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {
            **os.environ,
            "RANCH_SERVER": f"127.0.0.1:{self.port}",
            "RANCH_KEY_FILE": self.key_path,
            "RANCH_SPOOL_DIR": str(workdir / "spool"),
            "PYTHONPATH": str(REPO),
        }
        self.env.pop("RANCH_CONF", None)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.dir / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", *args], cwd=REPO, env=self.env, stdout=log, stderr=log
        )

    def start(self, timeout: float = 30.0) -> None:
        self._spawn(
            "rctld",
            ["ranch.ctld", "-f", str(self.conf_path), "--state-dir", str(self.dir / "state")],
        )
        from ranch.protocol.messages import Ping, Pong

        self.wait_for(lambda: isinstance(self.ask(Ping(), quiet=True), Pong), timeout, "rctld up")

    def start_node(self, name: str, *extra: str) -> None:
        self._spawn(name, ["ranch.noded", "--server", self.address, "--name", name,
                           "--key-file", self.key_path, *extra])

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        for name in list(self.procs):
            proc = self.procs.pop(name)
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def log(self, name: str) -> str:
        return (self.dir / f"{name}.log").read_text(errors="replace")

    def ask(self, msg: Any, *, quiet: bool = False) -> Any:
        from ranch.protocol.client import ControllerUnreachable
        from ranch.protocol.typedclient import request

        try:
            return request(("127.0.0.1", self.port), self.key, msg, timeout=5.0)
        except ControllerUnreachable:
            if quiet:
                return None
            raise

    def nodes(self) -> dict[str, dict]:
        from ranch.protocol.messages import GetSnapshot

        snap = self.ask(GetSnapshot())
        return {n["name"]: n for n in snap.nodes}

    def wait_for(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = Deadline(timeout)  # stretched as the machine gets busier
        while True:
            if self.procs.get("rctld") is not None and self.procs["rctld"].poll() is not None:
                raise AssertionError(f"rctld exited while waiting for {what}:\n{self.log('rctld')}")
            if cond():
                return
            if deadline.passed():
                raise AssertionError(f"timed out after {deadline.elapsed():.1f} s "
                                     f"waiting for {what}")
            time.sleep(0.05)

    def wait_states(self, wanted: dict[str, str], timeout: float = 30.0) -> None:
        """Wait until every named node shows the compact state given."""

        def reached() -> bool:
            nodes = self.nodes()
            return all(nodes[n]["compact"] == s for n, s in wanted.items())

        try:
            self.wait_for(reached, timeout, f"states {wanted}")
        except AssertionError:
            now = {n: self.nodes()[n]["compact"] for n in wanted}
            raise AssertionError(f"states {now} never became {wanted}") from None

    def run(self, command: str, *argv: str) -> subprocess.CompletedProcess:
        """rinfo/rcontrol as a subprocess, as an admin would run it."""
        module = {"rinfo": "ranch.cli.rinfo", "rcontrol": "ranch.cli.rcontrol",
                  "rbatch": "ranch.cli.rbatch",
                  "rqueue": "ranch.cli.rqueue", "rcancel": "ranch.cli.rcancel"}[command]
        return subprocess.run(
            [sys.executable, "-m", module, *argv],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
