"""The queue as /api/v1/jobs and the page's header list it, each job turned once per change.

Each job's squeue --json record (protocol/records.py job_json) is kept encoded beside the
listing's own encoding it was made from (ctld/jobs/joblisting.py `encoded`, kept until the job
changes), with the few fields the header's counts and the PrivateData rule read. A listing is
then those pieces joined: only jobs that changed since the last are decoded and turned again.
Before, every poll decoded and re-encoded the whole queue on the event loop: ten pages on the
Jobs tab with 2,000 jobs queued took a fifth of a core and put 320 ms on the p99 of held
submissions (bench/pollers_bench.py --pages).

Each update also records which jobs it turned and which left, so an open page asks only for
what changed since the listing it holds (`since`): a quiet queue of 50,000 costs a poll a few
bytes instead of the whole queue."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Generator, Mapping
from typing import Any

import attrs
import orjson

from ranch.ctld.kept import kept as exact
from ranch.ctld.rpc.permissions import record_owner
from ranch.ctld.web.jobstats import COUNTED
from ranch.protocol.records import job_json
from ranch.sched.slices import to_end

CHUNK = 500  # jobs turned between two yields (a first build of 50,000 must not hold the loop)
# Updates remembered for catching up: a page that polls every 3 s behind a queue that changes
# between each of its polls falls out after 64 other pages' updates at worst, and then gets
# the whole listing once.
HISTORY = 64


@attrs.frozen
class Piece:
    """One job as listed: its record as squeue --json prints it, encoded."""

    source: bytes  # the listing's encoding this was turned from (the same object until a change)
    doc: bytes
    owner: int | None  # whose job (PrivateData=jobs)
    counted: dict[str, Any]  # the fields jobstats.counts reads


@attrs.frozen
class Update:
    """What one update of the pieces changed since the generation `since` (the next update's
    `since` is where it ended)."""

    since: int
    turned: frozenset[int]  # job ids listed anew (new or changed)
    gone: tuple[tuple[int, int | None], ...]  # (job id, owner) of jobs no longer listed


@attrs.frozen
class Delta:
    """What changed between a page's listing and the current one."""

    pieces: list[Piece]  # the jobs listed anew, as they are now
    gone: list[tuple[int, int | None]]  # (job id, owner) of the jobs to drop


class QueuePieces:
    """The kept pieces, owned by the web layer; `steps` brings them up to the job store."""

    def __init__(self, jobs: Callable[[], Mapping[int, Any]], gen: Callable[[], int],
                 encoded: Callable[[Any], bytes]) -> None:
        self._jobs, self._gen, self._encoded = jobs, gen, encoded
        self._kept: dict[int, Piece] = {}
        self._at = -1  # the store's generation the pieces are of
        self._updates: deque[Update] = deque(maxlen=HISTORY)
        self._commits = 0  # updates kept so far: one that another overtook is not kept
        # Generations start again at 0 in a new controller (a restart, a takeover): a page's
        # mark carries this so one from another controller is never taken for ours.
        self.epoch = os.urandom(4).hex()

    def listed(self) -> list[Piece]:
        """The kept pieces: the listing `mark` names (an update another overtook returned an
        older one)."""
        return list(self._kept.values())

    @property
    def mark(self) -> str:
        """What a page keeps of the listing it got, to ask what changed since (`delta`)."""
        return f"{self.epoch}.{self._at}"

    def delta(self, mark: str) -> Delta | None:
        """The changes from the listing `mark` names to the kept one (run `steps` first);
        None when that listing is not among the updates remembered (send the whole)."""
        epoch, _, at = mark.partition(".")
        if epoch != self.epoch or not at.lstrip("-").isdigit():
            return None
        since = int(at)
        if since == self._at:
            return Delta([], [])
        updates = list(self._updates)
        start = next((i for i, u in enumerate(updates) if u.since == since), None)
        if start is None:
            return None
        turned: set[int] = set()
        gone: dict[int, int | None] = {}
        for u in updates[start:]:
            turned.update(u.turned)
            for jid, owner in u.gone:
                turned.discard(jid)
                gone[jid] = owner
        kept = self._kept
        return Delta([kept[j] for j in sorted(turned) if j in kept], sorted(gone.items()))

    def steps(self) -> Generator[None, None, list[Piece]]:
        """The pieces of every job in the listing's order, yielding after every CHUNK turned
        (the store may change meanwhile: a job listed is as it was when it was turned)."""
        if self._at == self._gen():
            return list(self._kept.values())
        at, jobs, commits = self._gen(), list(self._jobs().values()), self._commits
        fresh: dict[int, Piece] = {}
        turned: list[int] = []
        for job in jobs:
            source = self._encoded(job)
            piece = self._kept.get(job.id)
            if piece is None or piece.source is not source:
                rec = orjson.loads(source)
                piece = Piece(source, exact(orjson.dumps(job_json(rec))), record_owner(rec),
                              {k: rec[k] for k in COUNTED if k in rec})
                turned.append(job.id)
                if len(turned) % CHUNK == 0:
                    yield
            fresh[job.id] = piece
        if commits == self._commits:  # else a caller that could not yield (now) ran meanwhile
            gone = tuple((j, p.owner) for j, p in self._kept.items() if j not in fresh)
            self._updates.append(Update(self._at, frozenset(turned), gone))
            self._kept, self._at, self._commits = fresh, at, commits + 1
        return list(fresh.values())

    def now(self) -> list[Piece]:
        """steps() run to its end at once (a caller that cannot yield)."""
        return to_end(self.steps())


def listing(doc: dict[str, Any], pieces: list[Piece]) -> bytes:
    """`doc` (queue_doc's, its "jobs" empty) encoded with the pieces as its jobs."""
    body = orjson.dumps(doc)
    return body.replace(b'"jobs":[]', b'"jobs":[' + b",".join(p.doc for p in pieces) + b"]", 1)
