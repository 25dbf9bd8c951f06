"""A workload's jobs as the simulator reads them, and the Standard Workload Format (SWF) of the
Parallel Workloads Archive (cs.huji.ac.il/labs/parallel/workload/swf.html), read and written."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TextIO

import attrs

ACCOUNTS_KEY = "RanchAccounts"  # a header line naming the accounts, by group index
SWF_FIELDS = 18  # job, submit, wait, run, procs, cpu, mem, req procs, req time, req mem, status,
#                  uid, gid, app, queue, partition, preceding job, think time


@attrs.frozen
class TraceJob:
    """One job of a workload: when it was submitted (seconds from the trace's start), how long
    it ran, its time limit, and its size in processors (SWF's unit) or whole nodes."""

    id: int
    submit: float
    runtime: float
    time_limit: int | None  # minutes; None: the partition's
    procs: int = 1  # processors asked for (SWF's requested, else allocated, processors)
    uid: int = 0
    account: str = ""
    partition: str = ""  # "" : the default partition
    nodes: int = 0  # whole nodes asked for (-N); 0: as many as `procs` need
    cpus_per_node: int = 0  # CPUs on each node (history records); 0: procs spread over nodes
    user: str = ""
    exclusive: bool = False  # whole nodes (--exclusive)
    nice: int = 0  # the job's nice (history records)


def whole_nodes(jobs: Sequence[TraceJob]) -> list[TraceJob]:
    """The jobs with each processor read as one whole node (`-N procs --exclusive`): how a
    trace of a small cluster's node counts is replayed."""
    return [attrs.evolve(j, nodes=j.procs, exclusive=True) for j in jobs]


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return -1.0


def read_swf(lines: Iterable[str], accounts: Sequence[str] = ()) -> tuple[list[TraceJob], dict]:
    """The jobs of an SWF trace and its header's `; Key: value` lines. A job's processors are
    its requested ones (field 8), else its allocated ones (5); its time limit the requested
    time (9, seconds, rounded up to minutes), else none; its account is `accounts[gid]` where
    given, else "g<gid>" (SWF has no accounts; Ranch's writer puts the account's index in
    the group and the names in a `; RanchAccounts:` header line). Jobs that never ran
    (runtime < 0) and cancelled ones (status 5) are skipped, as the Archive's guidance for
    simulations says."""
    jobs: list[TraceJob] = []
    header: dict[str, str] = {}
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if line.startswith(";"):
            key, sep, value = line[1:].partition(":")
            if sep:
                header[key.strip()] = value.strip()
            continue
        if not accounts and ACCOUNTS_KEY in header:
            accounts = header[ACCOUNTS_KEY].split()
        f = [_num(x) for x in line.split()]
        if len(f) < SWF_FIELDS:
            f += [-1.0] * (SWF_FIELDS - len(f))
        run, status = f[3], int(f[10])
        procs = int(f[7]) if f[7] > 0 else int(f[4])
        if run < 0 or procs <= 0 or status == 5:
            continue
        req = f[8]
        gid = int(f[12])
        if 0 <= gid < len(accounts):
            account = accounts[gid]
        else:
            account = f"g{gid}" if gid >= 0 else ""
        jobs.append(TraceJob(id=int(f[0]), submit=max(0.0, f[1]), runtime=run,
                             time_limit=math.ceil(req / 60) if req > 0 else None,
                             procs=procs, uid=max(0, int(f[11])), account=account,
                             partition=f"p{int(f[15])}" if f[15] > 0 else ""))
    jobs.sort(key=lambda j: (j.submit, j.id))
    return jobs, header


def write_swf(out: TextIO, jobs: Sequence[TraceJob], header: dict[str, str] | None = None,
              accounts: Sequence[str] = ()) -> None:
    """The jobs as SWF lines (unknown fields -1; the account's index in `accounts`, by default
    the jobs' accounts sorted, as the group), after the header's `; Key: value` lines."""
    accounts = list(accounts) or sorted({j.account for j in jobs if j.account})
    header = dict(header or {})
    if accounts:
        header[ACCOUNTS_KEY] = " ".join(accounts)
    for key, value in header.items():
        out.write(f"; {key}: {value}\n")
    index = {a: i for i, a in enumerate(accounts)}
    for j in jobs:
        req = j.time_limit * 60 if j.time_limit is not None else -1
        gid = index.get(j.account, -1)
        fields = [j.id, round(j.submit), -1, round(j.runtime), j.procs, -1, -1, j.procs, req,
                  -1, 1, j.uid, gid, -1, 1, -1, -1, -1]
        out.write(" ".join(str(x) for x in fields) + "\n")


def compressed(jobs: Sequence[TraceJob], longest: int = 6, limit_top: int = 30
               ) -> list[TraceJob]:
    """The jobs made short enough to run for real in a test: all submitted at once, each
    runtime mapped on a log scale to 1..`longest` seconds and each time limit to
    1..`limit_top` minutes (the longest job and the longest limit at the top: the order of
    runtimes and of limits, which the backfill planner reads, is kept; a limit is at least
    as long as its runtime)."""
    top = max((j.runtime for j in jobs), default=1.0)
    most = max((j.time_limit or 1 for j in jobs), default=1)
    out = []
    for j in jobs:
        frac = math.log(max(j.runtime, 1.0)) / math.log(top) if top > 1 else 0.0
        lim = j.time_limit or most
        lfrac = math.log(lim) / math.log(most) if most > 1 else 0.0
        out.append(attrs.evolve(j, submit=0.0, runtime=float(1 + round(frac * (longest - 1))),
                                time_limit=1 + round(lfrac * (limit_top - 1))))
    return out
