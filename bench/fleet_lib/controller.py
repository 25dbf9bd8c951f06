"""The rctld under test: a child process with a generated config, or one found at --server."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

from ranch.protocol import auth, client, typedclient
from ranch.protocol.messages import Ping, Pong

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raise_child_nofile() -> None:
    # Runs in the child between fork and exec: the controller needs one descriptor per node.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Controller:
    """A running rctld: its address, key, pid (None when not local) and log file."""

    def __init__(
        self,
        addr: tuple[str, int],
        key: bytes,
        pid: int | None,
        *,
        proc: subprocess.Popen[bytes] | None = None,
        workdir: Path | None = None,
        log_path: Path | None = None,
        key_path: str | None = None,
    ) -> None:
        self.addr = addr
        self.key = key
        self.pid = pid
        self.proc = proc
        self.workdir = workdir
        self.log_path = log_path
        self.key_path = key_path

    @property
    def state_dir(self) -> Path | None:
        return None if self.workdir is None else self.workdir / "state"

    @classmethod
    def spawn(cls, workdir: Path, config_text: str, *, port: int, ready_timeout: float = 60.0):
        """Start `python -m ranch.ctld` on 127.0.0.1:port with the config; wait for a Pong."""
        workdir.mkdir(parents=True, exist_ok=True)
        conf_path = workdir / "fleet.conf"
        conf_path.write_text(config_text)
        state_dir = workdir / "state"
        state_dir.mkdir(exist_ok=True)
        key_path = workdir / "key"
        log_path = workdir / "rctld.log"
        # FLEET_CTLD swaps the controller's module for a wrapper (a profiler, say).
        ctld = os.environ.get("FLEET_CTLD", "-m ranch.ctld").split()
        argv = [
            sys.executable, *ctld, "-f", str(conf_path),
            "--listen", f"127.0.0.1:{port}", "--state-dir", str(state_dir),
            "--key-file", str(key_path),
        ]  # fmt: skip
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO_ROOT), env.get("PYTHONPATH"))))
        env.pop(auth.KEY_ENV, None)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                argv, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, preexec_fn=_raise_child_nofile,
            )  # fmt: skip
        ctl = cls(("127.0.0.1", port), b"", proc.pid, proc=proc, workdir=workdir,
                  log_path=log_path, key_path=str(key_path))  # fmt: skip
        try:
            ctl._wait_ready(ready_timeout)
        except BaseException:
            ctl.stop()
            raise
        return ctl

    @classmethod
    def external(cls, addr: tuple[str, int], key_path: str) -> Controller:
        """An rctld someone else started; its pid is found when it listens on this host."""
        ctl = cls(addr, auth.load_key(key_path), _listener_pid(addr[1]), key_path=key_path)
        reply = typedclient.request(addr, ctl.key, Ping(), timeout=10.0)
        if not isinstance(reply, Pong):
            raise RuntimeError(f"controller at {addr[0]}:{addr[1]} answered Ping with {reply!r}")
        return ctl

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        assert self.proc is not None and self.key_path is not None
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"rctld exited with status {self.proc.returncode} before answering; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if not self.key and os.path.exists(self.key_path):
                try:
                    self.key = auth.load_key(self.key_path)
                except auth.KeyFileError:
                    pass  # half-written: try again
            if self.key:
                try:
                    reply = typedclient.request(self.addr, self.key, Ping(), timeout=2.0)
                    if isinstance(reply, Pong):
                        return
                except (client.ControllerUnreachable, Exception):
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"rctld did not answer within {timeout:g} s; log:\n"
                                   f"{self.log_tail()}")  # fmt: skip
            time.sleep(0.05)

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and psutil.pid_exists(self.pid)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the child (it saves state and exits), SIGKILL after `timeout`; exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def _listener_pid(port: int) -> int | None:
    try:
        for conn in psutil.net_connections("tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                return conn.pid
    except (psutil.AccessDenied, OSError):
        pass
    return None
