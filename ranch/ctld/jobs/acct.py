"""Job accounting for racct (sacct): each finished run's record into the job history
(ctld/jobs/history.py) before the job may be purged, the writer task that makes those records
durable and prunes old days (PurgeJobAfter), and the GetAcct query over the jobs rctld holds
and the history. The job core calls it in one line at each point (end, purge, restore)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
import trio

from ranch.ctld import logs
from ranch.ctld.jobs.jobrecord import PENDING, Job
from ranch.protocol import messages as m
from ranch.statemachine.jobstates import FINAL

if TYPE_CHECKING:
    from ranch.ctld.jobs.history import FileHistory
    from ranch.ctld.jobs.ports import JobReader
    from ranch.ctld.jobs.settings import JobSettings

# The most records one AcctList carries (about 400 bytes each: 40 MB); past it the reply says
# how many it left out, and racct asks for a narrower window.
MAX_RECORDS = 100_000
# Seconds: records of jobs ending meanwhile share one write and fsync. Nothing waits for it (a
# job stays in memory, and in racct's answers, until its record is written; a crash before the
# write offers the finished jobs again), and each write is a worker thread's turn and an fsync:
# at 15 jobs a second, 0.2 s cost rctld 4 % of its CPU per job more than 1 s (docs/benchmarks.md,
# eleventh pass).
WRITE_INTERVAL = 1.0
PRUNE_INTERVAL = 3600.0  # seconds between looks for history days older than PurgeJobAfter

_KEEP = ("job_id", "array_job_id", "array_task_id", "name", "user", "uid", "gid", "partition",
         "account", "qos", "wckey", "comment", "state", "reason", "exit_code", "signal",
         "submit_time", "eligible_time", "start_time", "end_time", "time_limit", "nodes",
         "node_count", "cpus", "ntasks", "cpus_per_task", "mem_per_node", "mem_per_cpu",
         "gpus_per_node", "restarts", "workdir", "batch_host", "priority", "features",
         "batch_flag", "usage", "gpu_usage")
# The steps (rrun) a history record keeps: a job may run MaxStepCount (40,000) steps, ~9 MB in
# one line; the first and the last STEPS_KEPT/2 are kept, and how many were left out.
STEPS_KEPT = 1000


def record_of(record: Callable[[Job], dict[str, Any]], cluster: str, job: Job
              ) -> dict[str, Any]:
    """What racct shows of a job (and the history keeps of a finished run): of its listing
    record (`record`, ctld/jobs/joblisting.py), the keys racct reads."""
    rec = record(job)
    out = {k: rec.get(k) for k in _KEEP}
    out["cluster"] = cluster
    steps = rec.get("steps")
    if steps:
        half = STEPS_KEPT // 2
        out["steps"] = steps if len(steps) <= STEPS_KEPT else [*steps[:half], *steps[-half:]]
        if len(steps) > STEPS_KEPT:
            out["steps_left_out"] = len(steps) - STEPS_KEPT
    return out


class Accounting:
    """racct's side of the job store: finished runs into the history, the writer task, and the
    GetAcct query."""

    def __init__(self, jobs: JobReader, record: Callable[[Job], dict[str, Any]],
                 settings: JobSettings, history: FileHistory | None, *,
                 wall: Callable[[], float], state_changed: Callable[[], None]) -> None:
        """`record`: a job's listing record; `state_changed`: a snapshot is due (the jobs the
        history now holds may be purged by it)."""
        self._jobs = jobs
        self._record = record
        self._settings = settings
        self.history = history
        self._wall = wall
        self._state_changed = state_changed

    def record_of(self, job: Job) -> dict[str, Any]:
        return record_of(self._record, self._settings.config.cluster_name, job)

    # -- the job store's hooks -------------------------------------------------------------

    def ended(self, job: Job) -> None:
        """The job entered a final state: its run goes to the history."""
        history = self.history
        if history is not None:
            # built when its batch is taken, so a detail set later in the same step is in it;
            # a requeue before then builds it first (`reopening`), while it is the run that ended
            history.ended(lambda: self.record_of(job), run=(job.id, job.restarts))

    def reopening(self, job: Job) -> None:
        """A finished job is about to be requeued: the record of the run that ended, if it is
        still to be built, is built now."""
        if self.history is not None:
            self.history.build_now((job.id, job.restarts))

    def held(self, job: Job) -> bool:
        """The job may not be purged yet: its record is not durable."""
        history = self.history
        return history is not None and history.unwritten(job.id)

    def restored(self) -> None:
        """After a restart: the finished jobs still held are offered again (the history keeps
        the runs it already has and writes the others: a crash before their write loses none)."""
        history = self.history
        if history is None:
            return
        for job in self._jobs.jobs.values():
            if job.state in FINAL:
                history.ended(self.record_of(job), verify=True)

    # -- the writer ------------------------------------------------------------------------

    async def keep(self, in_thread: bool = True) -> None:
        """Run in the daemon's nursery: write what ended (one write and fsync per day file for
        a batch), retry after a failure, and prune the days older than PurgeJobAfter."""
        history = self.history
        if history is None:
            return
        next_prune = trio.current_time()

        async def run(fn: Callable[..., Any], *args: Any) -> Any:
            if in_thread:
                return await trio.to_thread.run_sync(fn, *args)
            return fn(*args)

        while True:
            if history.waiting:
                batch = history.take()
                try:
                    await run(history.write, batch)
                except OSError as exc:
                    history.written(batch, ok=False)
                    logs.event("job history write failed; finished jobs are kept until it "
                               "works", logging.ERROR, path=history.dir,
                               error=exc.strerror or str(exc))
                    await trio.sleep(1.0)
                    continue
                history.written(batch, ok=True)
                self._state_changed()  # the jobs it held may be purged at the next snapshot
            if trio.current_time() >= next_prune:
                next_prune = trio.current_time() + PRUNE_INTERVAL
                keep = float(self._settings.config.jobs.purge_job_after)
                try:
                    gone = await run(history.prune, self._wall(), keep)
                except OSError as exc:
                    logs.event("job history not pruned", logging.WARNING, error=str(exc))
                    gone = []
                if gone:
                    logs.event("job history days pruned", days=",".join(gone))
            with trio.move_on_after(max(0.0, next_prune - trio.current_time())):
                await history.due.wait()
            await trio.sleep(WRITE_INTERVAL)


    # -- the query ----------------------------------------------------------------------

    async def query(self, q: m.GetAcct) -> bytes:
        """The AcctList for `q`: the jobs rctld holds, and the history's records of the jobs it
        no longer holds (read in a worker thread: a year of history must not stall the loop).
        One record per job: its latest run."""
        live = select([self.record_of(j) for j in self._jobs.jobs.values()], q)
        held_ids = set(self._jobs.jobs)
        history = self.history
        error = ""
        old: list[dict[str, Any]] = []
        wanted = set(q.job_ids) | {a for a, _ in q.tasks}
        found = {r["job_id"] for r in live} | {r.get("array_job_id") for r in live}
        if history is not None and (not wanted or not wanted <= found):
            since = q.start if q.start and not q.states else None
            try:
                old = await trio.to_thread.run_sync(history.read, since, tuple(wanted))
            except OSError as exc:
                error = f"the job history at {history.dir} could not be read: {exc.strerror or exc}"
                logs.event("job history unreadable", logging.WARNING, error=error)
        latest: dict[int, dict[str, Any]] = {}
        for rec in select([r for r in old if r["job_id"] not in held_ids], q):
            have = latest.get(rec["job_id"])
            if have is None or (rec.get("restarts") or 0) >= (have.get("restarts") or 0):
                latest[rec["job_id"]] = rec
        for rec in live:
            latest[rec["job_id"]] = rec
        out = [latest[k] for k in sorted(latest)]
        limit = min(q.limit or MAX_RECORDS, MAX_RECORDS)
        left_out = max(0, len(out) - limit)
        body = {"generated_at": self._wall(), "jobs": out[:limit], "left_out": left_out,
                "history_error": error}
        return orjson.dumps(body)


def flush_now(history: Any) -> None:
    """Shutdown: write what is still due, here and now."""
    if history is None or not history.waiting:
        return
    batch = history.take()
    try:
        history.write(batch)
    except OSError as exc:
        history.written(batch, ok=False)
        logs.event("job history write failed at shutdown; the snapshot keeps those jobs",
                   logging.ERROR, error=str(exc))
        return
    history.written(batch, ok=True)


def _matches(rec: dict[str, Any], q: m.GetAcct, ids: frozenset[int],
             tasks: frozenset[tuple[int, int]], uids: frozenset[int],
             users: frozenset[str], states: frozenset[str]) -> bool:
    if (ids or tasks) and not (
            rec["job_id"] in ids or rec.get("array_job_id") in ids
            or (rec.get("array_job_id"), rec.get("array_task_id")) in tasks):
        return False
    if (uids or users) and rec.get("uid") not in uids and rec.get("user") not in users:
        return False
    lo = q.start if q.start is not None else float("-inf")
    hi = q.end if q.end is not None else float("inf")
    submit = rec.get("submit_time") or 0.0
    start, end = rec.get("start_time"), rec.get("end_time")
    state = rec.get("state")
    if states:
        if state not in states:
            return False
        if state == PENDING:
            return submit <= hi and (start is None or start >= lo)
        if state in FINAL:
            return end is not None and lo <= end <= hi
        return start is not None and start <= hi and (end is None or end >= lo)
    return submit <= hi and (end is None or end >= lo)


def select(records: list[dict[str, Any]], q: m.GetAcct) -> list[dict[str, Any]]:
    ids, tasks = frozenset(q.job_ids), frozenset((int(t[0]), int(t[1])) for t in q.tasks)
    uids, users, states = frozenset(q.uids), frozenset(q.users), frozenset(q.states)
    return [r for r in records if _matches(r, q, ids, tasks, uids, users, states)]
