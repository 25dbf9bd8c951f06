"""Decision records (issue 44): each start the scheduling pass or backfill makes, and each change
of a top job's backfill reservation, written to the event log with its inputs (the job's
priority, the jobs ahead of it and why they wait, its nodes, which pass), so `rcontrol events
--job ID` answers "why did B start before A" after the fact."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ranch.conf import hostlist
from ranch.conf.timefmt import slurm_timestamp
from ranch.sched.model import Estimate, Planned, Start, Unplanned

if TYPE_CHECKING:
    from ranch.ctld.jobs.jobrecord import Job

AHEAD = 8  # jobs ahead named in a start's record (the rest counted)
TOP = 10  # the top planned jobs whose reservation changes are recorded, each backfill cycle

Record = Callable[..., Any]  # EventLog.add(kind, node, **fields): the event log's one door


class Decisions:
    """What each scheduling decision is recorded with."""

    def __init__(self, record: Record) -> None:
        self._record = record
        self._reserved: dict[int, tuple[float, tuple[str, ...]]] = {}  # last recorded

    def started(self, job: Job, kind: str, ahead: Sequence[tuple[int, int, str]],
                passed: int, why: str) -> None:
        """A start: `kind` "main" (the FIFO pass) or "backfill"; `ahead`: (job, priority,
        reason) of the jobs ahead of it that did not start, the first AHEAD of `passed`."""
        nodes = list(job.nodes)
        self._record("start", nodes[0] if nodes else "", job=job.id, priority=job.priority,
                     partition=job.partition, nodes=hostlist.fold(nodes), scheduler=kind,
                     ahead=[{"job": j, "priority": p, "reason": r} for j, p, r in ahead[:AHEAD]],
                     passed=passed, why=why)
        self._reserved.pop(job.id, None)

    def planned(self, estimates: Sequence[Estimate], priority: Callable[[int], int]) -> None:
        """Backfill's reservations for its top TOP planned jobs: those new or moved since the
        last cycle recorded (same start and nodes: no record, or every cycle would write)."""
        top = [e for e in estimates if isinstance(e, Planned)][:TOP]
        seen = set()
        for rank, e in enumerate(top, 1):
            seen.add(e.job_id)
            now = (e.start, e.nodes)
            before = self._reserved.get(e.job_id)
            if before == now:
                continue
            self._reserved[e.job_id] = now
            self._record("reserve", e.nodes[0] if e.nodes else "", job=e.job_id,
                         priority=priority(e.job_id), partition=e.partition,
                         nodes=hostlist.fold(list(e.nodes)), start=e.start, rank=rank,
                         scheduler="backfill", reason=e.reason,
                         was=None if before is None else {
                             "start": before[0], "nodes": hostlist.fold(list(before[1]))})
        for gone in [j for j in self._reserved if j not in seen]:
            del self._reserved[gone]


def ahead_of(estimates: Sequence[Estimate], index: int, priority: Callable[[int], int]
             ) -> tuple[list[tuple[int, int, str]], int]:
    """Backfill: the jobs ahead of estimate `index` that it did not start, with their reason
    (a planned one: its reserved start), the first AHEAD of how many."""
    out: list[tuple[int, int, str]] = []
    count = 0
    for e in estimates[:index]:
        if isinstance(e, Start):
            continue
        count += 1
        if len(out) < AHEAD:
            if isinstance(e, Planned):
                why = (f"{e.reason}; reserved {hostlist.fold(list(e.nodes))} from "
                       f"{slurm_timestamp(e.start)}")
            else:
                assert isinstance(e, Unplanned)
                why = e.reason or e.why
            out.append((e.job_id, priority(e.job_id), why))
    return out, count
