"""PreemptType=preempt/qos carried out: the pure core's victims (ranch/sched/preempt.py) stopped
through the job table (requeued or PREEMPTED), GraceTime's SIGCONT+SIGTERM and the kill after it,
each preemption recorded in the event log with what it was chosen from."""

from __future__ import annotations

import math
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ranch.conf import hostlist
from ranch.conf.timefmt import parse_seconds
from ranch.ctld import logs
from ranch.ctld.jobs.jobrecord import CONFIGURING, RUNNING, Job
from ranch.ctld.jobs.ports import JobDoor
from ranch.sched.bfpreempt import Preempting
from ranch.sched.preempt import (
    REQUEUE,
    Policy,
    Preemption,
    QosRule,
    Runner,
    Victim,
    choose,
    exempt_ends,
    mode_of,
    preemptable,
)
from ranch.statemachine import jobevents as je
from ranch.statemachine import steptable as st

if TYPE_CHECKING:
    from ranch.assoc.records import Qos
    from ranch.ctld.deadlines import Deadlines
    from ranch.ctld.jobs.settings import JobSettings
    from ranch.sched.fifo import Cluster
    from ranch.sched.model import Pending

GRACE_KIND = "preempt grace"  # Deadlines key (job id, GRACE_KIND): a victim's GraceTime is over
# Deadlines key (0, EXEMPT_KIND): a job a pending preemptor could stop leaves its
# PreemptExemptTime: a pass then (slurmctld's periodic passes would find it)
EXEMPT_KIND = "preempt exempt"
DEFAULT_QOS = "normal"  # a job submitted without -q while no association gave it one
CRED_EXPIRE = 1200  # Slurm's default launch credential lifetime (AuthInfo cred_expire), s


def qos_rule(q: Qos) -> QosRule:
    """What preemption reads of an accounting record (PreemptExemptTime as time_str2secs)."""
    try:
        exempt = parse_seconds(q.preempt_exempt_time) if q.preempt_exempt_time else None
    except ValueError:
        exempt = None
    return QosRule(q.name, q.priority, frozenset(q.preempt), q.preempt_mode, q.grace_time, exempt)


class PreemptDoor(JobDoor, Protocol):
    """The job store as preemption reads it: the door, and its change count (a pass that
    follows no change to any job need not choose again)."""

    @property
    def gen(self) -> int: ...


