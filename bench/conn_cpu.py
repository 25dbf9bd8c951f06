"""rctld's CPU per request, without the commands' start: one process sends N requests, each on a
new connection as a command does (SubmitJob as `rbatch --hold --wrap true` sends it, or Ping).

    python bench/conn_cpu.py --ranch before=/tmp/ranch-old --ranch after=. --rounds 3

Splits a CLI submission's controller CPU into the connection's share (Ping) and the job's
(SubmitJob less Ping). Trees interleaved, rctld alone (no nodes), user and system CPU from /proc.
Prints; asserts nothing; not part of `make test`."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.submit_cpu import proc_times  # noqa: E402
from bench.vs_slurm import RANCH_CONF, SHAPE, daemon_entry  # noqa: E402
from ranch.protocol import messages as m  # noqa: E402
from ranch.protocol.auth import create_key, load_key  # noqa: E402
from ranch.protocol.framing import encode_frame  # noqa: E402
from tests.integration.cluster import free_port  # noqa: E402


def job() -> m.SubmitJob:
    return m.SubmitJob(script="#!/bin/sh\n# rbatch --wrap\ntrue\n", user="root", uid=0, gid=0,
                       workdir="/tmp", stdout="/dev/null", hold=True,
                       env=tuple((f"VAR{i}", f"value of variable {i}" * 2) for i in range(40)))


def one_request(port: int, key: bytes, msg) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(encode_frame(msg, key, request_id=1))
        got = b""
        while len(got) < 4 or len(got) < 4 + int.from_bytes(got[:4], "big"):
            d = s.recv(65536)
            if not d:
                raise RuntimeError("connection closed")
            got += d


def run(label: str, tree: Path, kind: str, n: int, clients: int) -> tuple[float, float]:
    work = Path(tempfile.mkdtemp(prefix=f"conn-cpu-{label}-"))
    port = free_port()
    create_key(str(work / "key"))
    key = load_key(str(work / "key"))
    (work / "c.conf").write_text(RANCH_CONF.format(port=port, key=work / "key", heartbeat=1)
                                 + SHAPE.global_conf() + SHAPE.nodes_conf())
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()), RANCH_KEY_FILE=str(work / "key"))
    with open(work / "rctld.log", "ab") as log:
        ctld = subprocess.Popen([sys.executable, *daemon_entry(tree, "ctld"),
                                 "-f", str(work / "c.conf"),
                                 "--state-dir", str(work / "st")], cwd=tree, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                one_request(port, key, m.Ping())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        msg = job() if kind == "submit" else m.Ping()
        each = n // clients
        u0, s0 = proc_times(ctld.pid)
        threads = [threading.Thread(target=lambda: [one_request(port, key, msg)
                                                    for _ in range(each)])
                   for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        u1, s1 = proc_times(ctld.pid)
        k = each * clients
        return (u1 - u0) / k * 1e6, (s1 - s0) / k * 1e6
    finally:
        ctld.send_signal(signal.SIGTERM)
        ctld.wait(15)
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranch", action="append", metavar="LABEL=TREE")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-n", type=int, default=1000)
    p.add_argument("--clients", type=int, default=8)
    args = p.parse_args()
    trees = [(lb, Path(t)) for lb, _, t in (r.partition("=") for r in args.ranch or [])] \
        or [("ranch", ROOT)]
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for kind in ("ping", "submit"):
            for lb, tree in trees:
                r = run(lb, tree, kind, args.n, args.clients)
                got.setdefault((lb, kind), []).append(r)
                print(f"  {lb} {kind}: user {r[0]:.0f} + system {r[1]:.0f} us", flush=True)
    print(f"\nrctld CPU per request, us, medians of {args.rounds} ({args.clients} clients)")
    for (lb, kind), runs in got.items():
        print(f"  {lb:>8} {kind:>6}: {statistics.median(a + b for a, b in runs):6.0f} (user "
              f"{statistics.median(a for a, _ in runs):.0f}, system "
              f"{statistics.median(b for _, b in runs):.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
