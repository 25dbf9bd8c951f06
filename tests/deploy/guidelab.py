"""Hosts for docs/admin-guide.md's own commands: each a network namespace, a host name and a
mount namespace of its own in which /etc, /opt, /usr/local, /var and /root are overlays (this
machine's files below, the host's changes in its own folder) and /run is fresh at every boot;
systemctl (so reboot) and scp there are tests/deploy/unitshim.py. And the guide's marked blocks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hosts import wait_for

HUB = "rag-hub"
BRIDGE = "rag-br"
NET = "10.203.0"  # distinct from tests/deploy (10.202.0) and tests/ha
OVERLAID = ("/etc", "/opt", "/usr/local", "/var", "/root")
SHIM = Path(__file__).resolve().parent / "unitshim.py"
MARK = re.compile(r"^(?P<indent>\s*)<!-- guide-test (?P<name>[\w-]+): (?P<what>.*?) -->$")


@dataclass
class Block:
    name: str
    hosts: list[str]
    text: str
    file: str | None = None  # a config block: written to this path on each host


def blocks(markdown: str) -> list[Block]:
    """Every marked block, in order: `<!-- guide-test NAME: HOST... -->` before a ```sh block
    (commands), or `<!-- guide-test NAME: file PATH HOST... -->` before a ``` block (a file)."""
    lines = markdown.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        indent = m["indent"]
        fence = lines[i + 1]
        assert fence.strip().startswith("```"), f"guide-test {m['name']}: no block after it"
        body = []
        for following in lines[i + 2:]:
            if following.strip() == "```":
                break
            assert following.startswith(indent) or not following.strip(), following
            body.append(following[len(indent):])
        words = m["what"].split()
        if words[0] == "file":
            out.append(Block(m["name"], words[2:], "\n".join(body) + "\n", file=words[1]))
        else:
            assert fence.strip() == "```sh", f"guide-test {m['name']}: not a ```sh block"
            out.append(Block(m["name"], words, "\n".join(body) + "\n"))
    return out


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class Host:
    """One machine. Its processes are those in its network namespace; `boot` starts a holder
    process whose mount namespace is the machine's filesystem, and the enabled units."""

    def __init__(self, lab: GuideLab, name: str, octet: int) -> None:
        self.lab, self.name = lab, name
        self.ns = f"rag-{name}"
        self.addr = f"{NET}.{octet}"
        self.root = lab.dir / "hosts" / name
        self.holder: subprocess.Popen | None = None
        self.boots = 0
        self.btime = 0

    def boot(self) -> None:
        """Power on: a fresh /run, a new boot time (/proc/stat's btime, what psutil reads), the
        host name, then systemd's part: the units enabled for multi-user.target."""
        self.boots += 1
        self.btime = max(int(time.time()), self.btime + 2)  # rctld allows 1 s of jitter
        stat = Path("/proc/stat").read_text()
        (self.root / "stat").write_text(re.sub(r"(?m)^btime \d+$", f"btime {self.btime}", stat))
        booted = self.root / f"booted.{self.boots}"
        mounts = []
        for top in OVERLAID:
            key = top.strip("/").replace("/", "-")
            up, work = self.root / f"{key}.up", self.root / f"{key}.work"
            up.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            mounts.append(f"mount -t overlay overlay -o lowerdir={top},upperdir={up},"
                          f"workdir={work} {top}")
        wrapper = self.root / "shim"
        wrapper.write_text(f"#!/bin/sh\nRAG_LAB={self.lab.dir} RAG_HOST={self.name} "
                           f"exec {sys.executable} -I {SHIM} \"$0\" \"$@\"\n")
        wrapper.chmod(0o755)
        setup = " && ".join([
            *mounts, "mount -t tmpfs -o mode=0755 tmpfs /run",
            f"mount --bind {self.root / 'stat'} /proc/stat",
            f"mount --bind {wrapper} /usr/bin/systemctl",
            # no sshd here: scp copies into the other host (first on PATH, scp installed or not)
            f"install -D -m 0755 {wrapper} /usr/local/sbin/scp",
            f"hostname {self.name}", f"touch {booted}", "exec sleep infinity"])
        self.holder = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "unshare", "--mount", "--uts", "--propagation",
             "private", "sh", "-c", setup], start_new_session=True)
        wait_for(f"{self.name} booted", lambda: booted.exists() or self.holder.poll(), 30)
        assert self.holder.poll() is None, f"{self.name}'s holder exited {self.holder.returncode}"
        holders = self.lab.dir / "holders"
        holders.mkdir(exist_ok=True)
        (holders / self.name).write_text(str(self.holder.pid))
        self.sh("systemctl boot")

    def power_off(self, orderly: bool = True) -> None:
        """What a shutdown does: the units stopped (SIGTERM, as systemd does), then every
        process of the host ends, its jobs included; /run goes with the mount namespace."""
        if orderly:
            self.sh("systemctl shutdown")
        for pid in _ip("netns", "pids", self.ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.holder is not None:
            self.holder.wait(10)
        wait_for(f"{self.name}'s processes gone",
                 lambda: not _ip("netns", "pids", self.ns, check=False).stdout.split(), 10)

    def sh(self, script: str, check: bool = True, timeout: float = 120,
           ) -> subprocess.CompletedProcess:
        """`script` run by root's shell on this host (set -e), in the admin's folder."""
        assert self.holder is not None
        done = subprocess.run(
            ["nsenter", "-t", str(self.holder.pid), "-m", "-u", "-n", f"--wd={self.lab.work}",
             "--", "sh", "-ec",
             script], env=self.lab.env(self.name), cwd=self.lab.work, capture_output=True,
            text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{self.name}# {script}\n-> {done.returncode}\n{done.stdout}"
                                 f"{done.stderr}\n{self.lab.journal()}")
        return done

    def write(self, path: str, text: str) -> None:
        assert self.holder is not None
        subprocess.run(["nsenter", "-t", str(self.holder.pid), "-m", "--", "sh", "-ec",
                        f'install -d "$(dirname {path})" && cat > {path}'], input=text,
                       text=True, check=True)


class GuideLab:
    def __init__(self, root: Path, names: dict[str, int], wheelhouse: Path) -> None:
        self.dir = root
        self.work = root / "work"  # the admin's folder: the wheel is here
        self.work.mkdir(parents=True)
        self.wheelhouse = wheelhouse
        self.hosts = {name: Host(self, name, octet) for name, octet in names.items()}

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def env(self, name: str) -> dict[str, str]:
        """A root login shell's environment; pip finds the dependencies in the lab's
        wheelhouse, as `pip install --no-index --find-links` would (no index reachable)."""
        return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME": "/root", "USER": "root", "LOGNAME": "root", "LANG": "C.UTF-8",
                "TZ": "UTC", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(self.wheelhouse),
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "RAG_LAB": str(self.dir),
                "RAG_HOST": name}

    def journal(self) -> str:
        out = []
        for f in sorted((self.dir / "journal").glob("*.log")):
            out.append(f"--- {f.name} ends:\n{f.read_text(errors='replace')[-1500:]}")
        return "\n".join(out)

    def _namespaces(self) -> list[str]:
        listed = {line.split()[0] for line in _ip("netns", "list").stdout.splitlines()
                  if line.strip()}
        return [ns for ns in (HUB, *(h.ns for h in self.hosts.values())) if ns in listed]

    def up(self) -> None:
        self._remove()
        _ip("netns", "add", HUB)
        _ip("-n", HUB, "link", "add", BRIDGE, "type", "bridge", "stp_state", "0",
            "forward_delay", "0")
        _ip("-n", HUB, "link", "set", BRIDGE, "up")
        for h in self.hosts.values():
            h.root.mkdir(parents=True)
            _ip("netns", "add", h.ns)
            _ip("-n", h.ns, "link", "set", "lo", "up")
            _ip("-n", HUB, "link", "add", f"v-{h.name}", "type", "veth", "peer", "name", "eth0",
                "netns", h.ns)
            _ip("-n", h.ns, "addr", "add", f"{h.addr}/24", "dev", "eth0")
            _ip("-n", h.ns, "link", "set", "eth0", "up")
            _ip("-n", HUB, "link", "set", f"v-{h.name}", "master", BRIDGE, "up")
            h.boot()

    def down(self) -> None:
        self._remove()

    def _remove(self) -> None:
        for ns in self._namespaces():
            # only processes inside our own rag- namespaces: daemons, jobs, holders
            for pid in _ip("netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _ip("netns", "del", ns, check=False)
