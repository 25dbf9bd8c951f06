"""A generated trace replayed for real: the jobs submitted held to a running Slurm or Ranch
(tests/conformance's SlurmCluster and RanchCluster), released at once, waited for, and each
job's start and end read back; the same trace through the simulator (ranch/sim) for the
prediction. Used by tests/conformance/test_replay.py and bench/replay_vs_slurm.py."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ranch.conf.build import parse_config_text
from ranch.sim.engine import Outcome, Simulator
from ranch.sim.lublin import generate
from ranch.sim.trace import TraceJob, compressed, whole_nodes

# bf_resolution=1: the planners compare limits to the second (at the default 60 s, minute-long
# limits would be decided by how each rounds to its slots, which is not what is compared here);
# bf_window: the longest limit of a replay's trace
BACKFILL = ("SchedulerType=sched/backfill\n"
            "SchedulerParameters=sched_interval=1,bf_interval=1,bf_resolution=1,bf_window=60\n")


def replay_jobs(count: int, seed: int, nodes: int, longest: int = 6) -> list[TraceJob]:
    """`count` Lublin-Feitelson jobs for a cluster of `nodes` whole nodes, compressed to
    runtimes of 1..`longest` s and limits of 1..30 minutes (the users' estimates, runtime x
    U[1, 10], not rounded to a few steps: limits as varied as the runtimes), all submitted
    at once."""
    jobs = generate(count, seed=seed, max_procs=nodes, steps=())
    return compressed(whole_nodes(jobs), longest)


# A job of runtime r ends on the r-th whole second after its script starts, not r seconds
# after: jobs that end in the same second then end together on both systems. With plain
# `sleep r`, Slurm (which starts jobs 0.1-1 s after a pass, each at its own fraction of a
# second) spread such ends over up to a second, and a backfill cycle between two of them saw
# one node free where Ranch (whose jobs of one pass share the fraction) saw both.
ON_THE_SECOND = '/usr/bin/python3 -c "import time; time.sleep({} - time.time() % 1)"'
ENDED = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY")


def _epoch(stamp: str) -> float | None:
    try:
        return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


#
# RELEASE: the release is made at the start of a second. Each controller's backfill cycles
# keep a place in the second of their own: Slurm's from its backfill thread's 1 s sleeps since
# slurmctld started, Ranch's QUIET (0.2 s) after the release's event pass (a cycle runs an
# interval after the last began, once news has paused). A place just before the jobs'
# whole-second ends leaves each hole they open nearly a second, and under load a start there
# falls into the next second and runs a second longer (27 at +2 where Slurm had +1, and the
# hole for 36 gone: tau-b 0.946 with both cores busy). Ranch's place follows the release,
# so the release is made where its cycles sit early in the second (Slurm's filled both
# holes in each of the nine runs of 2026-11-30, quiet and loaded).
def run(cluster: Any, jobs: Sequence[TraceJob], timeout: float = 300,
        stretch: Callable[[], float] = lambda: 1.0) -> dict[str, Any]:
    """Submit every job held (in id order: priority/basic orders them so), release them all
    in one command, wait until all have ended; {"ids": trace id -> job id, "release": the
    epoch of the release, "times": trace id -> (start, end)}. The wait gives up after
    `timeout` seconds times `stretch()`, read at each poll (tests pass tests/deadline's
    slowdown: on a loaded box slurmctld takes longer to see a job's epilog done, and a job
    stays COMPLETING meanwhile)."""
    ids: dict[int, str] = {}
    for j in jobs:
        r = cluster.run("sbatch", "--parsable", "-H", "-o", "/dev/null", "-J", f"t{j.id}",
                        "-N", str(j.nodes), "--exclusive", "-t", str(j.time_limit),
                        "--wrap", ON_THE_SECOND.format(int(j.runtime)))
        assert r.returncode == 0, r.stderr
        ids[j.id] = r.stdout.strip().split(";")[0]
    time.sleep(1 - time.time() % 1)  # released at the start of a second: see RELEASE
    released = time.time()
    r = cluster.run("scontrol", "release", ",".join(ids.values()))
    assert r.returncode == 0, r.stderr
    began = time.monotonic()
    want = {int(v) for v in ids.values()}
    while True:
        states = cluster.states()
        if all(states.get(i, ("",))[0] in ENDED for i in want):
            break
        if time.monotonic() - began > timeout * stretch():
            nodes = cluster.run("sinfo", "-h", "-N", "-o", "%N %T %E").stdout
            raise AssertionError(f"{cluster.name}: jobs not ended: "
                                 f"{ {i: s for i, s in states.items() if s[0] not in ENDED} }"
                                 f"\nnodes:\n{nodes}")
        time.sleep(0.5)
    out = cluster.run("squeue", "-h", "-t", "all", "-o", "%i|%S|%e").stdout
    seen = {}
    for line in out.splitlines():
        jid, start, end = line.split("|")
        seen[jid.strip()] = (_epoch(start.strip()), _epoch(end.strip()))
    times = {tid: seen.get(jid, (None, None)) for tid, jid in ids.items()}
    return {"ids": ids, "release": released, "times": times,
            "states": {tid: states[int(jid)][0] for tid, jid in ids.items()}}


def order(times: dict[int, tuple[float | None, float | None]]) -> list[int]:
    """The trace's jobs by their start (ties by id)."""
    return [t for t, _ in sorted(((t, s) for t, (s, _e) in times.items() if s is not None),
                                 key=lambda x: (x[1], x[0]))]


def utilisation(jobs: Sequence[TraceJob], times: dict[int, tuple[Any, Any]], nodes: int) -> float:
    """Percent of the nodes busy from the first start to the last end (whole-node jobs)."""
    done = [(j.nodes, *times[j.id]) for j in jobs if None not in times[j.id]]
    if not done:
        return 0.0
    first = min(s for _, s, _ in done)
    last = max(e for _, _, e in done)
    busy = sum(n * (e - s) for n, s, e in done)
    return 100 * busy / (nodes * (last - first)) if last > first else 0.0


def simulate(shape: Any, jobs: Sequence[TraceJob], scheduler: str = BACKFILL) -> Outcome:
    """The trace through the simulator on the shape's cluster, configured as the real ones."""
    text = ("SlurmctldHost=localhost(127.0.0.1)\n" + scheduler + shape.global_conf()
            + shape.nodes_conf())
    return Simulator(parse_config_text(text)).run(jobs)
