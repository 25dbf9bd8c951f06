"""What a simulation tells an admin: per-account wait (mean, p50, p95), utilisation, bounded
slowdown and makespan, as text or JSON, and the difference between two configs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ranch.sim.engine import Outcome, Run

TAU = 10.0  # seconds: bounded slowdown's floor on the runtime (Feitelson's usual 10 s)


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile (p in [0, 100]) of `values`; 0 for none."""
    if not values:
        return 0.0
    xs = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(xs)))
    return float(xs[rank - 1])


def _waits(runs: Sequence[Run]) -> dict[str, float]:
    waits = [r.start - r.job.submit for r in runs if r.start is not None]
    return {"jobs": len(runs), "started": len(waits),
            "wait_mean": sum(waits) / len(waits) if waits else 0.0,
            "wait_p50": percentile(waits, 50), "wait_p95": percentile(waits, 95)}


def summary(out: Outcome) -> dict[str, Any]:
    """The figures of one simulation (seconds; utilisation in percent of the CPUs)."""
    done = [r for r in out.runs if r.start is not None and r.end is not None]
    first = min((r.job.submit for r in out.runs), default=0.0)
    last = max((r.end for r in done if r.end is not None), default=first)
    makespan = last - first
    busy = sum(r.cpus * ((r.end or 0) - (r.start or 0)) for r in done)
    util = 100 * busy / (out.total_cpus * makespan) if makespan > 0 and out.total_cpus else 0.0
    slow = [max(1.0, ((r.end or 0) - r.job.submit) / max((r.end or 0) - (r.start or 0), TAU))
            for r in done]
    accounts: dict[str, list[Run]] = {}
    for r in out.runs:
        accounts.setdefault(r.job.account or "(none)", []).append(r)
    return {
        "scheduler": out.scheduler,
        "priority": out.priority,
        **_waits(out.runs),
        "refused": len(out.refused),
        "never_started": sum(1 for r in out.runs if r.start is None),
        "backfilled": sum(1 for r in done if r.by == "backfill"),
        "backfill_cycles": out.cycles,
        "utilisation": round(util, 2),
        "bounded_slowdown_mean": sum(slow) / len(slow) if slow else 0.0,
        "bounded_slowdown_p95": percentile(slow, 95),
        "makespan": makespan,
        "accounts": {a: _waits(rs) for a, rs in sorted(accounts.items())},
    }


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Both summaries and after - before of each overall figure."""
    keys = ("wait_mean", "wait_p50", "wait_p95", "utilisation", "bounded_slowdown_mean",
            "makespan", "backfilled")
    return {"before": before, "after": after,
            "change": {k: after[k] - before[k] for k in keys}}


def kendall_tau(first: Sequence[int], second: Sequence[int]) -> float:
    """Kendall's tau between two orders of the same jobs (ids; those in only one are left
    out): 1 the same order, -1 reversed."""
    pos = {j: i for i, j in enumerate(second)}
    ids = [j for j in first if j in pos]
    n = len(ids)
    if n < 2:
        return 1.0
    ranks = [pos[j] for j in ids]
    agree = sum(1 if ranks[i] < ranks[k] else -1 for i in range(n) for k in range(i + 1, n))
    return agree / (n * (n - 1) / 2)


def kendall_tau_b(first: Mapping[int, float], second: Mapping[int, float]) -> float:
    """Kendall's tau-b between two sets of start times (job id -> time; jobs in only one are
    left out): jobs that start at the same time in one of them (squeue's start times are
    whole seconds) are tied there, neither in order nor out of it."""
    ids = sorted(set(first) & set(second))
    agree = tied_a = tied_b = pairs = 0
    for i, p in enumerate(ids):
        for q in ids[i + 1:]:
            pairs += 1
            da, db = first[p] - first[q], second[p] - second[q]
            if da == 0 or db == 0:
                tied_a += da == 0
                tied_b += db == 0
                continue
            agree += 1 if (da > 0) == (db > 0) else -1
    denom = ((pairs - tied_a) * (pairs - tied_b)) ** 0.5
    return agree / denom if denom else 1.0


def start_times(runs: Sequence[Run]) -> dict[int, float]:
    """Job id -> start, of the jobs that started."""
    return {r.job.id: r.start for r in runs if r.start is not None}


def start_order(runs: Sequence[Run]) -> list[int]:
    """The jobs that started, by start time (ties by job id)."""
    return [r.job.id for r in sorted((r for r in runs if r.start is not None),
                                     key=lambda r: (r.start, r.job.id))]


def _dur(s: float) -> str:
    s = round(s)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def text(rep: dict[str, Any], title: str = "") -> str:
    """A summary as an admin reads it."""
    lines = [f"{title}{' ' if title else ''}({rep['scheduler']}, {rep['priority']})",
             f"  jobs {rep['jobs']}  started {rep['started']}  refused {rep['refused']}  "
             f"backfilled {rep['backfilled']}",
             f"  utilisation {rep['utilisation']:.2f}%  makespan {_dur(rep['makespan'])}  "
             f"bounded slowdown mean {rep['bounded_slowdown_mean']:.2f} "
             f"p95 {rep['bounded_slowdown_p95']:.2f}",
             f"  wait mean {_dur(rep['wait_mean'])}  p50 {_dur(rep['wait_p50'])}  "
             f"p95 {_dur(rep['wait_p95'])}",
             f"  {'ACCOUNT':<16} {'JOBS':>6} {'WAIT_MEAN':>12} {'WAIT_P50':>12} "
             f"{'WAIT_P95':>12}"]
    for name, a in rep["accounts"].items():
        lines.append(f"  {name:<16} {a['jobs']:>6} {_dur(a['wait_mean']):>12} "
                     f"{_dur(a['wait_p50']):>12} {_dur(a['wait_p95']):>12}")
    return "\n".join(lines)


def change_text(cmp: dict[str, Any]) -> str:
    c = cmp["change"]

    def signed(s: float) -> str:
        return ("+" if s >= 0 else "-") + _dur(abs(s))

    return "\n".join([
        text(cmp["before"], "before"), text(cmp["after"], "after"),
        f"change: wait mean {signed(c['wait_mean'])}  p50 {signed(c['wait_p50'])}  "
        f"p95 {signed(c['wait_p95'])}  utilisation {c['utilisation']:+.2f} points  "
        f"bounded slowdown {c['bounded_slowdown_mean']:+.2f}  makespan {signed(c['makespan'])}"])
