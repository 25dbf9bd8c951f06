"""Ranch against a real Slurm 22.05 on this machine, the same work interleaved (issue 23's table).

    python bench/vs_slurm.py                  # 2 rounds: Slurm, Ranch, Slurm, Ranch
    python bench/vs_slurm.py --quick          # one small round (a minute or two)
    python bench/vs_slurm.py --ranch before=/tmp/ranch-old --ranch after=.   # two Ranch trees
    python bench/vs_slurm.py --no-slurm --cold-only --install /tmp/ranch-venv  # start-up alone

Slurm runs from the conformance suite's fixture (tests/conformance/slurm_cluster.py: a private
munged, slurmctld and slurmd per node on loopback; root and Slurm 22.05 needed, else Ranch runs
alone and the reason is printed). Ranch runs rctld and one rnoded per node from each tree given,
and its commands as installed beside this Python (.venv/bin/rbatch...), importing that tree;
with `--install DIR`, as a user installs them instead: a new venv in DIR and a regular (not
editable) `pip install` of the tree into it (one tree only), the commands and the floor (`python
-c pass`) from that venv. The cold-start figures (each command's wall and CPU time, and their
ratio to `python -c pass` of the same environment) are medians of runs interleaved command by
command; `--cold-only` stops there.
Both get the same cluster: 6 nodes of 2 CPUs (tests/conformance/shape.py). Every figure is the
median over the rounds, with the 1-minute load average when it was taken. Prints; asserts
nothing; not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conformance.shape import Shape, usable_cpus  # noqa: E402
from tests.conformance.slurm_cluster import SlurmCluster, SlurmUnavailable  # noqa: E402
from tests.integration.cluster import free_port  # noqa: E402

SHAPE = Shape(cluster="bench", nodes=tuple(f"c{i}" for i in range(1, 7)),
              cpus=min(2, usable_cpus()))
RANCH_NAMES = {"sbatch": "rbatch", "squeue": "rqueue", "sinfo": "rinfo", "scancel": "rcancel",
               "scontrol": "rcontrol"}
RANCH_CONF = """\
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
AuthKeyFile={key}
HeartbeatInterval={heartbeat}
SlurmdTimeout=30
MessageTimeout=5
ReturnToService=1
"""
SUBMIT = ("--hold", "-o", "/dev/null", "--wrap", "true")  # queued, never run: submission only


def add_heartbeat_option(parser: argparse.ArgumentParser) -> None:
    """`--heartbeat-interval`, the RanchSide's `heartbeat`, for the benches of CPU per job."""
    parser.add_argument(
        "--heartbeat-interval", type=int, default=10, metavar="S",
        help="rnoded's HeartbeatInterval, seconds (default 10, Ranch's own default: a regular "
             "install; slurmctld pings each slurmd every SlurmdTimeout/3, 100 s by default). "
             "The benches of latency use 1.")


