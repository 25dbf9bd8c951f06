"""`make demo`: rctld and an rnoded for every node of examples/slurm-like.conf that is in service,
on loopback, until Ctrl-C, SIGTERM or SIGHUP (a closed terminal).

Everything lives in a fresh temp directory (key, state, node spools, logs, job output), reached
through the link `./demo-run`; `demo-run/env` (written once the cluster is up) holds what
commands and curl need: `source demo-run/env`. Nothing else is written anywhere: the daemons run
in that directory and log to files in it (the config's log-file keys are dropped from the
demo's copy), so the demo runs as any user. The CLOUD nodes stay powered down until work or
`State=POWER_UP` boots them (examples/resume.sh starts their rnoded), the FUTURE nodes are not
in service: that is what the config says they are.

Stopping the demo in any way (Ctrl-C, SIGTERM, SIGHUP, its own error) ends every process it
started, the jobs included, and removes its directory. The jobs are the hard part: rnoded starts
each under a supervisor in its own session and leaves them running when it stops (as slurmd
does), so no process group or session reaches them. This process therefore makes itself a child
subreaper (Linux): whatever its daemons start stays its descendant even when the parent dies
(resume.sh's rnoded, a job whose rnoded is gone), and on the way out it ends its descendants,
all of them and nothing else. `--once` prints the listing and stops (tests); `--keep` leaves the
temporary directory behind.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ranch.conf.build import load_config  # noqa: E402
from ranch.protocol import messages as m  # noqa: E402
from ranch.protocol.auth import KeyFileError, load_key  # noqa: E402
from ranch.protocol.client import ControllerUnreachable  # noqa: E402
from ranch.protocol.typedclient import request  # noqa: E402

CONF = REPO / "examples" / "slurm-like.conf"
DEMO_ADMIN = "AdminUsers=demo"  # the web token's name: its drains and resumes are an admin's
LINK = "demo-run"  # in the directory the demo runs from (the checkout for `make demo`)
PR_SET_CHILD_SUBREAPER = 36
NOT_STARTED = ("CLOUD", "FUTURE")  # config states of nodes nobody runs until asked
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """SIGTERM or SIGHUP: unwind to the clean-up, like KeyboardInterrupt does for SIGINT."""


def _stop_on_signal(signum: int, _frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def say(text: str = "") -> None:
    """Print; a closed terminal (SIGHUP) must not stop the clean-up, so output is dropped."""
    try:
        print(text, flush=True)
    except OSError:
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # for the rest of the run


def become_subreaper() -> bool:
    """Orphans among our descendants are re-parented to us, not to init (Linux 3.4+)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nodes_to_start() -> list[tuple[str, int]]:
    """(name, GPUs) of every node the example config has in service."""
    cfg = load_config(CONF)
    return [(n.name, n.gpus) for n in cfg.nodes if n.state.upper() not in NOT_STARTED]


