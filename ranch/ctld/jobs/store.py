"""The controller's job store: every job, the queue, what each node holds, the job ids, the bulk
packs, the one place a job's state changes, and its records for the journal and the state file.

It builds no component: what follows in them from a change here (a launch, a requeue, a job's
end) reaches them through the callables it is given (ctld/jobs/ports.py StoreEvents), which the
composition root (ctld/compose/jobs.py) closes over them. Node state is never set here: what the
jobs hold of a node goes to the node side (`set_use`), whose table decides IDLE/MIXED/ALLOCATED.
"""

from __future__ import annotations

import bisect
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ranch.ctld import logs
from ranch.ctld.jobs import inactive
from ranch.ctld.jobs.jobrecord import (
    ACTIVE,
    COMPLETING,
    PENDING,
    RUNNING,
    Job,
    job_from_json,
    job_json,
    parse_array,
)
from ranch.ctld.kept import kept
from ranch.protocol import messages as m
from ranch.protocol.replace import replace
from ranch.sched.model import NodeUse
from ranch.statemachine import jobevents as je
from ranch.statemachine import jobtable as jt
from ranch.statemachine.jobstates import FINAL, end_reason

if TYPE_CHECKING:
    from ranch.ctld.jobs.ports import NodesForJobs, StoreEvents
    from ranch.ctld.jobs.settings import JobSettings
    from ranch.ctld.state.changelog import ChangeLog, Taken
    from ranch.sched.model import Share

__all__ = ["ACTIVE", "PENDING", "Job", "JobStore", "job_from_json", "job_json", "parse_array"]


def view_of(job: Job) -> je.JobView:
    """What the job table reads of a job."""
    return je.JobView(  # an allocation is never requeued: Slurm requeues batch jobs only
        job.id, job.state, job.outcome, job.held, job.restarts,
        job.req.requeue and not job.req.allocation, job.nodes,
        frozenset(job.awaiting), job.exit_code, job.signal, job.message,
        job.nodes[0] if job.nodes else "",
    )