class Preemptions:
    """The victims of each pending job that waits on Resources, stopped as its QOS allows."""

    def __init__(self, jobs: PreemptDoor, settings: JobSettings, *, clock: Callable[[], float],
                 wall: Callable[[], float], deadlines: Deadlines,
                 qos: Callable[[], Iterable[Qos] | None],
                 signal_step: Callable[[Job, int, int], str | None] = lambda j, s, n: None,
                 record: Callable[..., Any] = lambda *a, **k: None) -> None:
        """`qos`: the accounting tree's QOS (None: accounting off, no preemption);
        `signal_step`: a signal to one of a job's steps (ctld/jobs/steps.py); `record`: the
        event log's door (kind, node, fields)."""
        self._jobs = jobs
        self._settings = settings
        self._clock = clock
        self._wall = wall
        self._deadlines = deadlines
        self._qos = qos
        self._record = record
        self._signal_step = signal_step
        self._policy: tuple[object, object, Policy | None] = (None, None, None)
        # victim -> (wall time its GraceTime ends, the run it was given to)
        self._graced: dict[int, tuple[float, int]] = {}
        self._started: dict[int, float] = {}  # preemptor -> when it last stopped victims
        # preemptor -> what its last fruitless choice was made from; and when the first job
        # it could stop leaves its exempt time
        self._tried: dict[int, tuple[tuple[object, ...], float]] = {}
        self._due: list[tuple[int, str, Preemption]] = []  # chosen in this pass: settle()

    def policy(self) -> Policy | None:
        """The settings in force and the tree's QOS, rebuilt when either changed."""
        conf = self._settings.config.preempt
        if not conf.enabled:
            return None
        records = self._qos()
        if records is None:
            return None
        if self._policy[0] == conf and self._policy[1] is records:  # the tree's own tuple
            return self._policy[2]
        got = Policy(conf.mode, conf.exempt_time, {q.name: qos_rule(q) for q in records})
        self._policy = (conf, records, got)
        return got

    def order(self, pending: Sequence[Job]) -> Iterable[Job]:
        """The pass's order: by priority, except that a job whose QOS may preempt another's
        comes before it (sort_job_queue2 asks preempt_g_job_preempt_check first), so that a
        backlog of low jobs waiting on Resources does not hide a preemptor behind them. Not
        under sched/builtin with priority/basic: slurmctld then walks its job list as it is
        (_schedule's fifo_sched)."""
        policy = self.policy()
        if policy is None or self._fifo():
            return pending
        ahead = [j for j in pending if (r := policy.qos.get(j.req.qos or DEFAULT_QOS))
                 and r.preempt]
        if not ahead:
            return pending
        return _preemptors_first(pending, ahead, policy)

    def _fifo(self) -> bool:
        cfg = self._settings.config
        kind = dict(cfg.settings).get("PriorityType", "priority/basic").strip().lower()
        return cfg.scheduler.type == "sched/builtin" and kind == "priority/basic"

    def consider(self, job: Job, view: Pending, cluster: Cluster) -> bool:
        """The pass could not start `job` for Resources: stop the victims whose going lets it
        start, if any (it waits for their nodes, as slurmctld answers ESLURM_NODES_BUSY)."""
        policy = self.policy()
        qos = job.req.qos or DEFAULT_QOS
        if policy is None or not (rule := policy.qos.get(qos)) or not rule.preempt:
            return False
        now = self._wall()
        members = cluster.members.get(view.partition, ())
        nodes = cluster.nodes
        key = (view, policy, self._jobs.gen,
               tuple((nodes[n].rank, nodes[n].unavailable) for n in members if n in nodes))
        tried = self._tried.get(job.id)
        if tried is not None and tried[0] == key and now < tried[1]:
            return False  # nothing it was chosen from changed: no victims still
        running = self._running(now)
        got = choose(cluster, view, qos, running, policy, now)
        if got is None:
            ends = exempt_ends(qos, members, running, policy, now)
            self._wake(ends, now)
            if len(self._tried) > 1000:  # preemptors that left the queue meanwhile
                self._tried.clear()
            self._tried[job.id] = (key, math.inf if ends is None else ends)
            return False
        self._tried.pop(job.id, None)
        self._choose(job.id, qos, got, now)
        return True

    def _running(self, now: float) -> list[Runner]:
        return [Runner(j.id, j.req.qos or DEFAULT_QOS,
                       j.start_time if j.start_time is not None else now, j.shares)
                for j in self._jobs.jobs.values() if j.state in (RUNNING, CONFIGURING)]

    def _choose(self, job_id: int, qos: str, got: Preemption, now: float) -> bool:
        """Keep the victims chosen for the preemptor to stop at settle(), unless it stopped
        some lately: preempt_start_time, victims just told to stop are not joined by more
        for KillWait + MessageTimeout while they end (node_scheduler.c)."""
        cfg = self._settings.config
        quiet = cfg.jobs.kill_wait + cfg.timeouts.message_timeout
        if now - self._started.get(job_id, -quiet) < quiet:
            return False
        self._started = {k: t for k, t in self._started.items() if now - t < quiet}
        self._started[job_id] = now
        self._due.append((job_id, qos, got))
        return True

    def planning(self, pending: Iterable[Job]) -> Preempting | None:
        """What a backfill cycle may preempt (None: preemption off or no pending job's QOS
        preempts any): the running jobs and the QOS of each pending job that may preempt."""
        policy = self.policy()
        if policy is None:
            return None
        qos = {j.id: q for j in pending
               if (r := policy.qos.get(q := j.req.qos or DEFAULT_QOS)) and r.preempt}
        if not qos:
            return None
        now = self._wall()
        return Preempting(policy, tuple(self._running(now)), qos, now)

    def carry(self, job: Job, got: Preemption) -> bool:
        """A backfill cycle's preemption for a job still pending: its victims stopped now (those
        still running as the plan saw them) and recorded; the job starts once they are gone."""
        if any((v := self._jobs.jobs.get(r.job_id)) is None or v.state not in (
                RUNNING, CONFIGURING) for r in got.victims):
            return False  # a victim ended meanwhile: the next cycle chooses again
        chosen = self._choose(job.id, job.req.qos or DEFAULT_QOS, got, self._wall())
        self.settle(by="backfill")
        return chosen

    def settle(self, by: str = "main") -> None:
        """Stop the victims the pass chose, once it is over: a victim that ends at once (one
        still booting) goes back into the pending queue the pass was walking. `by`: the
        scheduler that chose them (the event pass, or backfill)."""
        due, self._due = self._due, []
        now = self._wall()
        for job_id, qos, got in due:
            stopped = [v.job_id for v in got.victims if self._stop(v, now) is not None]
            self._record("preempt", hostlist.fold(list(got.nodes)), job=job_id, qos=qos,
                         victims=",".join(f"{v.job_id}:{v.mode}" for v in got.victims),
                         stopped=",".join(str(v) for v in stopped) or "-",
                         candidates=",".join(map(str, got.order)),
                         **({"by": by} if by != "main" else {}))
            logs.event("preemption", job=job_id, victims=len(got.victims),
                       stopped=len(stopped))

    def _wake(self, when: float | None, now: float) -> None:
        """A pass when the first exempt job becomes a candidate."""
        if when is None:
            return
        due = self._clock() + (when - now)
        got = self._deadlines.when((0, EXEMPT_KIND))
        if got is None or due < got:
            self._deadlines.schedule((0, EXEMPT_KIND), due)

    def _stop(self, victim: Victim, now: float) -> int | None:
        """Stop one victim now, or start its GraceTime; its id if it was stopped."""
        job = self._jobs.jobs.get(victim.job_id)
        if job is None or job.state not in (RUNNING, CONFIGURING):
            return None
        graced = self._graced.get(job.id)
        ends = graced[0] if graced is not None and graced[1] == job.restarts else None
        if ends is None and victim.grace_time > 0 and job.state == RUNNING:
            # _job_check_grace: SIGCONT then SIGTERM now, the kill once the grace is over.
            # job_signal without KILL_FULL_JOB signals the job's steps, not its batch shell
            for step in [s for s in job.steps if s.state == st.RUNNING]:
                self._signal_step(job, step.id, signal.SIGCONT)
                self._signal_step(job, step.id, signal.SIGTERM)
            self._graced[job.id] = (now + victim.grace_time, job.restarts)
            self._deadlines.schedule((job.id, GRACE_KIND), self._clock() + victim.grace_time)
            return None
        if ends is not None and now < ends:
            return None  # still in its grace time
        self._end(job, victim.mode == REQUEUE)
        return job.id

    def _end(self, job: Job, requeue: bool) -> None:
        """Stop the victim through the job table (its processes: SIGTERM, KillWait, SIGKILL)."""
        self._graced.pop(job.id, None)
        self._deadlines.cancel((job.id, GRACE_KIND))
        if requeue and job.req.requeue and not job.req.allocation:
            # job_requeue's hold-off: a requeued job may start again only after its launch
            # credential expired (AuthInfo cred_expire + 1 s), so the preemptor gets the nodes
            # even when the victim is ahead of it in the queue
            auth = dict(self._settings.config.access.auth_info)
            try:
                hold = int(auth.get("cred_expire", CRED_EXPIRE)) + 1
            except ValueError:
                hold = CRED_EXPIRE + 1
            job.req = attrs.evolve(job.req, begin_time=self._wall() + hold)
        self._jobs.apply(job, je.Preempt(requeue=requeue))
        self._jobs.tidy()

    def fired(self, job_id: int) -> None:
        """A victim's GraceTime is over (job_time_limit's check): stopped now if it still
        runs, by its QOS's mode."""
        graced = self._graced.pop(job_id, None)
        job = self._jobs.jobs.get(job_id)
        if graced is None or job is None or job.state != RUNNING or graced[1] != job.restarts:
            return
        policy = self.policy()
        mode = "cancel" if policy is None else mode_of(job.req.qos or DEFAULT_QOS, policy)
        self._end(job, mode == REQUEUE)
        self._record("preempt", hostlist.fold(list(job.nodes)), job=job_id,
                     grace="over", mode=mode)


def _preemptors_first(pending: Sequence[Job], ahead: list[Job], policy: Policy
                      ) -> Iterator[Job]:
    """`pending` in order, each job preceded by the preemptors (of `ahead`, in their order)
    that may preempt it and did not come yet."""
    done: set[int] = set()
    for job in pending:
        if job.id in done:
            continue
        qos = job.req.qos or DEFAULT_QOS
        for first in ahead:
            if first.id not in done and first.id != job.id and preemptable(
                    qos, first.req.qos or DEFAULT_QOS, policy):
                done.add(first.id)
                yield first
        done.add(job.id)
        yield job
