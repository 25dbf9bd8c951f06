"""Fleet through relays (issue 47): N simulated nodes split over several processes, each
process a few simulated relays carrying its nodes to one rctld (one connection per relay).

    python bench/fleet_relay.py --nodes 50000 --workers 4 --per-relay 1000 --interval 30

It starts rctld with a generated config of N nodes and their node credentials on file (as if each
had registered straight once), starts the worker processes (bench/fleet_lib/relayworker.py),
and reports: the registration storm's time through the relays, false DOWN (a node whose
heartbeat reply or the controller's snapshot says DOWN or NOT_RESPONDING), rctld's CPU (% of
one core) and RSS over the steady window. The simulated relays speak the real protocol
(protocol/relaymessages.py) and sign each node's frames with that node's key; a relay rnoded
would add one socket per node on its own host, not on rctld's."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root
sys.path.insert(0, str(Path(__file__).resolve().parent))  # fleet_lib

import orjson
import psutil
from fleet_lib.config import Timing, config_text, node_name
from fleet_lib.controller import Controller, free_port

from ranch.ctld.state import integrity


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="fleet_relay.py", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--workers", type=int, default=4, help="simulator processes")
    p.add_argument("--per-relay", type=int, default=1000, help="nodes per simulated relay")
    p.add_argument("--interval", type=int, default=30, help="HeartbeatInterval, seconds")
    p.add_argument("--duration", type=float, default=60.0, help="steady window, seconds")
    p.add_argument("--register-timeout", type=float, default=300.0)
    p.add_argument("--workdir", help="keep rctld's config, state and log here")
    p.add_argument("--json", metavar="FILE", help="write the figures here")
    return p.parse_args(argv)


def judged_down(log: Path | None) -> set[str]:
    """Every node rctld ever set DOWN or NOT_RESPONDING (its log's state changes): none of
    these nodes stopped beating, so each one is a false DOWN."""
    if log is None:
        return set()
    found = set()
    with open(log, errors="replace") as f:
        for line in f:
            if " new=" in line and ("DOWN" in line or "NOT_RESPONDING" in line):
                found.add(line.split(" node=", 1)[-1].split(" ", 1)[0])
    return found


def got_bad(workers: Workers) -> set[str]:
    """The nodes whose heartbeat reply named a DOWN or NOT_RESPONDING state."""
    return {name for doc in workers.latest for name in doc.get("bad", ())}


def write_credentials(state: Path, nodes: int) -> None:
    """Every node's credential digest on file, as after each one's first registration."""
    from fleet_lib.relayworker import digest

    state.mkdir(parents=True, exist_ok=True)
    doc = {"version": 1, "nodes": {node_name(i, nodes): {"sha256": digest(node_name(i, nodes))}
                                   for i in range(1, nodes + 1)}}
    path = state / "node_credentials.json"
    path.write_bytes(integrity.seal(orjson.dumps(doc)))
    os.chmod(path, 0o600)


class Workers:
    """The simulator processes and their latest figures."""

    def __init__(self, args: argparse.Namespace, ctl: Controller) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        share = -(-args.nodes // args.workers)
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent))
        for w in range(args.workers):
            first, last = w * share + 1, min(args.nodes, (w + 1) * share)
            if first > last:
                break
            proc = subprocess.Popen(
                [sys.executable, "-c", "import sys; from fleet_lib import relayworker; "
                 "relayworker.run(sys.argv[1:])", str(first), str(last), str(args.nodes),
                 str(args.per_relay), str(ctl.addr[1]), str(args.interval), str(w + 1)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                cwd=Path(__file__).resolve().parent)
            assert proc.stdin is not None
            proc.stdin.write(ctl.key.hex() + "\n")
            proc.stdin.flush()
            os.set_blocking(proc.stdout.fileno(), False)  # type: ignore[union-attr]
            self.procs.append(proc)
        self.latest: list[dict] = [{} for _ in self.procs]

    def poll(self) -> dict[str, int]:
        for i, proc in enumerate(self.procs):
            assert proc.stdout is not None
            while True:
                line = proc.stdout.readline()
                if not line:
                    break
                self.latest[i] = json.loads(line)
            if proc.poll() is not None:
                raise RuntimeError(f"simulator process {i} exited with {proc.returncode}")
        out: dict[str, int] = {}
        for doc in self.latest:
            for k in ("registered", "refused", "gone", "hb_sent", "hb_replied"):
                out[k] = out.get(k, 0) + int(doc.get(k, 0))
            out["bad"] = out.get("bad", 0) + len(doc.get("bad", ()))
        return out

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def high_water_mb(pid: int) -> float:
    """VmHWM of /proc/PID/status: the largest RSS the process ever had, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) * 1024 / 1e6, 1)
    return 0.0


def measure(args: argparse.Namespace, workdir: Path) -> dict:
    timing = Timing(heartbeat_interval=args.interval, slurmd_timeout=3 * args.interval)
    port = free_port()
    write_credentials(workdir / "state", args.nodes)
    ctl = Controller.spawn(workdir, config_text(args.nodes, timing, port=port), port=port)
    proc = psutil.Process(ctl.pid)
    workers = None
    try:
        base_rss = proc.memory_info().rss
        t0 = time.monotonic()
        workers = Workers(args, ctl)
        while True:
            got = workers.poll()
            if got.get("registered", 0) >= args.nodes:
                break
            if time.monotonic() - t0 > args.register_timeout:
                raise RuntimeError(f"only {got.get('registered', 0)} of {args.nodes} registered "
                                   f"in {args.register_timeout:g} s: {got}")
            time.sleep(0.1)
        storm = time.monotonic() - t0
        print(f"{args.nodes} nodes registered through "
              f"{-(-args.nodes // args.per_relay)} relays in {storm:.1f} s", flush=True)
        time.sleep(min(args.interval, 10))  # the storm's tail of first beats
        cpu0, w0 = proc.cpu_times(), time.monotonic()
        peak = 0
        while time.monotonic() - w0 < args.duration:
            peak = max(peak, proc.memory_info().rss)
            got = workers.poll()
            time.sleep(1.0)
        cpu1, w1 = proc.cpu_times(), time.monotonic()
        got = workers.poll()
        cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / (w1 - w0)
        down = judged_down(ctl.log_path)
        return {
            "nodes": args.nodes, "relays": -(-args.nodes // args.per_relay),
            "workers": len(workers.procs), "interval_s": args.interval,
            "register_s": round(storm, 2), "steady_s": round(w1 - w0, 1),
            "false_down": len(down | got_bad(workers)), "gone": got.get("gone", 0),
            "hb_sent": got.get("hb_sent", 0), "hb_replied": got.get("hb_replied", 0),
            "ctld_cpu_pct": round(100 * cpu, 1),
            "ctld_rss_mb": round(proc.memory_info().rss / 1e6, 1),
            "ctld_rss_peak_mb": round(peak / 1e6, 1), "ctld_rss_start_mb": round(base_rss / 1e6, 1),
            "ctld_fds": proc.num_fds(),
            # the kernel's high-water mark: the storm and every state save included, where
            # the peak above samples the steady window only
            "ctld_rss_hwm_mb": high_water_mb(ctl.pid),
        }
    finally:
        if workers is not None:
            workers.stop()
        ctl.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.workdir:
        figures = measure(args, Path(args.workdir))
    else:
        with tempfile.TemporaryDirectory(prefix="fleet-relay-") as tmp:
            figures = measure(args, Path(tmp))
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