class JobStore:
    """Every job the controller holds, and the node allocations they make."""

    def __init__(self, nodes: NodesForJobs, settings: JobSettings, changes: ChangeLog, *,
                 clock: Callable[[], float], wall: Callable[[], float], epoch: int,
                 events: StoreEvents) -> None:
        """`events`: what follows in the other components from a change made here."""
        self._nodes = nodes
        self._settings = settings
        self._changes = changes
        self._clock = clock
        self._wall = wall
        self._epoch = epoch  # the seat this controller holds: on every KillJob
        self._events = events
        self.jobs: dict[int, Job] = {}
        self.pending: list[Job] = []  # by `order` ((-priority, id) unless multifactor's)
        self.order: Callable[[Job], Any] = lambda j: (-j.priority, j.id)
        # multifactor's (ctld/jobs/priorities.py), as a job joins the queue or its nice changes
        self.prioritize: Callable[[Job], None] | None = None  # None: priority/basic's
        self.pending_parts: Counter[str] = Counter()
        self.pending_stale = False  # a job left PENDING: rebuild the list before it is read
        self.uses: dict[str, NodeUse] = {}
        self.next_id = 1
        self.building = 0  # jobs built and not yet accepted (their journal write under way)
        # what the next snapshot removes of ctld/state/bulkfiles.py's files: the directories
        # of purged jobs (earlier versions' layout), and packs no live job is in
        self.bulk_gone: list[int] = []
        self.packs: Counter[int] = Counter()  # pack -> jobs held whose bulk is in it
        self.packs_gone: list[int] = []
        self.kicked = True  # a scheduling pass is due
        self.gen = 0  # bumped by every change a job listing shows

    def config_changed(self) -> None:
        """A reconfigure (the settings already hold the new config): a pass is due, and each
        job's own deadlines are armed again (the reconfigure cleared them; InactiveLimit or a
        lowered limit's may have changed)."""
        self.kicked = True
        for job in self.jobs.values():
            if job.req.allocation or job.run_limit:
                self._events.rearm(job)

    def kick(self) -> None:
        """Something happened that may let a job start: a scheduling pass is due."""
        self.kicked = True

    def take_kick(self) -> bool:
        """Whether a pass is due; the pass that asks runs it, so none is due after."""
        due, self.kicked = self.kicked, False
        return due

    def new_ids(self, count: int) -> int:
        """The first of `count` fresh job ids (never given again), held as being built until
        `insert` or `dropped`."""
        first = self.next_id
        self.next_id += count
        self.building += count
        return first

    def insert(self, job: Job) -> None:
        """A built job joins the store (pending, or as it was placed)."""
        self.building = max(0, self.building - 1)
        self.jobs[job.id] = job
        if self.prioritize is not None and job.state == PENDING:
            self.prioritize(job)
        self.add_pending(job)
        self.touch(job)

    def drop(self, jobs: Sequence[Job]) -> None:
        """Accepted jobs whose journal write failed: gone as if never submitted (their
        records and pushes leave the change log with them)."""
        ids = {j.id for j in jobs}
        for job in jobs:
            for name in list(job.shares):
                self.release(job, name)
            self.jobs.pop(job.id, None)
        self._changes.retract_jobs(ids)
        self.pending_stale = True
        self.rebuild_pending()
        self.gen += 1

    def touch(self, job: Job, durable: bool = True) -> None:
        """The job changed. `durable`: the change is a fact a reply may confirm, so it goes to
        the journal before that reply leaves (a pending reason is recomputed, not kept)."""
        job.saved = None
        job.listed = job.shown = None
        self.gen += 1
        self._changes.job_changed(job, durable)

    # -- the one place a job's state changes -------------------------------------------------

    def apply(self, job: Job, event: je.Event) -> str | None:
        """Feed one event to the job table and carry out its effects; the refusal's text (for
        the user) when the table refuses it."""
        old = view_of(job)
        try:
            new, effects = jt.apply_job(old, event)
        except je.JobRefused as exc:
            return str(exc)
        if new == old and not effects:
            return None
        if old.state in FINAL and new.state not in FINAL:  # requeued after it ended
            self._events.reopening(job)
        job.state, job.outcome, job.held = new.state, new.outcome, new.held
        job.restarts, job.nodes, job.awaiting = new.restarts, new.nodes, new.awaiting
        job.exit_code, job.signal, job.message = new.exit_code, new.signal, new.message
        for eff in effects:
            if isinstance(eff, je.Free):
                for name in eff.nodes:
                    self.release(job, name)
            elif isinstance(eff, je.Kill):
                self.kill(job, eff.nodes, 0, eff.why, run=old.restarts)
            elif isinstance(eff, je.Launch):
                self._events.launch(job, eff.nodes)
            elif isinstance(eff, je.Started):
                job.start_time = eff.at
        if new.state != old.state or new.restarts != old.restarts:
            self._entered(job, old)
        self.touch(job)
        return None

    def _entered(self, job: Job, old: je.JobView) -> None:
        """Bookkeeping that follows from the state a job entered."""
        state = job.state
        if old.state == PENDING and state != PENDING:
            self.pending_stale = True
        if state == PENDING:  # requeued: a new run starts from scratch
            for name in list(job.shares):
                self.release(job, name)
            job.shares = {}
            job.reason = "None"
            job.start_time = job.end_time = None
            job.launched_at = None
            self.add_pending(job)
            self.kicked = True
            logs.event("job requeued", job=job.id, restarts=job.restarts)
            self._events.requeued(job)  # its old run's steps gone; --mail-type REQUEUE
        elif state == RUNNING and old.state != RUNNING:
            job.start_time = self._wall()  # until the node says when it started it
            job.launched_at = self._clock()
            self._events.began(job)
        elif state in FINAL:
            for name in list(job.shares):
                self.release(job, name)
            job.end_time = self._wall()
            kept = old.state == PENDING or job.reason == inactive.REASON
            job.reason = end_reason(state, job.exit_code, job.signal, job.reason if kept else "")
            if job.start_time is None:
                job.start_time = job.end_time
            self.kicked = True
            self._events.ending(job)  # its steps end with it, before the history has it
            logs.event("job ended", job=job.id, state=str(state), exit_code=job.exit_code,
                       signal=job.signal)
            self._events.ended(job)  # mail, and racct's history before the job may be purged
        # in the job's node order, not a set's: which node a ResumeRate token goes to first
        # must not change from one run to the next
        for name in dict.fromkeys((*old.nodes, *job.nodes)):
            self.sync_node(name)  # COMPLETING comes and goes with the job's state

    # -- the pending queue -------------------------------------------------------------------

    def add_pending(self, job: Job) -> None:
        bisect.insort(self.pending, job, key=self.order)
        self.pending_parts[job.partition] += 1

    def rebuild_pending(self) -> None:
        """Drop every job that left PENDING from the pending list at once (one pass, not a
        list.remove per job: many jobs leave it in one scheduling pass or one rcancel -u)."""
        self.pending = [j for j in self.pending if j.state == PENDING]
        self.pending_parts = Counter(j.partition for j in self.pending)
        self.pending_stale = False

    def tidy(self) -> None:
        """The pending list rebuilt if a job left it since."""
        if self.pending_stale:
            self.rebuild_pending()

    def reprioritize(self, job: Job, recompute: bool = True) -> None:
        """A pending job's priority (or nice) changed: multifactor computes it again if asked
        (basic's the caller set), and its place in the queue follows."""
        if recompute and self.prioritize is not None and job.state == PENDING:
            self.prioritize(job)
        if job.state == PENDING and job in self.pending:
            self.pending.remove(job)
            bisect.insort(self.pending, job, key=self.order)

    def reorder(self, order: Callable[[Job], Any],
                prioritize: Callable[[Job], None] | None = None) -> None:
        """The priorities changed, or how they are set and ordered: the queue sorted afresh."""
        self.order, self.prioritize = order, prioritize
        self.pending.sort(key=order)

    def repartition(self, job: Job, partition: str) -> None:
        """A pending job moves to another partition (rcontrol update Partition=)."""
        if partition != job.partition:
            self.pending_parts[job.partition] -= 1
            self.pending_parts[partition] += 1
            job.partition = partition

    # -- what each node holds ----------------------------------------------------------------

    def hold(self, job: Job, shares: Mapping[str, Share]) -> None:
        """The job is placed: what it holds of each node is the store's from now on."""
        for name, share in shares.items():
            self.uses.setdefault(name, NodeUse()).add(job.id, share)
        job.shares = dict(shares)

    def sync_node(self, name: str) -> None:
        """Tell the node side what the jobs hold of the node (it owns the node's record and
        feeds its state machine)."""
        use = self.uses.get(name) or NodeUse()
        completing = any(
            self.jobs[j].state == COMPLETING and name in self.jobs[j].awaiting
            for j in use.jobs if j in self.jobs
        )
        self._nodes.set_use(name, use.cpus, use.mem, tuple(sorted(use.gpus)), completing)
        if not use.jobs:
            self.uses.pop(name, None)

    def release(self, job: Job, name: str) -> None:
        share = job.shares.pop(name, None)
        use = self.uses.get(name)
        if share is not None and use is not None:
            use.remove(job.id, share)
        self.sync_node(name)

    def kill(self, job: Job, names: Iterable[str], signal: int = 0, why: str = "",
             run: int | None = None) -> None:
        """KillJob for run `run` (default the current one) to each node, once what led to it is
        on disk: a kill that went out before a crash must match the state read back after."""
        msg = m.KillJob(job_id=job.id, signal=signal, reason=why,
                        restarts=job.restarts if run is None else run, epoch=self._epoch)
        for name in names:
            self._nodes.push(name, msg)

    # -- bulk packs (ctld/state/bulkfiles.py) ----------------------------------------------------

    def purge(self) -> None:
        cutoff = self._wall() - self._settings.min_job_age
        old = [j.id for j in self.jobs.values()
               if j.state not in ACTIVE and j.state != PENDING and (j.end_time or 0) < cutoff
               and not self._events.held(j)]
        for jid in old:
            job = self.jobs.pop(jid)
            if job.bulk_at is not None:
                self._unpack(job.bulk_at[0])
            elif job.bulk_on_disk:
                self.bulk_gone.append(jid)
        if old:
            self.gen += 1

    def _unpack(self, pack: int) -> None:
        self.packs[pack] -= 1
        if self.packs[pack] <= 0:
            del self.packs[pack]
            self.packs_gone.append(pack)

    def bulk_not_written(self, packs: Iterable[int], purged: Iterable[int]) -> None:
        """A snapshot failed: the packs it wrote (or found unreferenced) and the purged jobs'
        files are for the next one to remove."""
        self.packs_gone += packs
        self.bulk_gone += purged

    def take_bulk(self) -> tuple[list[tuple[int, str, tuple | bytes]],
                                 tuple[list[int], list[int]]]:
        """(the bulk of every job not yet on disk, (the purged jobs whose directories may go,
        the packs that may go)): what the next snapshot writes and removes
        (ctld/state/bulkfiles.py)."""
        new = [(j.id, j.req.script, j.req.env if j.env_json is None else j.env_json)
               for j in self.jobs.values() if not j.bulk_on_disk]
        gone = (self.bulk_gone, self.packs_gone)
        self.bulk_gone, self.packs_gone = [], []
        return new, gone

    def bulk_written(self, pack: int, placed: Iterable[tuple[int, int, int]]) -> None:
        """Their script and environment are in `pack` now, each (job id, offset, length): out
        of memory and of the records the next snapshot and the journal write."""
        lean: dict[int, m.SubmitJob] = {}  # one request less its bulk for an array's tasks
        for jid, offset, length in placed:
            job = self.jobs.get(jid)
            if job is not None and not job.bulk_on_disk:
                req = job.req
                job.req = lean.get(id(req)) or lean.setdefault(
                    id(req), replace(req, script="", env=()))
                job.env_json = None
                job.bulk_on_disk = True
                job.bulk_at = (pack, offset, length)
                self.packs[pack] += 1
                self.touch(job, durable=False)
        if not self.packs.get(pack):  # every job in it is gone already (retracted)
            self.packs.pop(pack, None)
            self.packs_gone.append(pack)

    # -- the journal and the state file -------------------------------------------------------

    def saved_entry(self, job: Job) -> orjson.Fragment:
        """The job's record as the state file and the journal hold it, encoded once a change."""
        if job.saved is not None:
            return job.saved
        raw = orjson.dumps(job_json(job))
        if job.env_json is not None:  # one holding the environment is not kept (nor copied to
            return orjson.Fragment(raw)  # its length): it is written once or twice before the
        saved = job.saved = orjson.Fragment(kept(raw))  # job's pack replaces it
        return saved

    def journal_records(self, taken: Taken) -> list[dict[str, Any]]:
        """The journal records of the jobs among changes taken from the change log."""
        return [{"job": self.saved_entry(job)} for job in taken.jobs.values()]

    def save_doc(self) -> dict[str, Any]:
        """The jobs' part of the state file (the jobs past MinJobAge purged first)."""
        self.purge()
        return {"next_id": self.next_id, "jobs": [self.saved_entry(j) for j in self.jobs.values()]}

    def restore(self, doc: dict[str, Any] | None) -> None:
        """Take back the saved jobs (the journal's records already laid over them)."""
        doc = doc or {}
        self.next_id = max(self.next_id, int(doc.get("next_id", 1)))
        for entry in doc.get("jobs", ()):
            try:
                job = job_from_json(entry)
            except (KeyError, TypeError, ValueError) as exc:
                logs.event("saved job unreadable; dropped", logging.WARNING, error=repr(exc))
                continue
            self.adopt(job)
        for name in list(self._nodes.nodes):
            self.sync_node(name)
        self._events.restored()
        self.kicked = True
        logs.event("jobs restored", jobs=len(self.jobs), next_id=self.next_id)

    def adopt(self, job: Job) -> None:
        self.jobs[job.id] = job
        if job.bulk_at is not None:
            self.packs[job.bulk_at[0]] += 1
        if job.state in (RUNNING, COMPLETING):
            job.launched_at = self._clock()  # the missing-job grace counts from the restart
            self._events.rearm(job)  # a full InactiveLimit from the restart, a lowered limit
        self.next_id = max(self.next_id, job.id + 1)
        if job.state == PENDING:
            self.add_pending(job)
        for name, share in job.shares.items():
            self.uses.setdefault(name, NodeUse()).add(job.id, share)