def now_load() -> float:
    return os.getloadavg()[0]


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def daemon_entry(tree: Path, daemon: str) -> list[str]:
    """`-m ranch.ctld` / `-m ranch.noded`, the installed commands' entries (which choose the
    daemon's heap, ranch/protocol/heap.py); a tree from before them runs its main module."""
    package = f"ranch.{daemon}"
    has_entry = (tree / "ranch" / daemon / "__main__.py").exists()
    return ["-m", package if has_entry else f"{package}.main"]


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, float, int]:
    """(wall ms, CPU ms of the child, exit status) of one command."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    wall = (time.perf_counter() - t0) * 1000
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1000
    return wall, cpu, rc


class SlurmSide:
    def __init__(self, workdir: Path) -> None:
        self.label = "slurm"
        self.cluster = SlurmCluster(SHAPE)
        self.workdir = workdir

    def start(self) -> None:
        self.cluster.start()
        self.env = self.cluster.env()

    def stop(self) -> None:
        self.cluster.stop()

    @property
    def ctld_pid(self) -> int:
        return self.cluster.procs["slurmctld"].pid

    def argv(self, command: str, *args: str) -> list[str]:
        return self.cluster.argv(command, *args)

    def python_floor(self) -> list[str] | None:
        return None


class RanchSide:
    """rctld and an rnoded per node, run from `tree`; the commands installed beside this Python
    import that tree (PYTHONPATH comes before the editable install's path entry)."""

    def __init__(self, label: str, tree: Path, workdir: Path, venv: Path | None = None,
                 heartbeat: int = 1) -> None:
        """`heartbeat`: the nodes' HeartbeatInterval (1 s here: the benches of latency see a
        node's silence soon; Ranch's default is 10)."""
        self.label = label
        self.heartbeat = heartbeat
        self.tree = tree.resolve()
        self.workdir = workdir
        self.dir = Path(tempfile.mkdtemp(prefix=f"ranch-vs-slurm-{label}-"))
        self.procs: dict[str, subprocess.Popen] = {}
        self.venv = venv  # commands pip-installed there, importing their own copy
        self.bin = venv / "bin" if venv else Path(sys.executable).parent

    def start(self, timeout: float = 60.0) -> None:
        from ranch.protocol.auth import create_key

        port = free_port()
        key = self.dir / "ranch.key"
        create_key(str(key))
        conf = self.dir / "cluster.conf"
        conf.write_text(RANCH_CONF.format(port=port, key=key, heartbeat=self.heartbeat)
                        + SHAPE.global_conf()
                        + SHAPE.nodes_conf())
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SINFO_", "RANCH_"))}
        env.update(RANCH_SERVER=f"127.0.0.1:{port}", RANCH_KEY_FILE=str(key))
        if self.venv is None:
            env["PYTHONPATH"] = str(self.tree)
            # Bytecode cached in the tree, as an installed command has it: with
            # PYTHONDONTWRITEBYTECODE=1 (this machine's environment) a tree never compiled (a
            # `before` checked out for the bench) compiled every module on every command, 36 ms
            # of client CPU against 14, and that load fell on rctld's figure too.
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env = env
        # a login host's way: no address in the environment, the config file names it
        self.conf_env = {k: v for k, v in env.items()
                         if k not in ("RANCH_SERVER", "RANCH_KEY_FILE")}
        self.conf_env["RANCH_CONF"] = str(conf)
        self.daemon_env = {**env, "PYTHONPATH": str(self.tree)}
        self._spawn("rctld", [*daemon_entry(self.tree, "ctld"), "-f", str(conf), "--state-dir",
                              str(self.dir / "state")])
        for node in SHAPE.nodes:
            argv = [*daemon_entry(self.tree, "noded"), "--server", f"127.0.0.1:{port}",
                    "--name", node, "--spool-dir", str(self.dir / "spool" / node)]
            self._spawn(node, argv)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(self.argv("sinfo", "-h", "-N", "-o", "%N %t"), env=env,
                                 capture_output=True, text=True).stdout.split()
            if out[1::2] == ["idle"] * len(SHAPE.nodes):
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.label}: nodes never became idle:\n"
                           + (self.dir / "rctld.log").read_text()[-2000:])

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.dir / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen([sys.executable, *argv], cwd=self.tree,
                                                env=self.daemon_env, stdout=log,
                                                stderr=subprocess.STDOUT)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def ctld_pid(self) -> int:
        return self.procs["rctld"].pid

    def argv(self, command: str, *args: str) -> list[str]:
        name = RANCH_NAMES[command]
        script = self.bin / name
        if script.exists():
            return [str(script), *args]
        return [sys.executable, "-m", f"ranch.cli.{name}", *args]

    def python_floor(self) -> list[str] | None:
        return [str(self.bin / "python") if self.venv else sys.executable, "-c", "pass"]


# -- the work --------------------------------------------------------------------------------


def median_run(side, argv: list[str], runs: int) -> tuple[float, float]:
    """(median wall ms, median CPU ms) of `runs` runs."""
    got = [timed(argv, side.env, side.workdir) for _ in range(runs)]
    bad = [rc for *_, rc in got if rc != 0]
    if bad:
        raise RuntimeError(f"{' '.join(argv)} failed (exit {bad[0]})")
    return statistics.median(g[0] for g in got), statistics.median(g[1] for g in got)


