"""The queue as /api/v1/jobs and the page's header list it, each job turned once per change.

Each job's squeue --json record (protocol/records.py job_json) is kept encoded beside the
listing's own encoding it was made from (ctld/jobs/joblisting.py `encoded`, kept until the job
changes), with the few fields the header's counts and the PrivateData rule read. A listing is
then those pieces joined: only jobs that changed since the last are decoded and turned again.
Before, every poll decoded and re-encoded the whole queue on the event loop: ten pages on the
Jobs tab with 2,000 jobs queued took a fifth of a core and put 320 ms on the p99 of held
submissions (bench/pollers_bench.py --pages)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any

import attrs
import orjson

from ranch.ctld.kept import kept as exact
from ranch.ctld.rpc.permissions import record_owner
from ranch.ctld.web.jobstats import COUNTED
from ranch.protocol.records import job_json

CHUNK = 500  # jobs turned between two yields (a first build of 50,000 must not hold the loop)


@attrs.frozen
class Piece:
    """One job as listed: its record as squeue --json prints it, encoded."""

    source: bytes  # the listing's encoding this was turned from (the same object until a change)
    doc: bytes
    owner: int | None  # whose job (PrivateData=jobs)
    counted: dict[str, Any]  # the fields jobstats.counts reads


class QueuePieces:
    """The kept pieces, owned by the web layer; `steps` brings them up to the job store."""

    def __init__(self, jobs: Callable[[], Mapping[int, Any]], gen: Callable[[], int],
                 encoded: Callable[[Any], bytes]) -> None:
        self._jobs, self._gen, self._encoded = jobs, gen, encoded
        self._kept: dict[int, Piece] = {}
        self._at = -1  # the store's generation the pieces are of

    def steps(self) -> Generator[None, None, list[Piece]]:
        """The pieces of every job in the listing's order, yielding after every CHUNK turned
        (the store may change meanwhile: a job listed is as it was when it was turned)."""
        if self._at == self._gen():
            return list(self._kept.values())
        at, jobs = self._gen(), list(self._jobs().values())
        fresh: dict[int, Piece] = {}
        turned = 0
        for job in jobs:
            source = self._encoded(job)
            piece = self._kept.get(job.id)
            if piece is None or piece.source is not source:
                rec = orjson.loads(source)
                piece = Piece(source, exact(orjson.dumps(job_json(rec))), record_owner(rec),
                              {k: rec[k] for k in COUNTED if k in rec})
                turned += 1
                if turned % CHUNK == 0:
                    yield
            fresh[job.id] = piece
        self._kept, self._at = fresh, at
        return list(fresh.values())

    def now(self) -> list[Piece]:
        """steps() run to its end at once (a caller that cannot yield)."""
        slices = self.steps()
        while True:
            try:
                next(slices)
            except StopIteration as done:
                return done.value


def listing(doc: dict[str, Any], pieces: list[Piece]) -> bytes:
    """`doc` (queue_doc's, its "jobs" empty) encoded with the pieces as its jobs."""
    body = orjson.dumps(doc)
    return body.replace(b'"jobs":[]', b'"jobs":[' + b",".join(p.doc for p in pieces) + b"]", 1)
