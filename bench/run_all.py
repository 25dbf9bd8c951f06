"""Every scale figure of rctld in one table: fleet.py runs for N = 1,000, 10,000 and the largest N
this machine sustains (50,000 asked; the open-file limit may cap it). Writes bench/results.json.

    python bench/run_all.py [--quick] [--out FILE]     (make bench)"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLEET = HERE / "fleet.py"
JOBS = HERE / "jobs_bench.py"

# (nodes, interval, steady window, churn per s, killed nodes)
FULL = ((1_000, 10, 30, 5.0, 10), (10_000, 10, 60, 10.0, 100), (50_000, 30, 90, 10.0, 100))
QUICK = ((200, 5, 10, 2.0, 5), (1_000, 5, 15, 5.0, 10), (2_000, 10, 20, 5.0, 20))
RUN_LIMIT_S = 900  # each fleet.py run bounds itself; this is the backstop

COLUMNS = (  # (key, header, format)
    ("nodes", "nodes", "{:,}"),
    ("interval_s", "int s", "{:g}"),
    ("heartbeats_per_s", "hb/s", "{:,.0f}"),
    ("ctld_cpu_pct", "ctld %cpu", "{:.1f}"),
    ("ctld_rss_mb", "rss MB", "{:.0f}"),
    ("hb_p50_ms", "p50 ms", "{:.1f}"),
    ("hb_p99_ms", "p99 ms", "{:.1f}"),
    ("hb_lost", "lost", "{:d}"),
    ("storm_s", "storm s", "{:.2f}"),
    ("detect_lag_s", "lag s", "{:.3f}"),
    ("rinfo_s", "rinfo s", "{:.2f}"),
    ("rcontrol_show_node_s", "show s", "{:.2f}"),
    ("admin_update_s", "upd1k s", "{:.2f}"),
    ("state_file_bytes", "state KB", "{:,.0f}"),
    ("state_save_ms", "save ms", "{:.1f}"),
    ("false_down", "false dn", "{:d}"),
    ("sim_cpu_pct", "sim %cpu", "{:.1f}"),
)


def run_fleet(nodes: int, interval: int, window: float, churn: float, kill: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        out = Path(tmp) / "figures.json"
        argv = [sys.executable, str(FLEET), "--nodes", str(nodes), "--interval", str(interval),
                "--duration", str(window), "--scenario", "all", "--churn", str(churn),
                "--kill", str(kill), "--json", str(out)]  # fmt: skip
        print(f"\n== {' '.join(argv[1:])}", flush=True)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, timeout=RUN_LIMIT_S, check=False)
            status = proc.returncode
        except subprocess.TimeoutExpired:
            status = "timeout"
        if out.exists():
            fig = json.loads(out.read_text())
        else:
            fig = {"nodes": nodes, "interval_s": interval, "error": f"fleet.py status {status}"}
        fig["run_wall_s"] = round(time.monotonic() - t0, 1)
        return fig


def cell(fig: dict, key: str, fmt: str) -> str:
    v = fig.get(key)
    if v is None:
        return "-"
    if key == "state_file_bytes":
        v = v / 1000
    try:
        return fmt.format(v)
    except (ValueError, TypeError):
        return str(v)


def table(runs: list[dict]) -> str:
    rows = [[h for _, h, _ in COLUMNS]]
    rows += [[cell(f, k, fmt) for k, _, fmt in COLUMNS] for f in runs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def goals(runs: list[dict]) -> list[dict]:
    """The issue's goals, each with the run it is judged on and met / missed / not measured."""
    out = []

    def judge(name: str, fig: dict | None, ok) -> None:
        if fig is None:
            out.append({"goal": name, "verdict": "not measured"})
            return
        try:
            verdict = "met" if ok(fig) else "missed"
        except TypeError:  # a figure is None
            verdict = "not measured"
        out.append({"goal": name, "nodes": fig.get("nodes"), "verdict": verdict})

    def at(n: int) -> dict | None:
        return next((f for f in runs if f.get("nodes") == n), None)

    ten = at(10_000)
    largest = max(runs, key=lambda f: f.get("nodes", 0), default=None)
    judge("10k @10s: ctld < 25% of a core", ten, lambda f: f["ctld_cpu_pct"] < 25)
    judge("10k @10s: ctld RSS < 250 MB", ten, lambda f: f["ctld_rss_mb"] < 250)
    judge("10k @10s: heartbeat p99 < 50 ms", ten, lambda f: f["hb_p99_ms"] < 50)
    if largest is not None and largest.get("nodes", 0) < largest.get("nodes_requested", 0):
        capped = f" (asked {largest['nodes_requested']:,}, ran {largest['nodes']:,}: see notes)"
    else:
        capped = ""
    judge(f"largest N: no heartbeat lost, no false DOWN{capped}", largest,
          lambda f: f["hb_lost"] == 0 and f["false_down"] == 0)
    judge("storm of 10k: all IDLE < 15 s", ten, lambda f: f["storm_s"] < 15)
    for f in runs:
        judge(f"detection lag < 1 s ({f.get('nodes')} nodes)", f, lambda f: f["detect_lag_s"] < 1)
    judge("rinfo at 10k < 0.3 s", ten, lambda f: f["rinfo_s"] < 0.3)
    return out


def run_jobs(count: int) -> dict:
    """bench/jobs_bench.py on 6 and 100 simulated nodes (issue 12's job throughput goals)."""
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        out = Path(tmp) / "jobs.json"
        argv = [sys.executable, str(JOBS), "--jobs", str(count), "--json", str(out)]
        print(f"\n== {' '.join(argv[1:])}", flush=True)
        try:
            subprocess.run(argv, timeout=RUN_LIMIT_S, check=False)
        except subprocess.TimeoutExpired:
            return {"error": "timeout"}
        if not out.exists():
            return {"error": "jobs_bench.py wrote no figures"}
        return json.loads(out.read_text())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small fleets, short windows")
    p.add_argument("--out", default=str(HERE / "results.json"))
    args = p.parse_args()
    plan = QUICK if args.quick else FULL
    runs = [run_fleet(*row) for row in plan]
    jobs = run_jobs(500 if args.quick else 2000)
    verdicts = goals(runs) + [
        {"goal": g["goal"], "verdict": "met" if g["ok"] else "missed"}
        for g in jobs.get("goals", ())
    ]
    print("\n" + table(runs))
    for g in verdicts:
        print(f"  {g['verdict']:>12}  {g['goal']}")
    for f in runs:
        for note in f.get("notes", ()):
            print(f"  note ({f.get('nodes_requested')} asked): {note}")
    doc = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(),
            "nofile_hard": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
        },
        "quick": args.quick, "runs": runs, "jobs": jobs.get("runs"), "goals": verdicts,
    }  # fmt: skip
    Path(args.out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
