"""`rqueue --why ID` and /api/v1/jobs/{id}/why (issue 44): the job side's plain data handed to
the pure explanation (ranch/sched/why.py): backfill's snapshot of the queue and nodes, each
node's state words, the dependency, the accounting limit and the jobs holding under it, and the
job resolved for each other partition it may use."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ranch.conf import hostlist
from ranch.conf.timefmt import slurm_timestamp
from ranch.ctld.jobs import schedviews
from ranch.ctld.jobs.jobrecord import PENDING, Job
from ranch.ctld.jobs.limitpass import HOLDING, RuleOf, held_ask, pending_ask
from ranch.protocol import messages as m
from ranch.sched.model import Pending
from ranch.sched.why import Explanation, NodeNote, Scene, explain
from ranch.sched.whylimits import Holding, LimitView
from ranch.statemachine import names

if TYPE_CHECKING:
    from ranch.ctld.jobs.backfill import Snapshot
    from ranch.ctld.jobs.ports import JobReader, NodesForJobs
    from ranch.ctld.jobs.settings import JobSettings

# a queue longer than this is explained in a worker thread, over plain data (the event loop
# keeps serving meanwhile)
THREADED = 200


class WhyDesk:
    """Answers GetWhy from the job side's live state (a snapshot, then the pure explanation,
    in a worker thread for a long queue)."""

    def __init__(self, jobs: JobReader, settings: JobSettings, nodes: NodesForJobs, *,
                 wall: Callable[[], float], snapshot: Callable[[], Snapshot],
                 check: Callable[[m.SubmitJob], Any],
                 dependency: Callable[[Job], str],
                 limits: Callable[[], RuleOf | None]) -> None:
        """`snapshot`: backfill's (ctld/jobs/backfill.py); `check`: a submission's checks (the
        job resolved for another partition); `dependency`: a job's dependency as shown;
        `limits`: the accounting limits' rules while enforced (None: not)."""
        self._jobs = jobs
        self._settings = settings
        self._nodes = nodes
        self._wall = wall
        self._snapshot = snapshot
        self._check = check
        self._dependency = dependency
        self._limits = limits

    async def answer(self, msg: m.GetWhy) -> m.WhyReply | m.Error:
        job = self._jobs.jobs.get(msg.job_id)
        if job is None or (msg.only_uid != -1 and job.req.uid != msg.only_uid):
            return m.Error("bad_request", f"Invalid job id specified: {msg.job_id}",
                           field="job_id")
        now = self._wall()
        if job.state != PENDING:
            return m.WhyReply(job.id, job.state, job.reason, _not_pending(job), (),
                              generated_at=now)
        work = self.prepare(job)
        if len(work[0].queue) > THREADED:
            got = await trio.to_thread.run_sync(_explain, *work)
        else:
            got = _explain(*work)
        return reply_of(got, job.state, now)

    def prepare(self, job: Job) -> tuple[Scene, int, str, str, LimitView | None,
                                         tuple[Pending, ...]]:
        """explain()'s arguments, read from the live state (on the event loop)."""
        snap = self._snapshot()
        notes = {name: NodeNote(names.complete(n.state).lower(),
                                n.state.reason.text if n.state.reason else "")
                 for name, n in self._nodes.nodes.items()}
        scene = Scene(snap.cluster, snap.queue, snap.ends, snap.now, snap.params,
                      snap.windows, notes)
        queued = next((q for q in snap.queue if q.job.id == job.id), None)
        why = queued.waits if queued is not None else job.reason
        return (scene, job.id, job.reason, self._detail(job, why), self._limit_view(job, why),
                tuple(self._elsewhere(job)))

    def _detail(self, job: Job, why: str) -> str:
        if why.startswith("Dependency"):
            return self._dependency(job)
        if why == "BeginTime" and job.req.begin_time is not None:
            return slurm_timestamp(job.req.begin_time)
        if why == "JobArrayTaskLimit":
            return f" (at most {job.array_throttle} at once)"
        return ""

    def _limit_view(self, job: Job, why: str) -> LimitView | None:
        """The rule over the job and the jobs holding now, when a limit may hold it."""
        rule_of = self._limits()
        if rule_of is None or not why:
            return None
        req = job.req
        rule = rule_of(req.user, req.account, job.partition, req.qos)
        if rule is None:
            return None
        rules: dict[tuple[str, str, str, str], Any] = {}
        holding = []
        now = self._wall()
        for other in self._jobs.jobs.values():
            if other.state not in HOLDING:
                continue
            r = other.req
            key = (r.user, r.account, other.partition, r.qos)
            if key not in rules:
                rules[key] = rule_of(*key)
            theirs = rules[key]
            if theirs is None:
                continue
            held = held_ask(other, now).counts()
            holding.append(Holding(other.id, r.user, r.account, theirs.qos_name,
                                   tuple(k for k, _ in theirs.chain), held))
        ask = pending_ask(job)
        return LimitView(rule, req.user, req.account, ask.counts(), ask.minutes, tuple(holding))

    def _elsewhere(self, job: Job) -> Iterator[Pending]:
        """The job resolved for each other partition that is up and accepts it."""
        view = schedviews.pending(job)
        for pc in self._settings.config.partitions:
            if pc.name == job.partition or pc.state != "UP":
                continue
            got = self._check(attrs.evolve(job.req, partition=pc.name, array=""))
            if isinstance(got, m.Error):
                continue
            yield attrs.evolve(view, partition=pc.name, need=got.need,
                               time_limit=got.time_limit, req_nodes=got.req_nodes,
                               exc_nodes=got.exc_nodes)


def _explain(scene: Scene, job_id: int, reason: str, detail: str, limit: LimitView | None,
             elsewhere: tuple[Pending, ...]) -> Explanation:
    return explain(scene, job_id, reason, detail=detail, limit=limit, elsewhere=elsewhere)


def reply_of(got: Explanation, state: str, now: float) -> m.WhyReply:
    return m.WhyReply(
        got.job_id, state, got.reason, got.binding, got.evidence, got.start,
        hostlist.fold(list(got.nodes)) if got.nodes else "", got.estimate,
        tuple(m.WhySuggestion(s.option, s.text, s.start,
                              hostlist.fold(list(s.nodes)) if s.nodes else "")
              for s in got.suggestions), now)


def _not_pending(job: Job) -> str:
    nodes = hostlist.fold(list(job.nodes)) if job.nodes else ""
    if job.start_time is not None and job.end_time is None:
        return f"{job.state}: started {slurm_timestamp(job.start_time)} on {nodes}"
    if job.end_time is not None:
        return f"{job.state}: ended {slurm_timestamp(job.end_time)}"
    return f"{job.state}: not pending"
