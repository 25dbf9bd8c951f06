"""A generated trace replayed on real Slurm 22.05 and on real Ranch, both sched/backfill with
bf_interval=1 (issue 44): 40 Lublin-Feitelson jobs on 4 nodes (whole nodes, runtimes
compressed to 1-4 s, limits of 1-5 minutes, as bench/trace_replay.py makes them),
submitted held and released in one command; the order the jobs started in compared by
Kendall's tau (tau-b, >= 0.95: squeue's start times are whole seconds, so jobs that start in
the same second of one system are tied there, not ordered by id). The simulator's prediction
for the same trace (ranch/sim, the same scheduling core in virtual time) is held to Ranch's
real order as well.

Each job ends on the whole second (bench/trace_replay.py ON_THE_SECOND): with plain `sleep`,
Slurm, which starts jobs 0.1-1 s after a pass each at its own fraction of a second, spread
ends that belong to one second over up to a second, and a backfill cycle (every second on
both) between two of them saw one node free and backfilled a one-node job there, where Ranch,
whose jobs of one pass share the fraction, saw both free (job 36: Slurm backfilled it at
+3-9 s in 5 of 6 runs, Ranch in 1). That was timing, moving one job by 20 s (not pairs by a
second, so no tolerance on ties would have covered it, and none is used): tau-b 0.90-0.99
over those runs; with whole-second ends 0.999-1.000. The causes that were Ranch's (a start
now counted a job ahead's reservation that begins in the second its limit ends as free; one
node of an ended two-node job freed before the other let a one-node job in) are fixed and
unit-tested in tests/sched/test_backfill.py and tests/ctld/test_backfill_loop.py.

Under CPU load (a core hogged, the suite on two workers) Ranch once started the one-node jobs
27 and 36 at +19/+22 s where Slurm backfilled them into the one-second hole at +1/+2 (tau-b
0.907): Ranch's cycle timer had drifted to just before the jobs' whole-second ends, so the
hole job 2's end opened waited 0.8 s for a cycle, job 27 then started after the next second
and ran one longer, and the hole for 36 was gone. The cycle now follows the event pass of a
change once it is due (ctld/jobs/backfill.py run; tests/ctld/test_backfill_loop.py).

That left one miss in four busy suites (tau-b 0.947): a cycle that fell due after its news
counted the 0.2 s pause from then, so each cycle sat 0.2 s later in the second than the last
until one sat just before the jobs' ends. The pause now counts from the last event pass
(test_cycles_after_a_pass_each_second_keep_their_place_in_the_second), and the release is
made at the start of a second, where Ranch's cycles then sit early in it (bench/trace_replay.py
RELEASE). Both cores busy (two CPU loops): tau-b 1.000, 0.962, 1.000, where it was 1.000
then 0.946; one core busy: 0.997, 1.000, 1.000."""

from __future__ import annotations

import pytest

from bench.trace_replay import BACKFILL, order, replay_jobs, run, simulate
from ranch.sim.report import kendall_tau_b, start_times
from tests.conformance.conftest import start_slurm
from tests.conformance.ranch_cluster import RanchCluster
from tests.conformance.shape import SHAPE, Shape
from tests.conformance.sidebyside import run_both
from tests.deadline import MAX, slowdown

FOUR = Shape(nodes=("c1", "c2", "c3", "c4"), cpus=SHAPE.cpus)
JOBS = replay_jobs(40, seed=44, nodes=len(FOUR.nodes), longest=4)


@pytest.fixture(scope="module")
def replays() -> dict:
    slurm = start_slurm(FOUR, scheduler=BACKFILL)
    try:
        with RanchCluster(FOUR, scheduler=BACKFILL) as ranch:
            # waits sized for a quiet box, stretched with the load (tests/deadline.py): on a
            # busy one slurmctld may hold a job COMPLETING, its nodes not responding, for a while
            return run_both(slurm, ranch, lambda c: run(c, JOBS, timeout=120, stretch=slowdown),
                            timeout=150 * MAX)
    finally:
        slurm.stop()


def test_the_trace_is_a_mix_the_planner_has_work_in() -> None:
    sizes = {j.nodes for j in JOBS}
    assert {1, 2} <= sizes and len({j.time_limit for j in JOBS}) >= 3
    assert summary_backfilled() > 0  # some job starts out of order in the simulation


def summary_backfilled() -> int:
    return sum(1 for r in simulate(FOUR, JOBS).runs if r.by == "backfill")


def test_start_order_matches_slurm(replays) -> None:
    slurm, ranch = replays["slurm"], replays["ranch"]
    assert set(slurm["states"].values()) == set(ranch["states"].values()) == {"COMPLETED"}
    want, got = starts(slurm), starts(ranch)
    assert len(want) == len(got) == len(JOBS)
    tau = kendall_tau_b(want, got)
    print(f"Kendall tau-b {tau:.3f}\nSlurm {timeline(slurm)}\nRanch {timeline(ranch)}")
    assert tau >= 0.95, (f"Kendall tau-b {tau:.3f}\nSlurm {timeline(slurm)}\n"
                         f"Ranch {timeline(ranch)}")


def test_the_simulator_predicts_the_real_order(replays) -> None:
    predicted = start_times(simulate(FOUR, JOBS).runs)
    tau = kendall_tau_b(predicted, starts(replays["ranch"]))
    assert tau >= 0.9, f"Kendall tau-b {tau:.3f}: simulated {sorted(predicted, key=predicted.get)}"


def starts(replay: dict) -> dict[int, float]:
    return {t: s for t, (s, _e) in replay["times"].items() if s is not None}


def timeline(replay: dict) -> str:
    """The jobs in start order, each with its start in seconds after the first start."""
    got = starts(replay)
    first = min(got.values(), default=0.0)
    return " ".join(f"{t}@{got[t] - first:.0f}" for t in order(replay["times"]))
