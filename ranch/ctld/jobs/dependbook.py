"""sbatch -d on the controller: each pending job's dependency elements as judged so far, the
scheduling pass's one question about them, and what a job record shows of them (the pure
judging is ctld/jobs/dependencies.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from ranch.ctld import logs
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.jobs.dependencies import (
    FAILED,
    NEVER,
    PENDING,
    SATISFIED,
    Dep,
    DependencyError,
    Spec,
    Verdict,
    describe,
    evaluate,
    kill_invalid_default,
    parse,
)
from ranch.ctld.jobs.jobrecord import BEGIN_KEY
from ranch.statemachine import jobevents

if TYPE_CHECKING:
    from ranch.ctld.jobs.ports import JobDoor
    from ranch.ctld.jobs.settings import JobSettings

CANCELLED = "<cancelled>"  # reason(): the job was cancelled (--kill-on-invalid-dep)


@attrs.define
class Entry:
    spec: Spec
    states: tuple[str, ...] | None = None
    verdict: str = PENDING


class Dependencies:
    """The dependency elements' states per job (soft: judged again after a restart)."""

    def __init__(self, jobs: JobDoor, settings: JobSettings, *, clock: Callable[[], float],
                 deadlines: Deadlines, notify: Callable[[Any, str], None]) -> None:
        """`notify`: a job's --mail-type event (ctld/jobs/mail.py Mail.notify)."""
        self._jobs = jobs
        self._settings = settings
        self._clock = clock
        self._deadlines = deadlines
        self._notify = notify
        self._book: dict[int, Entry] = {}

    def _entry(self, job: Any) -> Entry | None:
        text = job.req.dependency
        if not text:
            return None
        book, table = self._book, self._jobs.jobs
        if len(book) > 2 * len(table) + 64:  # forget jobs the controller no longer holds
            for jid in [j for j in book if j not in table]:
                del book[jid]
        entry = book.get(job.id)
        if entry is None:
            try:
                spec = parse(text)
            except DependencyError:  # refused at submit; a saved job from elsewhere never runs
                spec = Spec((Dep("afterok", 0, state=FAILED),))
            entry = book[job.id] = Entry(spec)
        return entry

    def forget(self, job: Any) -> None:
        """The job's dependency changed (rcontrol update Dependency=): judged afresh."""
        self._book.pop(job.id, None)

    def verdict(self, job: Any, wall: float) -> Verdict | None:
        """None when the job may start as far as its dependencies go; else why it waits. Once
        satisfied a job's dependencies are done with (slurmctld clears the list)."""
        entry = self._entry(job)
        if entry is None or entry.verdict == SATISFIED:
            return None
        before = entry.verdict
        if before == NEVER or job.reason == "DependencyNeverSatisfied":
            entry.verdict = NEVER  # slurmctld never looks again (a restart keeps the reason)
        else:
            entry.verdict, states, wake = evaluate(entry.spec, entry.states, job,
                                                   self._jobs.jobs, wall)
            if states != entry.states:
                entry.states = states
                self._jobs.touch(job, durable=False)  # Dependency= shows the element states
            if entry.verdict == SATISFIED:
                return None
            if entry.verdict == PENDING:
                return Verdict("Dependency", wake)
        kill = job.req.kill_on_invalid_dep
        if kill is None:
            kill = kill_invalid_default(self._settings.config.settings)
        return Verdict("DependencyNeverSatisfied", cancel=kill, newly_never=before != NEVER)

    def shown(self, job: Any) -> str:
        """What a job record shows as its dependency."""
        entry = self._entry(job)
        if entry is None:
            return "(null)"
        if entry.verdict == SATISFIED or (job.state != "PENDING"
                                          and job.reason != "DependencyNeverSatisfied"):
            return "(null)"
        return describe(entry.spec, entry.states, self._jobs.jobs)

    def reason(self, job: Any, wall: float) -> str:
        """The scheduling pass's question for a pending, unheld job: "" when its dependencies
        let it go, else its reason (Dependency, DependencyNeverSatisfied), or CANCELLED when
        --kill-on-invalid-dep ended it (the pass takes it off the pending list)."""
        if not job.req.dependency:
            return ""
        verdict = self.verdict(job, wall)
        if verdict is None:
            return ""
        if verdict.newly_never:
            logs.event("job dependency never satisfied", job=job.id,
                       dependency=job.req.dependency)
            self._notify(job, "INVALID_DEPEND")
        if verdict.cancel:
            logs.event("job cancelled: its dependency can never be satisfied", logging.INFO,
                       job=job.id)
            self._jobs.apply(job, jobevents.Cancel())
            job.reason = verdict.reason  # slurmctld keeps DependencyNeverSatisfied on it
            self._jobs.touch(job)
            return CANCELLED
        if verdict.wake < float("inf"):
            due = self._clock() + (verdict.wake - wall)
            when = self._deadlines.when(BEGIN_KEY)
            if when is None or due < when:
                self._deadlines.schedule(BEGIN_KEY, due)  # after:ID+MIN: a pass then
        return verdict.reason