class Demo:
    def __init__(self, workdir: Path, link: Path | None) -> None:
        self.dir = workdir
        self.link = link
        self.port = free_port()
        self.http_port = free_port()
        self.token = secrets.token_urlsafe(24)
        self.key_file = str(workdir / "ranch.key")
        self.nodes = nodes_to_start()
        self.procs: list[subprocess.Popen] = []
        self.bin_dir = Path(sys.executable).parent
        # The venv's commands first on PATH: rinfo here, rnoded and rcontrol in resume.sh.
        path = os.pathsep.join([str(self.bin_dir), os.environ.get("PATH", os.defpath)])
        self.env = dict(os.environ, RANCH_KEY_FILE=self.key_file, PATH=path,
                        RANCH_SERVER=f"127.0.0.1:{self.port}",
                        PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.env.pop("RANCH_CONF", None)

    # -- start -----------------------------------------------------------------------------

    def make_link(self) -> None:
        """./demo-run -> the temp directory, replacing a link a dead demo left behind."""
        if self.link is None:
            return
        if self.link.is_symlink():
            other = _live_demo(Path(os.readlink(self.link)))
            if other:
                self.link = None
                raise SystemExit(f"demo: another demo (pid {other}) runs from here; stop it "
                                 f"first, or start this one from another directory")
            self.link.unlink()
        elif self.link.exists():
            say(f"demo: {self.link} exists and is not the demo's link; left alone "
                f"(use {self.dir}/env instead)")
            self.link = None
            return
        self.link.symlink_to(self.dir)

    def write_config(self) -> Path:
        """slurm-like.conf and its scripts copied here, HttpListen on a free port, and a token
        file for the web page's drain/resume buttons: the token is named after an admin
        (AdminUsers=demo), as a write through HTTP needs one (ctld/rpc/permissions.py)."""
        for script in CONF.parent.glob("*.sh"):
            shutil.copy2(script, self.dir / script.name)
        tokens = self.dir / "http-tokens"
        tokens.write_text(f"demo:{self.token}\n")
        tokens.chmod(0o600)
        text = re.sub(r"(?m)^HttpListen=.*$", f"HttpListen=127.0.0.1:{self.http_port}",
                      CONF.read_text())
        # A log file the config names (/var/log/...) is outside this directory, and perhaps not
        # writable by whoever runs the demo: the daemons log to stderr, kept in NAME.log here.
        text = re.sub(r"(?mi)^[ \t]*(SlurmctldLogFile|SlurmdLogFile)[ \t]*=.*\n?", "", text)
        conf = self.dir / "cluster.conf"
        conf.write_text(text + f"HttpTokenFile={tokens}\n{DEMO_ADMIN}\n")
        return conf

    def spawn(self, name: str, *argv: str) -> subprocess.Popen:
        """A daemon in its own session: Ctrl-C reaches only the demo, which stops them in
        order (nodes first, then the controller, which saves its state)."""
        with open(self.dir / f"{name}.log", "wb") as log:  # the child keeps its own copy
            proc = subprocess.Popen([sys.executable, *argv], cwd=self.dir, env=self.env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        self.procs.append(proc)
        return proc

    def ask(self, msg: object) -> object:
        return request(("127.0.0.1", self.port), load_key(self.key_file), msg, timeout=3)

    def wait(self, pred, what: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if pred():
                    return
            except (ControllerUnreachable, KeyFileError, OSError):
                pass
            if self.procs and self.procs[0].poll() is not None:
                raise SystemExit(f"demo: rctld exited ({self.procs[0].returncode})")
            time.sleep(0.1)
        raise SystemExit(f"demo: timed out waiting for {what}")

    def states(self) -> dict[str, str]:
        snap = self.ask(m.GetSnapshot())
        return {rec["name"]: rec["complete"] for rec in snap.nodes} if isinstance(
            snap, m.Snapshot) else {}

    def start(self) -> None:
        say(f"demo: working directory {self.dir}")
        (self.dir / "demo.pid").write_text(f"{os.getpid()}\n")
        self.make_link()
        self.spawn("rctld", "-m", "ranch.ctld", "-f", str(self.write_config()), "--listen",
                   f"127.0.0.1:{self.port}", "--state-dir", str(self.dir / "state"),
                   "--key-file", self.key_file)
        self.wait(lambda: isinstance(self.ask(m.Ping()), m.Pong), "rctld to start")
        say(f"demo: rctld listening on 127.0.0.1:{self.port}")
        for name, gpus in self.nodes:
            fake = ("--fake-gpus", str(gpus)) if gpus else ()
            self.spawn(name, "-m", "ranch.noded", "--server", f"127.0.0.1:{self.port}",
                       "--name", name, "--spool-dir", str(self.dir / "spool" / name),
                       *fake)
        names = [n for n, _ in self.nodes]
        self.wait(lambda: all(self.states().get(n, "").startswith("IDLE") for n in names),
                  f"{len(names)} nodes to register")
        self.write_env()

    def write_env(self) -> None:
        """demo-run/env: what `source` gives a shell to reach this demo (written last: its
        presence says the cluster is up)."""
        values = {
            "RANCH_SERVER": f"127.0.0.1:{self.port}",
            "RANCH_KEY_FILE": self.key_file,
            "RANCH_URL": f"http://127.0.0.1:{self.http_port}",
            "RANCH_TOKEN": self.token,
            "RANCH_DEMO_DIR": str(self.dir),
            "RANCH_DEMO_PID": str(os.getpid()),
        }
        lines = ["# Written by Ranch's demo; removed when it stops. Use: source demo-run/env",
                 "# RANCH_SERVER and RANCH_KEY_FILE are read by rinfo, rcontrol, rbatch, ...;",
                 "# RANCH_URL and RANCH_TOKEN are for curl (the token may drain and resume).",
                 *(f"export {k}={shlex.quote(v)}" for k, v in values.items())]
        tmp = self.dir / "env.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        tmp.chmod(0o600)
        tmp.replace(self.dir / "env")

    def show(self) -> None:
        for args in ([], ["-R"]):
            say("$ " + " ".join(["rinfo", *args]))
            subprocess.run([sys.executable, "-m", "ranch.cli.rinfo", *args], cwd=self.dir,
                           env=self.env, check=False)
        env_file = self.link / "env" if self.link else self.dir / "env"
        here = Path.cwd()
        activate = self.bin_dir / "activate"
        path_line = (f"source {shlex.quote(str(activate))}" if activate.exists()
                     else f"export PATH={shlex.quote(str(self.bin_dir))}:$PATH")
        say("\ndemo: cloud[01-04] are CLOUD nodes, powered down (idle~) until work or "
            "State=POWER_UP boots them;\n      future[01-02] are FUTURE nodes, not in service.")
        say(f"demo: web page http://127.0.0.1:{self.http_port}/  (token for drain/resume: "
            f"{self.token})")
        env_arg = (os.path.relpath(env_file, here) if env_file.is_relative_to(here)
                   else str(env_file))
        say(f"\nIn another terminal, paste this line (commands on PATH, this demo's address, "
            f"key, URL and token):\n"
            f"  cd {shlex.quote(str(here))} && {path_line} && source {shlex.quote(env_arg)} "
            f"&& cd \"$RANCH_DEMO_DIR\"\n"
            f"(the last: jobs run where they are submitted, so their output lands in the demo's "
            f"directory)\nthen try:\n"
            f"  rinfo -N --metrics\n"
            f"  rcontrol update NodeName=gpu02 State=DRAIN Reason=\"bad fan\" ; rinfo -R\n"
            f"  rbatch -c 1 --gpus 1 --wrap 'echo $CUDA_VISIBLE_DEVICES; sleep 60'\n"
            f"  rqueue ; rcontrol show job 1\n"
            f"  curl -s $RANCH_URL/api/v1/nodes/gpu01\n"
            f"  curl -s $RANCH_URL/metrics | grep '^slurm_nodes'\n"
            f"  curl -s -X POST -H \"Authorization: Bearer $RANCH_TOKEN\" "
            f"-d '{{\"state\": \"RESUME\"}}' $RANCH_URL/api/v1/nodes/gpu02/state\n"
            f"  open $RANCH_URL/ in a browser")

    # -- run -------------------------------------------------------------------------------

    def run_until_stopped(self) -> None:
        say("\ndemo: running; Ctrl-C stops everything (jobs included)")
        last_reap = time.monotonic()
        while self.procs[0].poll() is None:
            time.sleep(0.5)
            if time.monotonic() - last_reap > 5:
                self.reap_orphans()
                last_reap = time.monotonic()
        raise SystemExit(f"demo: rctld exited ({self.procs[0].returncode})")

    def show_log(self, name: str = "rctld", lines: int = 15) -> None:
        """The end of a daemon's log, before the directory holding it goes."""
        try:
            text = (self.dir / f"{name}.log").read_text(errors="replace").splitlines()
        except OSError:
            return
        say(f"demo: the last lines of {name}.log:")
        for line in text[-lines:]:
            say(f"  {line}")

    def reap_orphans(self) -> None:
        """Collect adopted descendants that have ended (ours as subreaper), not our Popens."""
        mine = {p.pid for p in self.procs}
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process().children():
                if child.pid not in mine and child.status() == psutil.STATUS_ZOMBIE:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(child.pid, os.WNOHANG)

    # -- stop ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Nodes first (each sends its shutdown notice), then the controller, then whatever
        is left among our descendants: jobs, a resumed cloud node's rnoded."""
        nodes, ctld = self.procs[1:], self.procs[:1]
        for group in (nodes, ctld):
            for p in group:
                if p.poll() is None:
                    with contextlib.suppress(OSError):
                        p.send_signal(signal.SIGTERM)
            for p in group:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        left = end_descendants(self.dir)
        say(f"demo: stopped rctld, {len(nodes)} nodes" + (f" and {left} other process(es)"
                                                           if left else ""))


def end_descendants(workdir: Path) -> int:
    """SIGTERM, then SIGKILL, every process below this one (and, where we could not be a
    subreaper, every Ranch daemon or job supervisor working in `workdir`) until none is left;
    returns how many there were."""
    me = psutil.Process()
    seen: set[int] = set()
    for attempt in range(20):
        procs = [p for p in _descendants(me) + _strays(workdir)
                 if _alive(p)]
        if not procs:
            break
        seen.update(p.pid for p in procs)
        sig = signal.SIGTERM if attempt == 0 else signal.SIGKILL
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)
        psutil.wait_procs(procs, timeout=3 if attempt == 0 else 1)
        _reap()
    _reap()
    return len(seen)


def _descendants(me: psutil.Process) -> list[psutil.Process]:
    try:
        return me.children(recursive=True)
    except psutil.Error:
        return []


def _strays(workdir: Path) -> list[psutil.Process]:
    """Our daemons and job supervisors that escaped the process tree (no subreaper)."""
    out = []
    needle = str(workdir)
    for p in psutil.process_iter(["cmdline", "uids"]):
        try:
            cmd = " ".join(p.info["cmdline"] or ())
            if (needle in cmd and p.pid != os.getpid()
                    and any(w in cmd for w in ("noded", "ctld", "jobshim"))
                    and p.info["uids"].real == os.getuid()):
                out.append(p)
        except (psutil.Error, TypeError, AttributeError):
            continue
    return out


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _reap() -> None:
    """Wait for every child that has ended (adopted orphans included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _live_demo(workdir: Path) -> int | None:
    """The pid of the demo running in `workdir`, if one still runs."""
    try:
        pid = int((workdir / "demo.pid").read_text())
        proc = psutil.Process(pid)
        if any("demo.py" in part for part in proc.cmdline()):
            return pid
    except (OSError, ValueError, psutil.Error):
        pass
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--once", action="store_true", help="print the listing and stop")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    ap.add_argument("--link", default=LINK, metavar="PATH",
                    help=f"the link to the temp directory (default ./{LINK}; '' for none)")
    args = ap.parse_args(argv)
    # Before anything is started, so that no signal can leave a child behind. SIGINT too: a
    # shell starts a background command with SIGINT ignored, and Python then keeps it so.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _stop_on_signal)
    signal.signal(signal.SIGHUP, _stop_on_signal)
    subreaper = become_subreaper()
    workdir: Path | None = None
    demo: Demo | None = None
    status = 0
    try:
        workdir = Path(tempfile.mkdtemp(prefix="ranch-demo-"))
        demo = Demo(workdir, Path(args.link).absolute() if args.link else None)
        if not subreaper:
            say("demo: cannot become a child subreaper; jobs are found by their directory")
        demo.start()
        demo.show()
        if not args.once:
            demo.run_until_stopped()
    except KeyboardInterrupt:
        say()
    except Stopped as sig:
        say(f"demo: {sig}: stopping")
    except SystemExit as exc:  # our own error: still end everything we started
        if exc.code not in (None, 0):
            say(str(exc.code))
            status = 1
    except Exception:
        say(traceback.format_exc().rstrip())
        status = 1
    finally:
        for sig in STOP_SIGNALS:  # a second Ctrl-C must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        if demo is not None:
            if status and not args.keep:
                demo.show_log()
                say("demo: (`python examples/demo.py --keep` keeps its directory and logs)")
            demo.stop()
            if demo.link is not None and demo.link.is_symlink() and \
                    os.readlink(demo.link) == str(demo.dir):
                demo.link.unlink()
        elif workdir is not None:
            end_descendants(workdir)
        if workdir is not None and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
