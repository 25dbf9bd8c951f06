"""Prints what slow and never-finishing connections cost rctld, and whether the cluster notices.

    .venv/bin/python bench/attack_bench.py [--slow 1500] [--slowloris 1000] [--duration 40]
        [--sources 50] [--fd-limit 1024] [--fill BYTES] [--attacker-nice 10] [--root DIR]
        [--json FILE]

Starts a real rctld (descriptor limit lowered to --fd-limit in the child, soft and hard, as
`prlimit --nofile=1024` would) and two real rnoded, then attacks it from a child process over
loopback only (target 127.0.0.1; source addresses 127.0.1.1-127.0.1.K, so that per-source caps
alone do not decide the outcome):
  - slow: connect, send a length prefix announcing 1 MiB (and --fill bytes of that frame at
    once), then one byte every 5 s;
  - slowloris: connect, say nothing for 5 s, then one byte every 5 s.
Each attacker reconnects --reconnect-delay seconds after rctld drops it, for --duration seconds.
The attacking process runs at niceness --attacker-nice: on one machine its CPU would otherwise
come out of rctld's, which a real attacker's does not (0 measures that worst case too).
Meanwhile `rinfo` runs once a second, a Ping probe every 0.25 s, two more rnoded join and one
is killed and restarted. Printed: rctld's RSS, descriptors and CPU, its listener's accept queue,
how long attack connections lived (goal: none longer than MessageTimeout), rinfo and Ping
latency and failures, registration times (spawn to IDLE), and log lines written.
Goals (issue 18): RSS growth < 50 MB, every slow connection gone within MessageTimeout, rinfo
and registrations keep working. Every run is bounded: at most --slow + --slowloris sockets at
once, and it stops after --duration plus a few seconds of set-up and tear-down. --root DIR runs
rctld, rnoded and rinfo from another checkout, for a before/after comparison.
"""

from __future__ import annotations

import argparse
import errno
import heapq
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import psutil
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ranch.protocol.auth import load_key  # noqa: E402
from ranch.protocol.client import ControllerUnreachable, request_raw  # noqa: E402
from ranch.protocol.rawframe import FrameError  # noqa: E402

