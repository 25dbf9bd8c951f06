"""The job list cut to the record keys a command reads (GetJobs.fields): rqueue's default view
reads 14 of a record's ~70 keys, and encoding, sending and decoding the rest was most of its
time with thousands of jobs queued."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

from ranch.ctld.kept import kept

# Each set of keys asked for, once: a job's cut is kept with the tuple it was cut to, and
# compared by identity.
_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}


def list_body(jobs: Iterable[Any], record: Callable[[Any], dict[str, Any]], now: float,
              fields: tuple[str, ...]) -> bytes:
    """The JobList body of every job of `jobs`, each record (`record`, ctld/jobs/joblisting.py)
    holding only `fields` (unknown names are skipped). Each job's cut is kept encoded (~250
    bytes) until the job changes: after a change only the jobs that changed are cut again (1 ms
    with 5,000 queued, 45 ms for all), and the body is those pieces joined (no second copy of
    them is kept)."""
    wanted = tuple(sorted(set(fields)))
    wanted = _KEYS.setdefault(wanted, wanted) if len(_KEYS) < 64 else wanted
    cut = []
    for job in jobs:
        listed = job.listed
        if listed is None or listed[0] is not wanted:
            rec = record(job)
            listed = job.listed = (wanted, kept(orjson.dumps(
                {k: rec[k] for k in wanted if k in rec})))
        cut.append(listed[1])
    return b'{"generated_at":%s,"jobs":[%s]}' % (orjson.dumps(now), b",".join(cut))