def parallel_submits(side, submitters: int, each: int, args: tuple[str, ...] = SUBMIT) -> float:
    """Submissions per second of `submitters` shell loops, each submitting `each` jobs (held
    ones unless `args` says otherwise)."""
    cmd = " ".join(f"'{a}'" for a in side.argv("sbatch", *args))
    loop = f"for i in $(seq {each}); do {cmd} >/dev/null || exit 1; done"
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["sh", "-c", loop], env=side.env, cwd=side.workdir)
             for _ in range(submitters)]
    if any(p.wait() for p in procs):
        raise RuntimeError(f"{side.label}: a submitter failed")
    return submitters * each / (time.perf_counter() - t0)


def paced_submits(side, rate: float, count: int, args: tuple[str, ...] = SUBMIT) -> float:
    """`count` submissions, one started every 1/`rate` s whatever the last one is doing (as
    users' commands arrive), so that both sides' controllers see the same arrivals; returns
    the rate achieved. A controller's CPU per request depends on how far apart requests come
    (docs/benchmarks.md, eleventh pass), and loops of commands as fast as each side's commands
    run feed Slurm three times as fast as Ranch."""
    argv = side.argv("sbatch", *args)
    procs: list[subprocess.Popen] = []
    t0 = time.perf_counter()
    for i in range(count):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        procs.append(subprocess.Popen(argv, env=side.env, cwd=side.workdir,
                                      stdout=subprocess.DEVNULL))
    if any(p.wait() for p in procs):
        raise RuntimeError(f"{side.label}: a paced submission failed")
    return count / (time.perf_counter() - t0)