TARGET = "127.0.0.1"
DRIP = 5.0  # seconds between the attackers' bytes
CONF = """\
ClusterName=attack
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=5
SlurmdTimeout=30
MessageTimeout={mt}
ReturnToService=2
NodeName=n[1-4] CPUs=1 RealMemory=64
PartitionName=main Nodes=n[1-4] Default=YES
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((TARGET, 0))
        return s.getsockname()[1]


class Run:
    """The processes under test and what is measured about them."""

    def __init__(self, workdir: Path, args: argparse.Namespace) -> None:
        self.dir = workdir
        self.args = args
        self.port = free_port()
        self.addr = (TARGET, self.port)
        self.key_file = str(workdir / "ranch.key")
        self.conf = workdir / "cluster.conf"
        self.conf.write_text(CONF.format(port=self.port, mt=args.message_timeout))
        self.procs: dict[str, subprocess.Popen] = {}
        # --root runs rctld, rnoded and rinfo from another checkout (a before/after comparison)
        self.root = Path(args.root).resolve() if args.root else ROOT
        self.env = dict(os.environ, PYTHONPATH=str(self.root), RANCH_KEY_FILE=self.key_file,
                        RANCH_SERVER=f"{TARGET}:{self.port}")
        self.key = b""

    def spawn(self, name: str, argv: list[str], fd_limit: int | None = None) -> None:
        def lower() -> None:
            if fd_limit:
                resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

        with open(self.dir / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen([sys.executable, *argv], cwd=self.root,
                                                env=self.env,
                                                stdout=log, stderr=subprocess.STDOUT,
                                                preexec_fn=lower)

    def start_ctld(self) -> psutil.Process:
        self.spawn("rctld", ["-m", "ranch.ctld", "-f", str(self.conf), "--listen",
                             f"{TARGET}:{self.port}", "--state-dir", str(self.dir / "state"),
                             "--key-file", self.key_file], fd_limit=self.args.fd_limit)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.key = load_key(self.key_file)
                if request_raw(self.addr, self.key, "Ping", {}, timeout=1, version=4)[0] == "Pong":
                    return psutil.Process(self.procs["rctld"].pid)
            except Exception:  # not up yet
                pass
            time.sleep(0.1)
        raise SystemExit("rctld did not start; see " + str(self.dir / "rctld.log"))

    def start_node(self, name: str) -> None:
        self.spawn(name, ["-m", "ranch.noded", "--server", f"{TARGET}:{self.port}",
                          "--name", name,
                          "--spool-dir", str(self.dir / "spool" / name)])

    def states(self) -> dict[str, str]:
        got, snap = request_raw(self.addr, self.key, "GetSnapshot", {}, timeout=5, version=4)
        return {r["name"]: r["complete"] for r in snap["nodes"]} if got == "Snapshot" else {}

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class Attack:
    """The attacking connections, driven by one epoll loop (a trio task each would cost the
    attacking process enough CPU to blur when it notices a close). Each dropped connection
    records (kind, seconds from connect to close, closed within 0.5 s)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lives: list[tuple[str, float, bool]] = []
        self.open = 0
        self.peak_open = 0
        self.connect_errors = 0
        self.sel = selectors.DefaultSelector()
        self.timers: list[tuple[float, int, str, int]] = []  # (when, seq, action, slot)
        self.seq = 0
        self.slots: list[dict] = []

    def at(self, when: float, action: str, slot: int) -> None:
        self.seq += 1
        heapq.heappush(self.timers, (when, self.seq, action, slot))

    def run(self) -> None:
        args = self.args
        kinds = ["slow"] * args.slow + ["slowloris"] * args.slowloris
        start = time.monotonic()
        self.until = start + args.duration
        for i, kind in enumerate(kinds):
            self.slots.append({"kind": kind, "src": f"127.0.1.{i % args.sources + 1}",
                               "sock": None})
            self.at(start, "connect", i)
        while (now := time.monotonic()) < self.until:
            while self.timers and self.timers[0][0] <= now:
                _, _, action, slot = heapq.heappop(self.timers)
                getattr(self, "_" + action)(slot, now)
            wait = min(self.timers[0][0] if self.timers else self.until, self.until) - now
            for key, mask in self.sel.select(max(0.0, wait)):
                self._event(key.data, mask, time.monotonic())
        for state in self.slots:
            if state["sock"] is not None:
                state["sock"].close()

    def _connect(self, slot: int, now: float) -> None:
        state = self.slots[slot]
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.bind((state["src"], 0))
            err = sock.connect_ex((TARGET, self.args.port))
        except OSError:
            err = -1
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            self.connect_errors += 1
            self.at(now + self.args.reconnect_delay, "connect", slot)
            return
        state.update(sock=sock, connected=False, gen=state.get("gen", 0) + 1)
        self.sel.register(sock, selectors.EVENT_WRITE, slot)

    def _event(self, slot: int, mask: int, now: float) -> None:
        state = self.slots[slot]
        sock = state["sock"]
        if not state["connected"]:
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.sel.unregister(sock)
                sock.close()
                state["sock"] = None
                self.connect_errors += 1
                self.at(now + self.args.reconnect_delay, "connect", slot)
                return
            state.update(connected=True, started=now)
            self.open += 1
            self.peak_open = max(self.peak_open, self.open)
            self.sel.modify(sock, selectors.EVENT_READ, slot)
            if state["kind"] == "slow":
                # a 1 MiB frame of protocol 5 whose header no key signed; --fill sends that
                # much of it at once before the trickle (0: the length prefix alone)
                frame = (1 << 20).to_bytes(4, "big") + b"\x00\x05\x09Heartbeat"
                state["rest"] = frame[4 + self.args.fill:] + b"x" * 64
                self._send(slot, frame[: 4 + self.args.fill] + b"x" * max(
                    0, self.args.fill - len(frame) + 4), now)
            else:
                state["rest"] = b"\x00\x00\x00\x80\x00\x05" + b"y" * 64
            if state["sock"] is not None:
                self.at(now + DRIP, "drip", slot * 1_000_000 + state["gen"])
            return
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._dropped(slot, now)

    def _drip(self, token: int, now: float) -> None:
        slot, gen = divmod(token, 1_000_000)
        state = self.slots[slot]
        if state["sock"] is None or state.get("gen") != gen:
            return  # that connection is gone
        byte, state["rest"] = state["rest"][:1] or b"z", state["rest"][1:]
        self._send(slot, byte, now)
        if state["sock"] is not None:
            self.at(now + DRIP, "drip", token)

    def _send(self, slot: int, data: bytes, now: float) -> None:
        sock = self.slots[slot]["sock"]
        try:
            sock.setblocking(True)  # a fill of up to 1 MiB: the kernel takes it quickly
            sock.settimeout(5)
            sock.sendall(data)
            sock.setblocking(False)
        except OSError:
            self._dropped(slot, now)

    def _dropped(self, slot: int, now: float) -> None:
        state = self.slots[slot]
        sock = state["sock"]
        self.sel.unregister(sock)
        sock.close()
        state["sock"] = None
        self.open -= 1
        lived = now - state["started"]
        self.lives.append((state["kind"], lived, lived < 0.5))
        self.at(now + self.args.reconnect_delay, "connect", slot)


