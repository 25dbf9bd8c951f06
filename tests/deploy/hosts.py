"""Hosts as network namespaces on one bridge, each with its own root folder, and Ranch
installed into them from a wheel, as docs/admin-guide.md installs it on real hosts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import logkeeper
from tests.deadline import Deadline

REPO = Path(__file__).resolve().parents[2]
HUB = "rdp-hub"  # holds the bridge, so the machine's own namespace gets no interface
BRIDGE = "rdp-br"
NET = "10.202.0"  # the subnet these tests may use; nothing is sent outside it


def why_not() -> str | None:
    """Why hosts cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` (iproute2)"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`ip netns` fails: {probe.stderr.strip()}"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class Host:
    """One machine: a namespace with one address, a root folder (ROOT/etc/ranch, ROOT/var/...)
    and the daemons started on it, known by their Popen (stopped by pid, never by name)."""

    def __init__(self, name: str, octet: int, root: Path) -> None:
        self.name = name
        self.ns = f"rdp-{name}"
        self.addr = f"{NET}.{octet}"
        self.root = root
        self.etc = root / "etc" / "ranch"
        self.conf = self.etc / "cluster.conf"
        self.logs = root / "var" / "log" / "ranch"
        self.procs: dict[str, subprocess.Popen] = {}
        for d in (self.etc, self.logs, root / "var" / "lib", root / "var" / "spool", root / "work"):
            d.mkdir(parents=True, exist_ok=True)

    def env(self, venv: Path) -> dict[str, str]:
        """What a service or a login shell has: the installed programs on PATH, the config
        named by RANCH_CONF, and nothing that names the controller or this source tree."""
        return {"PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                "HOME": str(self.root / "work"), "LANG": "C.UTF-8", "TZ": "UTC",
                "RANCH_CONF": str(self.conf)}

    def argv(self, venv: Path, program: str, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, str(venv / "bin" / program), *args]

    def run(self, venv: Path, program: str, *args: str, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess:
        done = subprocess.run(self.argv(venv, program, *args), env=self.env(venv),
                              cwd=self.root / "work", capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{self.name}$ {program} {' '.join(args)} -> "
                                 f"{done.returncode}\n{done.stdout}{done.stderr}")
        return done

    def start(self, label: str, venv: Path, program: str, *args: str) -> subprocess.Popen:
        """A daemon in the foreground, as a service manager runs it (`ip netns exec` execs it,
        so the Popen's pid is the daemon's own)."""
        assert label not in self.procs, f"{label} already runs on {self.name}"
        with open(self.logs / f"{label}.log", "ab") as log:
            proc = subprocess.Popen(self.argv(venv, program, *args), env=self.env(venv),
                                    cwd="/", stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.procs[label] = proc
        return proc

    def stop(self, label: str, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        proc = self.procs.pop(label)
        proc.send_signal(sig)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{label} on {self.name} ignored signal {sig} for {timeout} s"
                                 ) from None

    def log(self, label: str) -> str:
        path = self.logs / f"{label}.log"
        return path.read_text(errors="replace") if path.exists() else ""


class Lab:
    """The bridge and the hosts; `down` stops what it started and removes what it made."""

    def __init__(self, root: Path, octets: dict[str, int]) -> None:
        self.hosts = {name: Host(name, octet, root / name) for name, octet in octets.items()}
        logkeeper.watch(root)  # kept if the test fails
        self._root: Path | None = root

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def _ours(self) -> list[str]:
        listed = _ip("netns", "list").stdout.split("\n")
        names = {line.split()[0] for line in listed if line.strip()}
        return [ns for ns in (HUB, *(h.ns for h in self.hosts.values())) if ns in names]

    def up(self) -> None:
        self._remove_namespaces()  # a run killed before its teardown left them
        _ip("netns", "add", HUB)
        _ip("-n", HUB, "link", "set", "lo", "up")
        _ip("-n", HUB, "link", "add", BRIDGE, "type", "bridge", "stp_state", "0",
            "forward_delay", "0")
        _ip("-n", HUB, "link", "set", BRIDGE, "up")
        for h in self.hosts.values():
            _ip("netns", "add", h.ns)
            _ip("-n", h.ns, "link", "set", "lo", "up")
            _ip("-n", HUB, "link", "add", f"v-{h.name}", "type", "veth", "peer", "name",
                f"e-{h.name}")
            _ip("-n", HUB, "link", "set", f"e-{h.name}", "netns", h.ns)
            _ip("-n", h.ns, "link", "set", f"e-{h.name}", "name", "eth0")
            _ip("-n", h.ns, "addr", "add", f"{h.addr}/24", "dev", "eth0")
            _ip("-n", h.ns, "link", "set", "eth0", "up")
            _ip("-n", HUB, "link", "set", f"v-{h.name}", "master", BRIDGE, "up")

    def down(self) -> None:
        for h in self.hosts.values():
            for label in list(h.procs):
                try:
                    h.stop(label, signal.SIGKILL, timeout=10)
                except AssertionError:
                    pass
        self._remove_namespaces()
        if self._root is not None:  # once: its logs stay kept for the test running now
            logkeeper.unwatch(self._root)
            self._root = None

    def _remove_namespaces(self) -> None:
        for ns in self._ours():
            # Only processes inside our own rdp- namespaces: an earlier run's daemons and jobs.
            for pid in _ip("netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _ip("netns", "del", ns, check=False)


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0,
             every: float = 0.2) -> Any:
    """Poll `check` until it returns something true; its last answer is in the failure."""
    deadline = Deadline(timeout)  # stretched as the machine gets busier
    last: Any = None
    while True:
        try:
            last = check()
        except AssertionError as exc:
            last = exc
        if last and not isinstance(last, AssertionError):
            return last
        if deadline.passed():
            raise AssertionError(f"not within {deadline.elapsed():.0f} s ({timeout:.0f} s quiet): "
                                 f"{what}; last: {last}")
        time.sleep(every)


# -- installing --------------------------------------------------------------------------------


def export_tree(dest: Path, commit: str | None = None) -> Path:
    """The sources a wheel is built from: `commit` (git archive), or the working tree as it is
    (tracked and untracked files git does not ignore: no venv, no build output)."""
    dest.mkdir(parents=True)
    if commit is not None:
        archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=REPO,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return dest
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], cwd=REPO, capture_output=True,
                           check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = REPO / os.fsdecode(name)
        if src.is_file():
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def start_wheel_build(tree: Path, out: Path) -> subprocess.Popen:
    """`pip wheel --no-deps` of `tree` into `out`, in the background (two builds overlap).
    With the setuptools pyproject.toml asks for already here (ranch[test] brings it), without
    build isolation: pip's fresh build environment is most of a build's time."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        isolate = int(version("setuptools").split(".")[0]) < 77
    except PackageNotFoundError:
        isolate = True
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                             *([] if isolate else ["--no-build-isolation"]),
                             "--wheel-dir", str(out), str(tree)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finish_wheel_build(build: subprocess.Popen, out: Path) -> Path:
    output = build.communicate(timeout=600)[0].decode(errors="replace")
    wheels = sorted(out.glob("ranch-*.whl"))
    if build.returncode != 0 or len(wheels) != 1:
        raise AssertionError(f"pip wheel failed ({build.returncode}):\n{output[-3000:]}")
    return wheels[0]


def install(*pairs: tuple[Path, Path]) -> list[Path]:
    """For each (wheel, venv): a new venv with the wheel installed (the pips run side by side),
    its dependencies taken from the environment running the tests (a .pth naming that
    site-packages: nothing downloaded, and none of its .pth files, so not the editable install
    of this tree, are read)."""
    import trio

    deps = Path(trio.__file__).parents[1]
    running = []
    for wheel, venv in pairs:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "zz-ranch-test-deps.pth").write_text(f"{deps}\n")
        running.append(subprocess.Popen(
            [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
             "--quiet", "--no-deps", "--no-index", str(wheel)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    for (wheel, _), proc in zip(pairs, running, strict=True):
        output = proc.communicate(timeout=600)[0].decode(errors="replace")
        if proc.returncode != 0:
            raise AssertionError(f"installing {wheel.name} failed:\n{output[-3000:]}")
    return [venv for _, venv in pairs]
