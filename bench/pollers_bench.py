"""500 concurrent rqueue pollers while submissions flow (issue 47): submission latency against a
quiet run, and the controller's CPU per poll, with listings built per request and with the read
cache (SlurmctldParameters=read_cache_ms); with --pair, a controller pair on etcd whose standby
answers the listings (SlurmctldParameters=standby_read_ms).

    python bench/pollers_bench.py                       # 500 pollers every 2 s, 30 s a run
    python bench/pollers_bench.py --pollers 200 --seconds 20 --cache-ms 1000
    python bench/pollers_bench.py --pair                # quiet / on the leader / on the standby
    python bench/pollers_bench.py --pair --pin          # the same, one core per host
    python bench/pollers_bench.py --pair --pin --pages 10   # and ten pages open on the leader
    python bench/pollers_bench.py --pair --pin --pages 10 --pages-only --queue 50000

--pair: one etcd member on loopback, ctl1 (127.0.0.1, the leader) and ctl2 (127.0.0.2, standing by)
with standby_read_ms=1000, the nodes on c1; the runs are quiet, the pollers on the leader, the
pollers on the standby. The leader's CPU per poll is its CPU over the run less the quiet run's,
over the polls answered (by whichever controller); the standby's likewise. --pages N: N pages
open on the leader's web page (HttpListen) in every run after the quiet one, a run with the
pages alone first, whose CPU is then the base of the per-poll figures. --pages-only: the quiet
run, the pages asking for the whole queue every poll (the page before /ui/queue), the pages
asking only for what changed since their listing (the page now).

Each run starts its own rctld and rnoded (bench/vs_slurm.py's cluster: 6 nodes on loopback).
The pollers are protocol clients, not processes: trio tasks in one worker process, each opening a
connection, asking GetJobs for rqueue's fields, reading the reply and closing, every
`--interval` s (watch squeue's 2 s), started at random offsets. Meanwhile this process submits
held jobs (`--rate` a second, a connection each, as rbatch) and times each submission's answer.
`--queue` held jobs are queued first. Runs: quiet (submissions only), pollers without the
cache, pollers with it. The controller's CPU per poll is its CPU over the run less the quiet
run's, over the polls answered. Prints; asserts nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import vs_slurm  # noqa: E402
from vs_slurm import RanchSide, proc_cpu  # noqa: E402

from ranch.protocol import messages as m  # noqa: E402
from ranch.protocol.auth import load_key  # noqa: E402
from ranch.protocol.client import new_request_id  # noqa: E402
from ranch.protocol.tcp import FramedStream  # noqa: E402

FIELDS = ("array_job_id", "array_task_id", "job_id", "name", "node_count", "nodes", "partition",
          "reason", "start_time", "state", "submit_time", "time_limit", "user")


async def ask(addr: tuple[str, int], key: bytes, msg: object) -> object:
    stream = await trio.open_tcp_stream(*addr)
    fs = FramedStream(stream, key)
    try:
        await fs.send(msg, new_request_id())
        return (await fs.receive()).msg
    finally:
        await fs.aclose()


async def pollers(addr: tuple[str, int], key: bytes, n: int, interval: float,
                  seconds: float) -> dict:
    polls, errors, ages, waits = 0, 0, [], []

    async def one(rng: random.Random) -> None:
        nonlocal polls, errors
        await trio.sleep(rng.uniform(0, interval))
        while True:
            t0 = trio.current_time()
            try:
                reply = await ask(addr, key, m.GetJobs(fields=FIELDS))
            except Exception:  # a refused or broken poll: counted
                errors += 1
            else:
                if isinstance(reply, m.JobList):
                    polls += 1
                    ages.append(reply.state_age)
                    waits.append(trio.current_time() - t0)
                else:
                    errors += 1
            await trio.sleep(max(0.0, interval - (trio.current_time() - t0)))

    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(one, random.Random(i))
    waits.sort()
    return {"polls": polls, "errors": errors, "max_age": max(ages, default=0.0),
            "poll_p50_ms": 1000 * waits[len(waits) // 2] if waits else 0.0,
            "poll_p99_ms": 1000 * waits[int(len(waits) * 0.99)] if waits else 0.0}


FAILED = [0]  # submissions refused or cut off, this process


async def submitter(addr: tuple[str, int], key: bytes, rate: float, seconds: float,
                    workdir: str, count: int = 0) -> list[float]:
    """Submission latencies: `rate` a second for `seconds`, or `count` back to back."""
    took: list[float] = []
    msg = m.SubmitJob("#!/bin/sh\ntrue\n", "root", 0, 0, workdir, name="wrap",
                      stdout="/dev/null", hold=True)
    end = trio.current_time() + seconds
    nxt = trio.current_time()
    while trio.current_time() < end or len(took) < count:
        t0 = trio.current_time()
        try:
            reply = await ask(addr, key, msg)
        except (OSError, EOFError):  # closed on us (a controller over its caps): counted
            reply = None
        if isinstance(reply, m.SubmitReply):
            took.append(trio.current_time() - t0)
        else:
            FAILED[0] += 1
        nxt += 1 / rate
        await trio.sleep_until(max(nxt, trio.current_time()))
    return took


PAIR_CONF = """\
SlurmctldHost=ctl1(127.0.0.1)
SlurmctldHost=ctl2(127.0.0.2)
SlurmctldPort={port}
AuthKeyFile={key}
StateStore=etcd
EtcdEndpoints=127.0.0.1:{etcd}
HeartbeatInterval=1
SlurmdTimeout=30
MessageTimeout=5
ReturnToService=1
SlurmctldParameters=standby_read_ms=1000
HttpListen=127.0.0.1:{http}
"""


class PairSide(RanchSide):
    """RanchSide's nodes under a controller pair on one etcd member (loopback)."""

    def start(self, timeout: float = 60.0) -> None:
        from ranch.ctld.state.etcdclient import EtcdClient, EtcdError
        from ranch.protocol.auth import create_key

        port, etcd, peer = vs_slurm.free_port(), vs_slurm.free_port(), vs_slurm.free_port()
        key = self.dir / "ranch.key"
        create_key(str(key))
        conf = self.dir / "cluster.conf"
        self.http = f"http://127.0.0.1:{vs_slurm.free_port()}"
        conf.write_text(PAIR_CONF.format(port=port, key=key, etcd=etcd,
                                         http=self.http.rsplit(":", 1)[1])
                        + vs_slurm.SHAPE.global_conf() + vs_slurm.SHAPE.nodes_conf())
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SINFO_", "RANCH_"))}
        env.update(RANCH_SERVER=f"127.0.0.1:{port}", RANCH_KEY_FILE=str(key),
                   PYTHONPATH=str(self.tree))
        self.env = self.daemon_env = env
        with open(self.dir / "etcd.log", "ab") as log:
            self.procs["etcd"] = subprocess.Popen([
                "etcd", "--name", "b", "--data-dir", str(self.dir / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{etcd}",
                "--advertise-client-urls", f"http://127.0.0.1:{etcd}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"b=http://127.0.0.1:{peer}", "--pre-vote=true",
                "--logger", "zap", "--log-level", "error"], stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while True:
            try:
                trio.run(EtcdClient([f"127.0.0.1:{etcd}"]).range, "/x")
                break
            except (OSError, EtcdError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        for name in ("ctl1", "ctl2"):
            self._spawn(name, [*vs_slurm.daemon_entry(self.tree, "ctld"), "-f", str(conf),
                               "--name", name, "--state-dir", str(self.dir / name),
                               "--key-file", str(key)])
            word = "serving as the controller" if name == "ctl1" else "standing by"
            self._wait_log(name, word, deadline)
        for node in vs_slurm.SHAPE.nodes:
            self._spawn(node, [*vs_slurm.daemon_entry(self.tree, "noded"),
                               "--server", f"127.0.0.1:{port}", "--name", node,
                               "--spool-dir", str(self.dir / "spool" / node)])
        while time.monotonic() < deadline:
            out = subprocess.run(self.argv("sinfo", "-h", "-N", "-o", "%N %t"), env=env,
                                 capture_output=True, text=True).stdout.split()
            if out[1::2] == ["idle"] * len(vs_slurm.SHAPE.nodes):
                return
            time.sleep(0.2)
        raise RuntimeError("nodes never became idle under the pair")

    def _wait_log(self, name: str, word: str, deadline: float) -> None:
        while word not in (self.dir / f"{name}.log").read_text(errors="replace"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} never logged {word!r}:\n"
                                   + (self.dir / f"{name}.log").read_text()[-2000:])
            time.sleep(0.1)

    @property
    def ctld_pid(self) -> int:
        return self.procs["ctl1"].pid

    @property
    def standby_pid(self) -> int:
        return self.procs["ctl2"].pid


def _start(label: str, cache_ms: int, pair: bool) -> RanchSide:
    if pair:
        side: RanchSide = PairSide(label, ROOT, Path(tempfile.mkdtemp()))
        try:
            side.start()
        except BaseException:  # etcd and the controllers started so far go too
            side.stop()
            raise
        return side
    base = vs_slurm.RANCH_CONF
    if cache_ms:
        vs_slurm.RANCH_CONF = base + f"SlurmctldParameters=read_cache_ms={cache_ms}\n"
    side = RanchSide(label, ROOT, Path(tempfile.mkdtemp()))
    try:
        side.start()
    finally:
        vs_slurm.RANCH_CONF = base
    return side


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of the process to `cpus` (sched_setaffinity is per thread: etcd's Go
    threads and trio's worker threads each need it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass  # a thread that ended meanwhile


def pin_hosts(side: RanchSide, worker: subprocess.Popen | None) -> None:
    """--pin: two hosts out of two cores. CPU 0 the leader's host (rctld, etcd) and this
    process (the submissions' client); CPU 1 the other host (the standby, the nodes) and the
    pollers. Every run of a comparison is pinned alike."""
    pin(side.ctld_pid, {0})
    pin(os.getpid(), {0})
    for proc in side.procs.values():
        if proc.pid != side.ctld_pid and proc.poll() is None:
            pin(proc.pid, {0} if proc is side.procs.get("etcd") else {1})
    if worker is not None:
        pin(worker.pid, {1})


# A page on the Jobs tab as jobs.js asks: the queue (whole once, then what changed since the
# listing it holds; `whole` every time, as the page did before /ui/queue) and the header's
# counts, every 3 s (POLL_MS).
PAGE_LOOP = """
import json, sys, time, urllib.request
base, how = sys.argv[1], sys.argv[2]
get = lambda path: urllib.request.urlopen(base + path, timeout=30).read()
get("/ui/grid.json")
mark = ""
while True:
    if how == "whole":
        get("/api/v1/jobs")
    else:
        mark = json.loads(get("/ui/queue" + ("?since=" + mark if mark else "")))["mark"]
    get("/ui/jobs.json")
    time.sleep(3)
"""


def open_pages(base: str, n: int, queue: str = "since") -> list[subprocess.Popen]:
    """`n` open pages on the leader's web page, as app.js and jobs.js ask: each the node feed
    once, the live stream held open, and the Jobs tab's polls (PAGE_LOOP; `queue`: since or
    whole). Each page is a curl and a Python loop (on the pollers' core with --pin)."""
    procs = []
    for _ in range(n):
        procs.append(subprocess.Popen(["curl", "-sN", "-o", "/dev/null", base + "/ui/stream"],
                                      start_new_session=True))
        procs.append(subprocess.Popen([sys.executable, "-c", PAGE_LOOP, base, queue],
                                      start_new_session=True))
    return procs


def close_pages(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        try:
            os.killpg(proc.pid, 9)  # the shell and its curl; a stream reader leads its own
        except ProcessLookupError:
            pass
        proc.wait()


def one_run(label: str, args, cache_ms: int, with_pollers: bool, *, pair: bool = False,
            poll_host: str = "", pages: int = 0, page_queue: str = "since") -> dict:
    """`pair`: on a controller pair; `poll_host`: the address the pollers ask (default the
    controller the submissions go to); `pages`: that many pages open on the leader's web page,
    asking for the queue as `page_queue` says (PAGE_LOOP)."""
    side = _start(label, cache_ms, pair)
    worker = None
    page_procs: list[subprocess.Popen] = []
    standby = side.standby_pid if isinstance(side, PairSide) else 0
    try:
        host, port = side.env["RANCH_SERVER"].split(":")
        keyfile = side.env["RANCH_KEY_FILE"]
        key = load_key(keyfile)
        fill = trio.run(submitter, (host, int(port)), key, 1e6, 0.0, str(side.workdir),
                        args.queue)
        assert len(fill) == args.queue, len(fill)
        time.sleep(2)  # the nodes' registrations and the fill are not the run's cost
        out = Path(side.dir) / "pollers.json"
        if with_pollers:
            worker = subprocess.Popen([sys.executable, __file__, "--poll-worker",
                                       poll_host or host, port,
                                       keyfile, str(args.pollers), str(args.interval),
                                       str(args.seconds + 2), str(out)], env=side.daemon_env)
            time.sleep(2)  # the pollers are at full rate before submissions start
        if pages:
            page_procs = open_pages(side.http, pages, page_queue)  # type: ignore[attr-defined]
            time.sleep(2)  # every page has its feed and its stream before submissions start
        if args.pin:
            pin_hosts(side, worker)
            for proc in page_procs:  # the readers' browsers: on the pollers' core
                pin(proc.pid, {1})
        c0, s0 = proc_cpu(side.ctld_pid), proc_cpu(standby) if standby else 0.0
        FAILED[0] = 0
        took = trio.run(submitter, (host, int(port)), key, args.rate, args.seconds,
                        str(side.workdir))
        cpu = proc_cpu(side.ctld_pid) - c0
        standby_cpu = proc_cpu(standby) - s0 if standby else 0.0
        polled: dict = {}
        if worker is not None:
            worker.wait(args.seconds + 30)
            polled = json.loads(out.read_text())
    finally:
        if args.pin:
            pin(os.getpid(), set(range(os.cpu_count() or 1)))
        if worker is not None and worker.poll() is None:
            worker.kill()
        close_pages(page_procs)
        side.stop()
        shutil.rmtree(side.workdir, ignore_errors=True)
    took.sort()
    return {"label": label, "submits": len(took), "submit_failed": FAILED[0],
            "submit_p50_ms": 1000 * statistics.median(took),
            "submit_p99_ms": 1000 * took[int(len(took) * 0.99)],
            "ctld_cpu_s": cpu, "standby_cpu_s": standby_cpu, "seconds": args.seconds,
            "pages": pages, **polled}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--poll-worker":
        host, port, keyfile, n, interval, seconds, out = argv[1:]
        got = trio.run(pollers, (host, int(port)), load_key(keyfile), int(n), float(interval),
                       float(seconds))
        Path(out).write_text(json.dumps(got))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pollers", type=int, default=500)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=10.0, help="submissions a second")
    ap.add_argument("--cache-ms", type=int, default=1000)
    ap.add_argument("--queue", type=int, default=2000, help="held jobs queued before a run")
    ap.add_argument("--pin", action="store_true",
                    help="CPU 0 the leader's host, CPU 1 the standby's and the pollers'")
    ap.add_argument("--pair", action="store_true",
                    help="a controller pair on etcd: pollers on the leader, then the standby")
    ap.add_argument("--pages", type=int, default=0,
                    help="with --pair: that many pages open on the leader's web page as well")
    ap.add_argument("--pages-only", action="store_true",
                    help="with --pages: quiet, then the pages asking for the whole queue each "
                    "poll (the page before /ui/queue), then only what changed; no pollers")
    args = ap.parse_args(argv)
    if args.pair and args.pages and args.pages_only:
        pages = args.pages
        runs = [one_run("pair-quiet", args, 0, False, pair=True),
                one_run(f"{pages}-pages-whole", args, 0, False, pair=True, pages=pages,
                        page_queue="whole"),
                one_run(f"{pages}-pages-since", args, 0, False, pair=True, pages=pages)]
    elif args.pair and args.pages:
        pages = args.pages
        runs = [one_run("pair-quiet", args, 0, False, pair=True),
                one_run(f"{pages}-pages", args, 0, False, pair=True, pages=pages),
                one_run(f"pollers-on-leader+{pages}p", args, 0, True, pair=True, pages=pages),
                one_run(f"pollers-on-standby+{pages}p", args, 0, True, pair=True,
                        poll_host="127.0.0.2", pages=pages)]
    elif args.pair:
        runs = [one_run("pair-quiet", args, 0, False, pair=True),
                one_run("pollers-on-leader", args, 0, True, pair=True),
                one_run("pollers-on-standby", args, 0, True, pair=True,
                        poll_host="127.0.0.2")]
    else:
        runs = [one_run("quiet", args, 0, False),
                one_run("pollers", args, 0, True),
                one_run(f"pollers, read_cache_ms={args.cache_ms}", args, args.cache_ms, True)]
    report(args, runs)
    return 0


def report(args, runs: list[dict]) -> None:
    # a poll's cost over the last run without pollers (with --pages: the pages alone)
    base = [r for r in runs if "polls" not in r][-1]
    quiet_cpu, quiet_standby = base["ctld_cpu_s"], base["standby_cpu_s"]
    print(f"{args.pollers} pollers every {args.interval} s, {args.rate}/s held submissions, "
          f"{args.queue} jobs queued before, {args.seconds} s a run, load {os.getloadavg()[0]:.1f}")
    for r in runs:
        line = (f"  {r['label']:<28} submit p50 {r['submit_p50_ms']:6.1f} ms  p99 "
                f"{r['submit_p99_ms']:7.1f} ms ({r['submits']} submits, {r['submit_failed']} "
                f"failed)  rctld CPU "
                f"{100 * r['ctld_cpu_s'] / r['seconds']:5.1f} %")
        if "polls" in r:
            per = 1000 * max(0.0, r["ctld_cpu_s"] - quiet_cpu) / max(1, r["polls"])
            line += (f"  polls {r['polls']} ({r['errors']} failed), {per:.3f} ms leader CPU "
                     f"per poll, poll p99 {r['poll_p99_ms']:.0f} ms, max stated age "
                     f"{r['max_age']:.3f} s")
            if args.pair:
                per = 1000 * max(0.0, r["standby_cpu_s"] - quiet_standby) / max(1, r["polls"])
                line += f", {per:.3f} ms standby CPU per poll"
        print(line, flush=True)
    print("  p99 vs quiet: " + ", ".join(
        f"{r['label']} {r['submit_p99_ms'] / runs[0]['submit_p99_ms']:.1f}x" for r in runs[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
