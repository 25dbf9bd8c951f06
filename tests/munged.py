"""A private munged for tests (own key, socket, pid, log and seed files under one temporary
directory; /etc/munge is never read) and the Unix users alice and bob the multi-user tests act as.

    with Munged() as md:          # skips the test, saying why, where munged is missing
        md.socket                 # AuthInfo=socket=... for rctld, RANCH_MUNGE_SOCKET for commands

munged refuses a socket directory that others cannot search and a key others can read: the
directory is 0755, the key 0400.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

USERS = ("alice", "bob")


def _find(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for d in ("/usr/sbin", "/sbin", "/usr/bin") if os.access(p := f"{d}/{name}", os.X_OK)),
        None)


def munge_missing() -> str | None:
    missing = [n for n in ("munged", "munge", "unmunge") if _find(n) is None]
    if missing:
        return (f"MUNGE is not installed (missing {', '.join(missing)}); on Debian: "
                "apt-get install munge")
    return None


class Munged:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ranch-munged-"))
        self.dir.chmod(0o755)
        self.socket = str(self.dir / "munge.sock")
        self.proc: subprocess.Popen | None = None

    def start(self) -> Munged:
        reason = munge_missing()
        if reason:
            pytest.skip(reason)
        keydir = self.dir / "key"
        keydir.mkdir(mode=0o700)
        key = keydir / "munge.key"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
        # --force: munged is picky about the owners of the directories above ours (a test's
        # /tmp may be anyone's); the files it makes are its own and private all the same
        argv = [_find("munged"), "--foreground", "--force", f"--socket={self.socket}",
                f"--key-file={key}", f"--pid-file={self.dir}/munged.pid",
                f"--log-file={keydir}/munged.log", f"--seed-file={keydir}/munged.seed"]
        if os.getuid() == 0:
            argv.append("--num-threads=4")
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"munged exited ({self.proc.returncode}): {err.strip()}")
            if time.monotonic() > deadline:
                raise RuntimeError("munged did not make its socket within 10 s")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Munged:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def ensure_users() -> dict[str, tuple[int, int]]:
    """alice and bob as (uid, gid), made with useradd when missing (root only; .ci/run makes
    them too). Skips the test, saying why, when they cannot be had."""
    import pwd

    out: dict[str, tuple[int, int]] = {}
    for name in USERS:
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            if os.getuid() != 0:
                pytest.skip(f"user {name} does not exist and only root may create it "
                            "(run as root, or useradd alice and bob)")
            useradd = _find("useradd")
            if useradd is None:
                pytest.skip("useradd is not installed; cannot create the test users")
            done = subprocess.run([useradd, "--no-create-home", "--shell", "/bin/sh", name],
                                  capture_output=True, text=True)
            if done.returncode not in (0, 9):  # 9: made meanwhile by another test run
                pytest.skip(f"useradd {name} failed: {done.stderr.strip()}")
            pw = pwd.getpwnam(name)
        out[name] = (pw.pw_uid, pw.pw_gid)
    return out


def user_python(uid: int, gid: int) -> tuple[str, dict[str, str]]:
    """(interpreter, environment) with which `uid` runs Ranch's commands from this checkout: the
    test's own interpreter when that user may run it, else the system's python of the same
    version with this environment's packages on PYTHONPATH (a pyenv under a 0700 /root is
    root's alone). Skips the test, saying why, when there is none."""
    import site
    import sysconfig

    repo = str(Path(__file__).resolve().parents[1])
    paths = [repo, *site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    env = {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)), "PYTHONDONTWRITEBYTECODE": "1",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    tried = []
    for py in (sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if not os.path.exists(py) or py in tried:
            continue
        tried.append(py)
        try:
            done = subprocess.run([py, "-c",
                                   "import orjson, ranch.protocol.client, ranch.cli.rbatch"],
                                  env=env, cwd="/", user=uid, group=gid, extra_groups=[],
                                  capture_output=True, timeout=30)
        except OSError:
            continue
        if done.returncode == 0:
            return py, env
    pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that uid {uid} "
                f"may run with this checkout's packages (tried {', '.join(tried)})")