def attacker_main(args: argparse.Namespace) -> None:
    """The attack alone (the child process): runs until the deadline, writes its figures."""
    attack = Attack(args)
    attack.run()
    Path(args.attacker).write_text(json.dumps({
        "lives": attack.lives, "peak_open": attack.peak_open,
        "connect_errors": attack.connect_errors,
    }))


def accept_queue(port: int) -> int:
    """Connections waiting in the kernel for rctld's listener to accept them."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:
                return int(fields[4].split(":")[1], 16)
    return 0


async def sample(run: Run, proc: psutil.Process, out: dict, until: float) -> None:
    """rctld's RSS and descriptors, rinfo latency, node states: every second until `until`."""
    rinfo_s: list[float] = []
    failures: list[str] = []
    bad_states: set[str] = set()
    seen_idle: set[str] = set()  # a node not yet registered shows unk*, which is no failure
    rss: list[float] = []
    fds: list[int] = []
    queue: list[int] = []
    while trio.current_time() < until:
        rss.append(proc.memory_info().rss / 2**20)
        fds.append(proc.num_fds())
        queue.append(accept_queue(run.port))
        t0 = time.perf_counter()
        r = await trio.run_process([sys.executable, "-m", "ranch.cli.rinfo", "-h", "-N", "-o",
                                    "%N %t"],
                                   cwd=run.root, env=run.env, capture_stdout=True,
                                   capture_stderr=True, check=False)
        took = time.perf_counter() - t0
        if r.returncode == 0:
            rinfo_s.append(took)
            for line in r.stdout.decode().splitlines():
                name, _, state = line.partition(" ")
                if state == "idle":
                    seen_idle.add(name)
                elif name in seen_idle and (state.endswith("*") or state.startswith("down")):
                    bad_states.add(f"{name} {state}")
        else:
            failures.append(r.stderr.decode().strip()[-200:])
        await trio.sleep(max(0.0, 1.0 - took))
    out.update(rss_mb=rss, fds=fds, accept_queue=queue, rinfo_s=rinfo_s,
               rinfo_failures=failures, bad_states=sorted(bad_states))


async def probe(run: Run, out: dict, until: float) -> None:
    """The controller's own answer time: a Ping from this process (connect, sign, reply) every
    0.25 s, without a command's start-up."""
    rtts: list[float] = []
    failures = 0
    while trio.current_time() < until:
        t0 = time.perf_counter()
        try:
            # protocol version 4: the Ping an older rctld (--root) also answers
            got, _ = await trio.to_thread.run_sync(
                partial(request_raw, run.addr, run.key, "Ping", {}, version=4))
            if got == "Pong":
                rtts.append(time.perf_counter() - t0)
            else:
                failures += 1
        except (ControllerUnreachable, OSError, FrameError):
            failures += 1
        await trio.sleep(0.25)
    out.update(ping_s=rtts, ping_failures=failures)