def wait_empty(side, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(side.argv("squeue", "-h", "-o", "%i"), env=side.env,
                             cwd=side.workdir, capture_output=True, text=True).stdout
        if not out.strip():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{side.label}: the queue never emptied")


def cancel_all(side) -> None:
    user = "root" if os.geteuid() == 0 else os.environ.get("USER", str(os.geteuid()))
    subprocess.run(side.argv("scancel", "-u", user), env=side.env, cwd=side.workdir,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    wait_empty(side)


def latencies(side, jobs: int, out: Path) -> tuple[list[float], list[float]]:
    """submit -> running, ms, one job at a time: the job writes its own start time. Measured
    from the submit command's start, and from its end (the acknowledgement)."""
    out.mkdir(parents=True, exist_ok=True)
    got, acked = [], []
    for i in range(jobs):
        mark = out / f"{side.label}-{i}"
        t0 = time.time()
        subprocess.run(side.argv("sbatch", "-o", "/dev/null", "--wrap",
                                 f"date +%s.%N > {mark}.tmp && mv {mark}.tmp {mark}"),
                       env=side.env, cwd=side.workdir, check=True, stdout=subprocess.DEVNULL)
        t1 = time.time()
        deadline = time.monotonic() + 60
        while not mark.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{side.label}: job {i} never started")
            time.sleep(0.002)
        started = float(mark.read_text())
        got.append((started - t0) * 1000)
        acked.append((started - t1) * 1000)
    return got, acked


def makespan(side, jobs: int, out: Path) -> float:
    """Seconds from submitting an array of `jobs` `sleep 0.1` tasks until the last one ended."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    subprocess.run(side.argv("sbatch", f"--array=1-{jobs}", "-o", "/dev/null", "--wrap",
                             f"sleep 0.1; touch {out}/$SLURM_ARRAY_TASK_ID"),
                   env=side.env, cwd=side.workdir, check=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + max(600.0, jobs)
    while len(os.listdir(out)) < jobs:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{side.label}: {len(os.listdir(out))} of {jobs} tasks ended")
        time.sleep(0.05)
    return time.perf_counter() - t0


def cold_start(side, args, put) -> None:
    """Each everyday command once against an empty queue, `args.cold_runs` times, interleaved
    with `python -c pass` (Ranch) so that load changes touch all alike: median wall and CPU
    (user + system of the child), and each one's ratio to the floor. Ranch's commands run twice
    over: finding the controller from the environment (RANCH_SERVER) and, marked "[conf]", from
    the config file (RANCH_CONF), the way a login host does."""
    commands = {"sinfo/rinfo": side.argv("sinfo"), "squeue/rqueue": side.argv("squeue"),
                "sbatch/rbatch --hold": side.argv("sbatch", *SUBMIT),
                "scontrol/rcontrol show node": side.argv("scontrol", "show", "node")}
    envs = dict.fromkeys(commands, side.env)
    conf_env = getattr(side, "conf_env", None)
    if conf_env is not None:
        for name, argv in list(commands.items()):
            commands[f"{name} [conf]"] = argv
            envs[f"{name} [conf]"] = conf_env
    floor = side.python_floor()
    if floor:
        commands = {"python -c pass": floor, **commands}
        envs["python -c pass"] = side.env
    got: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
    for _ in range(args.cold_runs):
        for name, argv in commands.items():
            got[name].append(timed(argv, envs[name], side.workdir))
    for name, runs in got.items():
        if any(rc for *_, rc in runs):
            raise RuntimeError(f"{side.label}: {name} failed")
        wall = statistics.median(w for w, _, _ in runs)
        cpu = statistics.median(c for _, c, _ in runs)
        put(f"{name}, ms", wall)
        put(f"{name} CPU, ms", cpu)
        if floor and name != "python -c pass":
            put(f"{name} / python -c pass", wall / statistics.median(
                w for w, _, _ in got["python -c pass"]))
            put(f"{name} / python -c pass, CPU", cpu / statistics.median(
                c for _, c, _ in got["python -c pass"]))


def one_round(side, args, scratch: Path) -> dict[str, tuple[float, float]]:
    """Every figure of one system: name -> (value, load average when taken)."""
    fig: dict[str, tuple[float, float]] = {}

    def put(name: str, value: float) -> None:
        fig[name] = (value, now_load())
        print(f"  {side.label:>10} {name:<44} {value:10.2f}   (load {fig[name][1]:.2f})",
              flush=True)

    cold_start(side, args, put)
    if args.cold_only:
        return fig
    pid = side.ctld_pid
    rss0 = proc_rss_mb(pid)
    cpu0 = proc_cpu(pid)
    # one submitter: each command timed alone, its CPU from rusage
    t0 = time.perf_counter()
    one = [timed(side.argv("sbatch", *SUBMIT), side.env, side.workdir)
           for _ in range(args.single_submits)]
    if any(rc for *_, rc in one):
        raise RuntimeError(f"{side.label}: a submission failed")
    put("CLI submissions/s, 1 submitter", args.single_submits / (time.perf_counter() - t0))
    put("submit command wall, ms", statistics.median(w for w, _, _ in one))
    put("submit command CPU, ms", statistics.median(c for _, c, _ in one))
    each = max(1, args.submits // 8)
    put("CLI submissions/s, 8 submitters", parallel_submits(side, 8, each))
    done = args.single_submits + 8 * each
    fill = max(0, args.queue - done)
    if fill:
        parallel_submits(side, 8, -(-fill // 8))
        done += 8 * -(-fill // 8)
    put("controller CPU per 1,000 submissions, s", (proc_cpu(pid) - cpu0) / done * 1000)
    put(f"controller RSS with {done:,} queued, MB", proc_rss_mb(pid))
    put("controller RSS growth per 1,000 queued, MB", (proc_rss_mb(pid) - rss0) / done * 1000)
    put(f"squeue/rqueue with {done:,} queued, ms",
        median_run(side, side.argv("squeue"), args.queue_runs)[0])
    put(f"sinfo/rinfo with {done:,} queued, ms",
        median_run(side, side.argv("sinfo"), args.cold_runs)[0])
    cancel_all(side)
    lat, acked = latencies(side, args.latency_jobs, scratch / "lat")
    put("submit -> running p50, ms", statistics.median(lat))
    put("submit -> running p99, ms", p99(lat))
    put("acknowledged -> running p50, ms", statistics.median(acked))
    put("acknowledged -> running p99, ms", p99(acked))
    put(f"{args.makespan_jobs:,} sleep-0.1 jobs (an array), last done, s",
        makespan(side, args.makespan_jobs, scratch / f"mk-{side.label}"))
    return fig


def on_side(side, scratch: Path, run, label: str = "Slurm"):
    """Start `side` (its files in `scratch`), return run(side, scratch), stop it, remove `scratch`;
    None, said, when Slurm cannot run here."""
    try:
        try:
            side.start()
        except SlurmUnavailable as exc:
            print(f"  {label}: Slurm cannot run here: {exc}", flush=True)
            return None
        return run(side, scratch)
    finally:
        side.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else values[0]


def table(results: dict[str, list[dict]], labels: list[str]) -> str:
    names: list[str] = []
    for rounds in results.values():
        for fig in rounds:
            names += [n for n in fig if n not in names]
    versus = [lb for lb in labels if lb != "slurm" and "slurm" in labels]
    head = "| " + " | ".join(["figure", *labels, *(f"{lb} / slurm" for lb in versus)]) + " |"
    lines = [head, "|" + "---|" * (1 + len(labels) + len(versus))]
    for name in names:
        cells, medians = [], {}
        for lb in labels:
            got = [fig[name] for fig in results.get(lb, []) if name in fig]
            if not got:
                cells.append("–")
                continue
            medians[lb] = statistics.median(v for v, _ in got)
            loads = "/".join(f"{load:.1f}" for _, load in got)
            cells.append(f"{medians[lb]:,.1f} (load {loads})")
        ratios = [f"{medians[lb] / medians['slurm']:.2f}×" if lb in medians and medians.get(
            "slurm") else "–" for lb in versus]
        lines.append(f"| {name} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def install(venv: Path, trees: list[tuple[str, Path]]) -> Path:
    """A new venv at `venv` with the (one) Ranch tree pip-installed as a user installs it."""
    if len(trees) != 1:
        raise SystemExit("--install takes one Ranch tree")
    if venv.exists():
        raise SystemExit(f"--install {venv}: exists; give a new directory")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    build = Path(tempfile.mkdtemp(prefix="ranch-build-"))
    try:  # from a copy: pip's in-tree build/ must not land in the tree
        shutil.copytree(trees[0][1], build / "src", ignore=shutil.ignore_patterns(
            ".venv", "build", "__pycache__", "*.egg-info", ".git"))
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(build / "src")],
                       check=True)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return venv


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--queue", type=int, default=5000, help="jobs queued for squeue and RSS")
    p.add_argument("--submits", type=int, default=400, help="jobs the 8 submitters submit")
    p.add_argument("--single-submits", type=int, default=100)
    p.add_argument("--latency-jobs", type=int, default=200)
    p.add_argument("--makespan-jobs", type=int, default=1000)
    p.add_argument("--cold-runs", type=int, default=10)
    p.add_argument("--queue-runs", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="one small round")
    p.add_argument("--no-slurm", action="store_true", help="Ranch alone")
    p.add_argument("--ranch", action="append", metavar="LABEL=TREE",
                   help="a Ranch source tree to run (repeatable; default ranch=this tree)")
    p.add_argument("--json", metavar="FILE", help="write every figure here too")
    p.add_argument("--install", metavar="DIR", type=Path,
                   help="pip-install the Ranch tree (regular, not editable) into a new venv "
                   "DIR and run its commands")
    p.add_argument("--cold-only", action="store_true",
                   help="only the cold-start figures (commands against an empty queue)")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.queue, args.submits, args.single_submits = 1, 400, 80, 20
        args.latency_jobs, args.makespan_jobs, args.cold_runs, args.queue_runs = 20, 100, 5, 3
    trees = [(lb, Path(t)) for lb, _, t in (r.partition("=") for r in args.ranch or [])] \
        or [("ranch", ROOT)]
    labels = ([] if args.no_slurm else ["slurm"]) + [lb for lb, _ in trees]
    print(f"{len(SHAPE.nodes)} nodes of {SHAPE.cpus} CPUs; {os.cpu_count()} CPUs here; "
          f"rounds {args.rounds}; order {', '.join(labels)}", flush=True)
    venv = install(args.install, trees) if args.install else None
    results: dict[str, list[dict]] = {}
    for rnd in range(args.rounds):
        for lb in labels:
            scratch = Path(tempfile.mkdtemp(prefix=f"vs-slurm-{lb}-"))
            side = SlurmSide(scratch) if lb == "slurm" else RanchSide(
                lb, dict(trees)[lb], scratch, venv)
            print(f"round {rnd + 1}: {lb}", flush=True)
            got = on_side(side, scratch, lambda s, d: one_round(s, args, d), lb)
            if got is not None:
                results.setdefault(lb, []).append(got)
    print()
    print(table(results, [lb for lb in labels if lb in results]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
