"""What a MUNGE credential costs (AuthType=auth/munge, issue 19): per call, through libmunge
(ctypes) and through the munge/unmunge programs; per request, at the command (wall time) and at
the controller (rctld's CPU time), against the cluster key's HMAC alone. Slurm pays the same: each
of its RPCs carries a munge credential that slurmctld decodes.

    python bench/munge_cost.py [--calls 500] [--requests 300] [--json]

Runs its own munged (own key and socket, tests/munged.py) and rctld on loopback.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from ranch.protocol import munge  # noqa: E402
from ranch.protocol.client import request_raw  # noqa: E402


def per_call(socket: str, calls: int, use: str) -> dict:
    enc, dec = [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        cred = munge.encode(b"k" * 32, socket=socket, use=use)
        t1 = time.perf_counter()
        munge.decode(cred, socket=socket, use=use)
        t2 = time.perf_counter()
        enc.append(t1 - t0)
        dec.append(t2 - t1)
    return {"encode_us": round(statistics.median(enc) * 1e6, 1),
            "decode_us": round(statistics.median(dec) * 1e6, 1)}


def per_request(addr: tuple[str, int], key: bytes, pid: int, n: int, sock: str | None) -> dict:
    proc = psutil.Process(pid)
    for _ in range(20):  # warm up both sides
        request_raw(addr, key, "Ping", {}, munge=sock)
    cpu0 = sum(proc.cpu_times()[:2])
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        kind, _ = request_raw(addr, key, "Ping", {}, munge=sock)
        walls.append(time.perf_counter() - t0)
        assert kind == "Pong", kind
    cpu = sum(proc.cpu_times()[:2]) - cpu0
    return {"wall_ms_median": round(statistics.median(walls) * 1e3, 3),
            "ctld_cpu_us_per_request": round(cpu / n * 1e6, 1)}


def per_command(c, conf: Path, n: int, munge_socket: str | None) -> float:
    """Median wall seconds of a whole `rinfo` process (start-up, import, request, render)."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(REPO), "RANCH_SERVER": f"127.0.0.1:{c.port}",
           "RANCH_KEY_FILE": c.key_file}
    if munge_socket is not None:
        # as a user without the key: munge by fallback, no config to parse (its parse would
        # cost more than munge does; `-f` users pay it either way)
        env["RANCH_KEY_FILE"] = str(conf.parent / "no-such-key")
        env["RANCH_MUNGE_SOCKET"] = munge_socket
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "ranch.cli.rinfo"], env=env, cwd=REPO,
                              capture_output=True)
        walls.append(time.perf_counter() - t0)
        assert done.returncode == 0, done.stderr
    return statistics.median(walls)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--programs", type=int, default=50, help="calls through munge/unmunge")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--commands", type=int, default=20, help="whole rinfo processes")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from tests.integration.cluster import Cluster, free_port
    from tests.munged import Munged, munge_missing

    if (why := munge_missing()) is not None:
        print(f"munge_cost: skipped: {why}")
        return 0
    results: dict = {}
    with Munged() as md:
        results["libmunge"] = per_call(md.socket, args.calls, "libmunge")
        results["programs"] = per_call(md.socket, args.programs, "programs")
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            conf = (f"ClusterName=bench\nSlurmctldHost=localhost(127.0.0.1)\n"
                    f"SlurmctldPort={port}\nAuthType=auth/munge\nAuthInfo=socket={md.socket}\n"
                    "NodeName=n1 CPUs=1\nPartitionName=main Nodes=n1 Default=YES\n")
            with Cluster(Path(tmp), ["n1"], conf_text=conf) as c:
                c.port, c.addr = port, ("127.0.0.1", port)
                c.start_ctld()
                pid = c.ctld.pid  # type: ignore[union-attr]
                results["request_cluster_key"] = per_request(c.addr, c.key, pid,
                                                             args.requests, None)
                results["request_munge"] = per_request(c.addr, b"", pid, args.requests,
                                                       md.socket)
                results["rinfo_ms_cluster_key"] = round(
                    per_command(c, c.conf_path, args.commands, None) * 1e3, 1)
                results["rinfo_ms_munge"] = round(
                    per_command(c, c.conf_path, args.commands, md.socket) * 1e3, 1)
    key, mu = results["request_cluster_key"], results["request_munge"]
    results["munge_extra_ctld_cpu_us"] = round(
        mu["ctld_cpu_us_per_request"] - key["ctld_cpu_us_per_request"], 1)
    results["munge_extra_wall_ms"] = round(mu["wall_ms_median"] - key["wall_ms_median"], 3)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    lm, pg = results["libmunge"], results["programs"]
    print(f"per call, libmunge (ctypes):   encode {lm['encode_us']:8.1f} us   "
          f"decode {lm['decode_us']:8.1f} us")
    print(f"per call, munge/unmunge forks: encode {pg['encode_us']:8.1f} us   "
          f"decode {pg['decode_us']:8.1f} us")
    print(f"per request (Ping), cluster key: {key['wall_ms_median']:.3f} ms at the command, "
          f"{key['ctld_cpu_us_per_request']:.1f} us of rctld CPU")
    print(f"per request (Ping), munge:       {mu['wall_ms_median']:.3f} ms at the command, "
          f"{mu['ctld_cpu_us_per_request']:.1f} us of rctld CPU")
    print(f"munge adds {results['munge_extra_wall_ms']:.3f} ms per request and "
          f"{results['munge_extra_ctld_cpu_us']:.1f} us of controller CPU per request")
    print(f"a whole rinfo process: {results['rinfo_ms_cluster_key']:.1f} ms with the cluster "
          f"key, {results['rinfo_ms_munge']:.1f} ms with munge")
    return 0


if __name__ == "__main__":
    sys.exit(main())
