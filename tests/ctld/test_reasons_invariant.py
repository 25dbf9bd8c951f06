"""An invariant over random event sequences (issue 44): after every scheduling pass and backfill
cycle, every pending job has a reason (never blank, never the "None" of a job no pass looked
at), and `rqueue --why` explains each of them. The events: submissions of every kind (sizes,
time limits, holds, dependencies, BeginTime), jobs ending, nodes drained and resumed, holds and
releases, backfill cycles, time passing."""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import beat, make_config, register, wall
from .test_jobs import end, job

EXTRA = "SchedulerParameters=bf_max_job_test=3\nPartitionName=small Nodes=n[1-2]\n"
NODES = ("n1", "n2", "n3", "n4")

submits = st.fixed_dictionaries({
    "num_nodes": st.integers(1, 3), "cpus_per_task": st.integers(1, 4),
    "time_limit": st.sampled_from([5, 30, 60, 240]),
    "partition": st.sampled_from(["main", "main", "small", "main,small"]),
    "hold": st.sampled_from([False, False, False, True]), "exclusive": st.booleans(),
    "after": st.sampled_from([None, None, None, 0, 1]),  # afterok: on an earlier job
    "begin": st.sampled_from([None, None, None, 600]),  # seconds from now
})
ops = st.one_of(
    st.tuples(st.just("submit"), submits), st.tuples(st.just("submit"), submits),
    st.tuples(st.just("submit"), submits),
    st.tuples(st.just("end"), st.integers(0, 30)),
    st.tuples(st.just("drain"), st.sampled_from(NODES)),
    st.tuples(st.just("resume"), st.sampled_from(NODES)),
    st.tuples(st.just("release"), st.integers(0, 30)),
    st.tuples(st.just("backfill"), st.none()),
    st.tuples(st.just("wait"), st.sampled_from([60, 900])),
)


BIG = {"num_nodes": 3, "cpus_per_task": 4, "time_limit": 60, "partition": "main", "hold": False,
       "exclusive": True, "after": None, "begin": None}
# found by this test: a job released behind a queue that waits kept Reason=None
RELEASED = [("submit", BIG)] * 3 + [
    ("submit", {**BIG, "num_nodes": 1, "partition": "main,small", "hold": True, "after": 0,
                "begin": 600}),
    ("drain", "n1"), ("backfill", None), ("end", 0), ("release", 3), ("wait", 900)]

# found by this test: a dependent job submitted behind a waiting job was given Priority at
# submission, and no pass looked at it again (Slurm shows Dependency)
_ONE = {"cpus_per_task": 1, "time_limit": 5, "partition": "main", "hold": False, "begin": None}
DEPENDENT = [("submit", {**_ONE, "num_nodes": 2, "exclusive": True, "after": None}),
             ("submit", {**_ONE, "num_nodes": 3, "exclusive": False, "after": None}),
             ("submit", {**_ONE, "num_nodes": 1, "exclusive": False, "after": 0})]

# found by this test: a job with -d and a --begin later, submitted behind a waiting job, kept the
# BeginTime given at submission; slurmctld's job_independent tests the dependency first
BEGIN_AND_DEPENDENT = [("submit", {**_ONE, "num_nodes": 1, "exclusive": False, "after": None}),
                       ("submit", {**_ONE, "num_nodes": 2, "exclusive": False, "after": None}),
                       ("submit", {**_ONE, "num_nodes": 3, "cpus_per_task": 4,
                                   "exclusive": False, "after": None}),
                       ("submit", {**_ONE, "num_nodes": 1, "exclusive": False, "after": 0,
                                   "begin": 600})]


@settings(max_examples=30, deadline=None)
@example(RELEASED)
@example(DEPENDENT)
@example(BEGIN_AND_DEPENDENT)
@given(st.lists(ops, min_size=3, max_size=24))
def test_every_pending_job_has_a_reason_after_every_pass(steps) -> None:
    trio.run(_run, steps, clock=trio.testing.MockClock(autojump_threshold=0))


async def _run(steps) -> None:
    c = Cluster(make_config(extra=EXTRA), wall=wall)
    c.start()
    conns = {n: register(c, n)[1] for n in NODES}
    seq = dict.fromkeys(NODES, 100)
    ids: list[int] = []
    for kind, arg in steps:
        if kind == "submit":
            kw = dict(arg)
            after, begin = kw.pop("after"), kw.pop("begin")
            if after is not None and len(ids) > after:
                kw["dependency"] = f"afterok:{ids[after]}"
            if begin is not None:
                kw["begin_time"] = wall() + begin
            got = c.jobs.submission.submit(job(**kw))
            if isinstance(got, m.SubmitReply):
                ids.append(got.job_id)
        elif kind == "end" and ids:
            j = c.jobs.store.jobs.get(ids[arg % len(ids)])
            if j is not None and j.state == "RUNNING":
                for name in j.nodes:
                    seq[name] += 1
                    beat(c, name, conns[name], seq[name], jobs_ended=(end(j.id),))
        elif kind in ("drain", "resume"):
            c.update_nodes(m.UpdateNodes(arg, kind.upper(), "test" if kind == "drain" else None,
                                         "root"))
        elif kind == "release" and ids:
            c.jobs.commands.control(m.JobControl("release", (ids[arg % len(ids)],), "alice",
                                                 1000))
        elif kind == "backfill":
            await c.jobs.backfill.cycle()
        elif kind == "wait":
            await trio.sleep(arg)
            c.jobs.kick()
        c.jobs.starts.run()  # the pass the event asked for (run: only when one is due)
        _every_pending_job_has_a_reason(c, (kind, arg))
    for j in list(c.jobs.store.jobs.values()):
        if j.state == "PENDING":
            got = await c.jobs.why.answer(m.GetWhy(j.id))
            assert isinstance(got, m.WhyReply) and got.binding and got.reason == j.reason, got


def _every_pending_job_has_a_reason(c: Cluster, after: tuple) -> None:
    for j in c.jobs.store.jobs.values():
        if j.state == "PENDING":
            assert j.reason not in ("", "None"), (j.id, j.reason, after)
