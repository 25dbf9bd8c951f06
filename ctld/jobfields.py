"""The job list cut to the record keys a command reads (GetJobs.fields): rqueue's default view
reads 17 of a record's ~70 keys, and encoding, sending and decoding the rest was most of its
time with thousands of jobs queued."""

from __future__ import annotations

from typing import Any

import orjson

from ctld.wire import kept


def list_body(jobs: Any, fields: tuple[str, ...]) -> bytes:
    """The JobList body of every job, each record holding only `fields` (unknown names are
    skipped). Encoded once per change of the jobs and set of fields, like the full list."""
    wanted = tuple(sorted(set(fields)))
    cached = getattr(jobs, "_cut_list", None)
    if cached is not None and cached[0] == jobs.gen and cached[1] == wanted:
        records = cached[2]
    else:
        cut = []
        for job in jobs.jobs.values():
            rec = jobs.record(job)
            cut.append({k: rec[k] for k in wanted if k in rec})
        records = kept(orjson.dumps(cut))
        jobs._cut_list = (jobs.gen, wanted, records)
    return b'{"generated_at":%s,"jobs":%s}' % (orjson.dumps(jobs.c.wall()), records)
