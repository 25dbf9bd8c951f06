"""The event log and the job history in etcd beside the journal (StateStore=etcd), so that the
controller taking the seat serves its predecessor's `rcontrol events` and `racct`.

Keys under the store's prefix P (values: JSON lines, at most CHUNK bytes each):
  P/e/SEQ        a batch of events, named by its first event's seq. A rewrite of the bounded log
                 puts the kept events again and deletes every batch named below the first kept
                 one; `fetch` keeps one event per seq.
  P/h/DAY/N      a batch of finished-job records that ended on UTC day DAY (N orders batches);
                 `fetch` keeps one record per (job id, run); a day pruned locally (PurgeJobAfter)
                 goes from etcd whole.
Every write is one of the store's fenced transactions. The local files stay what rctld reads
(ctld/state/eventfile.py, ctld/state/historyfiles.py); etcd is where the next controller copies
them from. The job history's writer (ctld/jobs/replicatedhistory.py) calls `put_history` and
`drop_days` from its worker thread.
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

import orjson
import trio

from ranch.ctld.state import eventfile, historyfiles
from ranch.ctld.state.etcdclient import EtcdError, delete_range, prefix_end, put
from ranch.protocol import durable


class EtcdStore(Protocol):
    """What this module uses of ctld/state/etcdstore.py's store (which calls `fetch`)."""

    prefix: str
    state_dir: str
    client: Any

    async def transact(self, ops: list[dict[str, Any]]) -> int: ...

    async def read_range(self, key: str, end: bytes | None = None
                         ) -> list[tuple[bytes, bytes, dict[str, Any]]]: ...


CHUNK = 1_000_000  # as the store's: etcd refuses a request over about 1.5 MiB


def _values(recs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], bytes]]:
    """(first record, JSON lines) per value of at most CHUNK bytes."""
    out: list[tuple[dict[str, Any], bytes]] = []
    lines: list[bytes] = []
    first: dict[str, Any] = {}
    size = 0
    for rec in recs:
        line = orjson.dumps({k: v for k, v in rec.items() if k != "_verify"}) + b"\n"
        if lines and size + len(line) > CHUNK:
            out.append((first, b"".join(lines)))
            lines, size = [], 0
        if not lines:
            first = rec
        lines.append(line)
        size += len(line)
    if lines:
        out.append((first, b"".join(lines)))
    return out


def _lines(value: bytes) -> list[dict[str, Any]]:
    out = []
    for line in value.splitlines():
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


# -- the event log --------------------------------------------------------------------------

async def put_events(store: EtcdStore, batch: list[dict[str, Any]],
                     everything: list[dict[str, Any]] | None) -> None:
    """The events the flusher is about to append locally (or, for a rewrite, every kept one
    and the older batches gone). EtcdError when not written."""
    p = f"{store.prefix}/e/"
    for first, value in _values(everything if everything is not None else batch):
        await store.transact([put(f"{p}{int(first['seq']):020d}", value)])
    if everything:
        await store.transact([delete_range(p, f"{p}{int(everything[0]['seq']):020d}".encode())])


# -- the job history -----------------------------------------------------------------------

def from_a_worker() -> None:
    """etcd is reached from a worker thread of the loop's; on the loop itself (the last
    write at shutdown) nothing is written: the jobs stay in the state, and the next
    controller offers them again."""
    try:
        trio.from_thread.check_cancelled()
    except RuntimeError:
        raise EtcdError("the job history is written to etcd from a worker thread, not at "
                        "shutdown; the next controller writes these records") from None


async def put_history(store: EtcdStore, batch: list[dict[str, Any]]) -> None:
    by_day: dict[str, list[dict[str, Any]]] = {}
    for rec in batch:
        by_day.setdefault(historyfiles.day_of(float(rec.get("end_time") or 0.0)), []).append(rec)
    for day, recs in by_day.items():
        for _first, value in _values(recs):
            await store.transact([put(f"{store.prefix}/h/{day}/{time.time_ns():020d}", value)])


async def drop_days(store: EtcdStore, days: list[str]) -> None:
    for day in days:
        base = f"{store.prefix}/h/{day}/"
        await store.transact([delete_range(base, prefix_end(base))])


# -- a new leader's copy ---------------------------------------------------------------------

async def fetch(store: EtcdStore) -> tuple[int, int]:
    """Copy the event log and the job history from etcd into the state directory (before the
    daemon loads them); what etcd does not hold (a store written before these keys) is left
    as it is. (events, history records) copied."""
    p = store.prefix
    events: dict[int, dict[str, Any]] = {}
    for _key, value, _ in await store.read_range(f"{p}/e/", prefix_end(f"{p}/e/")):
        for rec in _lines(value):
            if "seq" in rec and "time" in rec:
                events[int(rec["seq"])] = rec
    if events:
        data = b"".join(orjson.dumps(events[s]) + b"\n" for s in sorted(events))
        await trio.to_thread.run_sync(_replace, os.path.join(store.state_dir,
                                                             eventfile.FILE_NAME), data)
    days: dict[str, dict[tuple[int, int], dict[str, Any]]] = {}
    for k, value, _ in await store.read_range(f"{p}/h/", prefix_end(f"{p}/h/")):
        day = k.decode()[len(p) + 3:].split("/", 1)[0]
        for rec in _lines(value):
            if "job_id" in rec:
                days.setdefault(day, {})[historyfiles.key(rec)] = rec
    if days:
        await trio.to_thread.run_sync(_merge_days, store.state_dir, days)
    return len(events), sum(len(d) for d in days.values())


def _replace(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    durable.write_atomic(path, data)


def _merge_days(state_dir: str, days: dict[str, dict[tuple[int, int], dict[str, Any]]]) -> None:
    """Each day's file becomes what it held and what etcd holds, one record per run."""
    directory = os.path.join(state_dir, historyfiles.DIR_NAME)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    for day, recs in days.items():
        path = historyfiles.day_path(directory, day)
        merged = {historyfiles.key(r): r for r in historyfiles.read_day(path)}
        merged.update(recs)
        ordered = sorted(merged.values(), key=lambda r: (float(r.get("end_time") or 0.0),
                                                         historyfiles.key(r)))
        durable.write_atomic(path, b"".join(orjson.dumps(r) + b"\n" for r in ordered))
