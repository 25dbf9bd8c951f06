"""`make demo`: a controller and four fake-GPU nodes on loopback, then `rinfo`, until Ctrl-C.

Everything lives in a fresh temp directory (key, state, node spools, logs). `--once` prints the
listing and stops everything (for tests); `--keep` leaves the temp directory behind.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from protocol import messages as m  # noqa: E402
from protocol.auth import KeyFileError, load_key  # noqa: E402
from protocol.client import ControllerUnreachable, request  # noqa: E402

CONF = REPO / "examples" / "slurm-like.conf"
NODES = ("gpu01", "gpu02", "gpu03", "gpu04")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Demo:
    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.port = free_port()
        self.key_file = str(workdir / "ranch.key")
        self.procs: list[subprocess.Popen] = []
        self.env = dict(os.environ, RANCH_KEY_FILE=self.key_file,
                        RANCH_SERVER=f"127.0.0.1:{self.port}",
                        PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.env.pop("RANCH_CONF", None)
        self.http_port = free_port()
        self.token = secrets.token_urlsafe(24)

    def write_config(self) -> Path:
        """slurm-like.conf and its scripts copied here, HttpListen on a free port, and a token
        file for the web page's drain/resume buttons."""
        for script in CONF.parent.glob("*.sh"):
            shutil.copy2(script, self.dir / script.name)
        tokens = self.dir / "http-tokens"
        tokens.write_text(f"demo:{self.token}\n")
        tokens.chmod(0o600)
        text = re.sub(r"(?m)^HttpListen=.*$", f"HttpListen=127.0.0.1:{self.http_port}",
                      CONF.read_text())
        conf = self.dir / "cluster.conf"
        conf.write_text(text + f"HttpTokenFile={tokens}\n")
        return conf

    def spawn(self, name: str, *argv: str) -> subprocess.Popen:
        with open(self.dir / f"{name}.log", "wb") as log:  # the child keeps its own copy
            proc = subprocess.Popen([sys.executable, *argv], cwd=REPO, env=self.env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def ask(self, msg: object) -> object:
        return request(("127.0.0.1", self.port), load_key(self.key_file), msg, timeout=3)

    def wait(self, pred, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if pred():
                    return
            except (ControllerUnreachable, KeyFileError, OSError):
                pass
            if any(p.poll() is not None for p in self.procs[:1]):
                raise SystemExit(f"demo: rctld exited; see {self.dir / 'rctld.log'}")
            time.sleep(0.1)
        raise SystemExit(f"demo: timed out waiting for {what}; logs in {self.dir}")

    def states(self) -> dict[str, str]:
        snap = self.ask(m.GetSnapshot())
        return {rec["name"]: rec["complete"] for rec in snap.nodes} if isinstance(
            snap, m.Snapshot) else {}

    def start(self) -> None:
        print(f"demo: working directory {self.dir}")
        self.spawn("rctld", "-m", "ctld.main", "-f", str(self.write_config()), "--listen",
                   f"127.0.0.1:{self.port}", "--state-dir", str(self.dir / "state"),
                   "--key-file", self.key_file)
        self.wait(lambda: isinstance(self.ask(m.Ping()), m.Pong), "rctld to start")
        print(f"demo: rctld listening on 127.0.0.1:{self.port}")
        print(f"demo: web page http://127.0.0.1:{self.http_port}/  (drain/resume token: "
              f"{self.token})")
        for name in NODES:
            root_jobs = ("--allow-root-jobs",) if os.getuid() == 0 else ()  # rbatch as root
            self.spawn(name, "-m", "noded.main", "--server", f"127.0.0.1:{self.port}",
                       "--name", name, "--fake-gpus", "4", "--spool-dir", str(self.dir / name),
                       *root_jobs)
        self.wait(lambda: all(self.states().get(n, "").startswith("IDLE") for n in NODES),
                  "the gpu nodes to register")

    def show(self) -> None:
        for args in ([], ["-R"]):
            print("$ " + " ".join(["rinfo", *args]), flush=True)
            subprocess.run([sys.executable, "-m", "cli.rinfo", *args], cwd=REPO, env=self.env,
                           check=False)
        bin_dir = Path(sys.executable).parent
        print(f"\nTry it yourself (another shell, while this one runs):\n"
              f"  export RANCH_SERVER=127.0.0.1:{self.port} RANCH_KEY_FILE={self.key_file}\n"
              f"  {bin_dir}/rinfo -N --metrics\n"
              f"  {bin_dir}/rcontrol update NodeName=gpu02 State=DRAIN Reason=\"bad fan\"\n"
              f"  {bin_dir}/rinfo -R\n"
              f"  {bin_dir}/rbatch -c 2 --gpus 1 --wrap 'echo $CUDA_VISIBLE_DEVICES; sleep 30'\n"
              f"  {bin_dir}/rqueue ; {bin_dir}/rcontrol show job 1\n"
              f"  curl http://127.0.0.1:{self.http_port}/api/v1/nodes/gpu01\n"
              f"  curl -s http://127.0.0.1:{self.http_port}/metrics | grep slurm_nodes_\n"
              f"  curl -X POST -H 'Authorization: Bearer {self.token}' "
              f"-d '{{\"state\": \"DRAIN\", \"reason\": \"bad fan\"}}' "
              f"http://127.0.0.1:{self.http_port}/api/v1/nodes/gpu03/state\n"
              f"  open http://127.0.0.1:{self.http_port}/ in a browser", flush=True)

    def stop(self) -> None:
        """Nodes first (each sends its shutdown notice), then the controller."""
        nodes, ctld = self.procs[1:], self.procs[:1]
        for group in (nodes, ctld):
            for p in group:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in group:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        print("demo: stopped rctld and the nodes")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--once", action="store_true", help="print the listing and stop")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    args = ap.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="ranch-demo-"))
    demo = Demo(workdir)
    try:
        demo.start()
        demo.show()
        if not args.once:
            print("\ndemo: running; Ctrl-C stops everything", flush=True)
            while all(p.poll() is None for p in demo.procs[:1]):
                time.sleep(0.5)
    except KeyboardInterrupt:
        print()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not orphan children
        demo.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
