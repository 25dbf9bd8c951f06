"""The systemd units (examples/systemd/) pass `systemd-analyze verify`, man pages included, and
each daemon speaks sd_notify to a real NOTIFY_SOCKET: READY, RELOADING on SIGHUP, STOPPING."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .cluster import REPO, Cluster, wait_for

UNITS = REPO / "examples" / "systemd"
ANALYZE = shutil.which("systemd-analyze")


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
def test_units_verify(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("ranch_man_generate",
                                                  REPO / "man" / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    generate.write_all(tmp_path / "man")  # Documentation=man:rctld(8) must resolve
    bindir = Path(sys.executable).parent
    units = []
    for unit in sorted(UNITS.glob("*.service")):
        text = unit.read_text()
        assert "ExecStart=/usr/local/bin/" in text  # where a system pip puts the programs
        # ... which are this venv's here, so that verify finds them
        (tmp_path / unit.name).write_text(text.replace("/usr/local/bin/", f"{bindir}/"))
        units.append(str(tmp_path / unit.name))
    assert {Path(u).name for u in units} == {"rctld.service", "rnoded.service"}
    env = dict(os.environ, MANPATH=str(tmp_path / "man"), SYSTEMD_LOG_LEVEL="notice")
    done = subprocess.run([ANALYZE, "verify", *units], capture_output=True, text=True,
                          env=env, check=False, timeout=60)
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


class NotifySocket:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.path = str(path)
        self.got: list[str] = []

    def lines(self) -> list[str]:
        while True:
            try:
                self.got += self.sock.recv(4096).decode().splitlines()
            except BlockingIOError:
                return self.got


def test_daemons_notify_readiness(tmp_path: Path) -> None:
    ctl_sock, node_sock = NotifySocket(tmp_path / "ctl.sock"), NotifySocket(tmp_path / "n.sock")
    with Cluster(tmp_path, ["n1"]) as c:
        c.start_ctld(env={"NOTIFY_SOCKET": ctl_sock.path})
        wait_for(lambda: "READY=1" in ctl_sock.lines(), what="rctld READY=1")
        assert any(x.startswith("STATUS=listening on 127.0.0.1:") for x in ctl_sock.lines())
        assert f"MAINPID={c.ctld.pid}" in ctl_sock.lines()
        c.start_node("n1", env={"NOTIFY_SOCKET": node_sock.path})
        wait_for(lambda: "READY=1" in node_sock.lines(), what="rnoded READY=1")
        c.wait_for(lambda: c.state("n1") == "IDLE", what="n1 idle")

        for sock, proc in ((ctl_sock, c.ctld), (node_sock, c.nodes["n1"])):
            proc.send_signal(signal.SIGHUP)
            wait_for(lambda s=sock: "RELOADING=1" in s.lines(), what="RELOADING=1")
            wait_for(lambda s=sock: s.lines().count("READY=1") == 2, what="READY=1 again")
        node = c.nodes.pop("n1")
        node.send_signal(signal.SIGTERM)
        assert node.wait(15) == 0 and "STOPPING=1" in node_sock.lines()
        assert c.stop_ctld(15) == 0 and "STOPPING=1" in ctl_sock.lines()