async def registrations(run: Run, out: dict, start_at: float) -> None:
    """Two new nodes join and n1 restarts during the attack: how long until each is IDLE."""
    await trio.sleep_until(start_at)
    times: dict[str, float | None] = {}
    t0 = trio.current_time()
    run.procs["n1"].kill()
    await trio.to_thread.run_sync(run.procs["n1"].wait)
    for name in ("n3", "n4", "n1"):
        run.start_node(name)
    pending = {"n3", "n4", "n1"}
    while pending and trio.current_time() - t0 < 30:
        try:
            states = await trio.to_thread.run_sync(run.states)
        except (ControllerUnreachable, OSError, FrameError):
            states = {}
        for name in list(pending):
            # n1 was IDLE before its restart; ReturnToService=2 keeps it so: wait for its new boot
            if states.get(name) == "IDLE" and (name != "n1" or trio.current_time() - t0 > 1):
                times[name] = round(trio.current_time() - t0, 2)
                pending.discard(name)
        await trio.sleep(0.2)
    for name in pending:
        times[name] = None
    out["registered_s"] = times


async def main_async(run: Run, proc: psutil.Process, args: argparse.Namespace) -> dict:
    fig: dict = {}
    now = trio.current_time()
    # baseline: a few rinfo runs without attack
    base: dict = {}
    await sample(run, proc, base, now + 3)
    fig["rss_before_mb"] = round(statistics.median(base["rss_mb"]), 1)
    fig["fds_before"] = max(base["fds"])
    fig["rinfo_before_p50_s"] = round(statistics.median(base["rinfo_s"]), 3)
    log_before = (run.dir / "rctld.log").stat().st_size
    start = trio.current_time()
    until = start + args.duration
    during: dict = {}
    # The attacker runs in a child process at lower priority: on one machine its CPU would
    # otherwise be taken from rctld's, which a real attacker's is not.
    stats = run.dir / "attacker.json"
    attacker = subprocess.Popen(
        [sys.executable, __file__, "--attacker", str(stats), "--port", str(run.port),
         "--slow", str(args.slow), "--slowloris", str(args.slowloris),
         "--duration", str(args.duration), "--sources", str(args.sources),
         "--reconnect-delay", str(args.reconnect_delay), "--fill", str(args.fill)],
        cwd=ROOT, preexec_fn=lambda: os.nice(args.attacker_nice))
    cpu0 = (sum(proc.cpu_times()[:2]), time.monotonic())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample, run, proc, during, until)
        nursery.start_soon(probe, run, during, until)
        nursery.start_soon(registrations, run, fig, start + 5)
    elapsed = time.monotonic() - cpu0[1]
    fig["ctld_cpu_pct"] = round(100 * (sum(proc.cpu_times()[:2]) - cpu0[0]) / elapsed)
    await trio.to_thread.run_sync(attacker.wait)
    got = json.loads(stats.read_text())
    attack = Attack(args)
    attack.lives = [tuple(x) for x in got["lives"]]
    attack.peak_open, attack.connect_errors = got["peak_open"], got["connect_errors"]
    after: dict = {}
    await sample(run, proc, after, trio.current_time() + 2)
    log = (run.dir / "rctld.log").read_text(errors="replace")
    mt = args.message_timeout
    held = {k: [lived for kind, lived, fast in attack.lives if kind == k and not fast]
            for k in ("slow", "slowloris")}
    fig.update(
        attack_connections_peak=attack.peak_open,
        attack_connections_made=len(attack.lives),
        refused_at_once=sum(1 for _, _, fast in attack.lives if fast),
        connect_errors=attack.connect_errors,
        rss_max_mb=round(max(during["rss_mb"]), 1),
        rss_growth_mb=round(max(during["rss_mb"]) - fig["rss_before_mb"], 1),
        fds_max=max(during["fds"]),
        accept_queue_max=max(during["accept_queue"]),
        accept_queue_p50=statistics.median(during["accept_queue"]),
        fds_after=after["fds"][-1],
        rinfo_runs=len(during["rinfo_s"]),
        rinfo_failures=len(during["rinfo_failures"]),
        rinfo_first_failures=during["rinfo_failures"][:3],
        rinfo_p50_s=round(statistics.median(during["rinfo_s"]), 3) if during["rinfo_s"] else None,
        rinfo_max_s=round(max(during["rinfo_s"]), 3) if during["rinfo_s"] else None,
        ping_p50_ms=round(1000 * statistics.median(during["ping_s"]), 1)
        if during["ping_s"] else None,
        ping_p99_ms=round(1000 * sorted(during["ping_s"])[int(0.99 * (len(during["ping_s"]) - 1))],
                          1) if during["ping_s"] else None,
        ping_failures=during["ping_failures"],
        nodes_seen_not_responding=during["bad_states"],
        log_lines_during=log.encode()[log_before:].count(b"\n"),
        save_failures=log.count("state save failed"),
        emfile=log.count("Too many open files"),
        message_timeout_s=mt,
    )
    for kind, lives in held.items():
        fig[f"{kind}_held"] = len(lives)
        fig[f"{kind}_held_p50_s"] = round(statistics.median(lives), 2) if lives else None
        fig[f"{kind}_held_max_s"] = round(max(lives), 2) if lives else None
        fig[f"{kind}_over_message_timeout"] = sum(1 for x in lives if x > mt + 0.5)
    fig["nodes_final"] = await trio.to_thread.run_sync(run.states)
    return fig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slow", type=int, default=1500)
    p.add_argument("--slowloris", type=int, default=1000)
    p.add_argument("--duration", type=float, default=40.0, help="attack seconds (max 300)")
    p.add_argument("--sources", type=int, default=50, help="loopback source addresses (1-250)")
    p.add_argument("--fd-limit", type=int, default=1024, help="rctld's RLIMIT_NOFILE")
    p.add_argument("--message-timeout", type=int, default=10)
    p.add_argument("--reconnect-delay", type=float, default=1.0)
    p.add_argument("--fill", type=int, default=0, metavar="BYTES",
                   help="a slow connection sends this much of its 1 MiB frame at once")
    p.add_argument("--attacker-nice", type=int, default=10,
                   help="the attacking process's niceness (0: same priority as rctld)")
    p.add_argument("--root", metavar="DIR",
                   help="run rctld, rnoded and rinfo from this checkout (default: this one)")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--attacker", metavar="FILE", help=argparse.SUPPRESS)  # the child's mode
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = p.parse_args()
    if not (0 < args.duration <= 300 and 1 <= args.sources <= 250
            and 0 <= args.slow + args.slowloris <= 5000 and args.reconnect_delay >= 0.1
            and 0 <= args.fill < 1 << 20):
        p.error("--duration 0-300, --sources 1-250, at most 5,000 attackers, "
                "--reconnect-delay at least 0.1, --fill below 1 MiB")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.slow + args.slowloris + 200
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
        if min(need, hard) < need:
            p.error(f"this process needs {need} descriptors; the hard limit is {hard}")
    if args.attacker:
        attacker_main(args)
        return
    workdir = Path(tempfile.mkdtemp(prefix="attack-bench-"))
    run = Run(workdir, args)
    args.port = run.port
    try:
        proc = run.start_ctld()
        for name in ("n1", "n2"):
            run.start_node(name)
        deadline = time.monotonic() + 30
        while run.states().get("n2") != "IDLE" or run.states().get("n1") != "IDLE":
            if time.monotonic() > deadline:
                raise SystemExit("nodes did not register; see " + str(workdir))
            time.sleep(0.2)
        fig = trio.run(main_async, run, proc, args)
    finally:
        run.stop()
    fig.update(slow=args.slow, slowloris=args.slowloris, sources=args.sources,
               fd_limit=args.fd_limit, duration_s=args.duration, fill=args.fill,
               root=str(run.root))
    width = max(map(len, fig))
    for k, v in fig.items():
        print(f"{k:<{width}}  {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(fig, indent=1))
    if args.keep:
        print(f"work directory: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
