"""A standby's copy of the leader's committed state (issue 47), read from etcd's keys the leader
already writes: the snapshot head and the journal batches after what this copy holds.

Why from etcd and not a stream from the leader: the leader then pays nothing per standby (no
encode, no socket, no task); every group commit it makes is already in etcd, replicated, and
etcd answers a standby's read from any member. A stream from the leader would cost it a send
per change per standby on the loop that takes submissions.

Why a poll and not a watch: freshness must be *proven*, not assumed. A watch that has told
nothing proves nothing (the stream may be stalled; etcd 3.4's progress notices come every
10 minutes). A linearizable read does: everything committed before it was sent is in its
answer. Each poll is one read-only transaction (the snapshot head and the journal after our
sequence, at one revision), and `proven_at` is when the last one that succeeded was *sent*:
the copy held is the committed state as of that instant or later, never earlier.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import orjson
import trio

from ranch.ctld import logs
from ranch.ctld.state.continuity import without_voided
from ranch.ctld.state.etcdclient import EtcdError, b64, prefix_end
from ranch.ctld.state.overlay import overlay

MIN_POLL = 0.05  # seconds: at most 20 reads a second from one standby
MAX_POLL = 1.0


def poll_interval(bound: float) -> float:
    """A quarter of the staleness bound: a copy a poll or two behind is still within it."""
    return min(MAX_POLL, max(MIN_POLL, bound / 4))


def _seq_key(n: int) -> str:
    return f"{n:020d}"


def range_op(key: str, end: bytes | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"key": b64(key)}
    if end is not None:
        op["range_end"] = b64(end)
    return {"request_range": op}


def _kvs(doc: dict[str, Any], i: int) -> list[tuple[str, bytes]]:
    from ranch.ctld.state.etcdclient import unb64

    responses = doc.get("responses") or []
    kvs = (responses[i].get("response_range") or {}).get("kvs") or [] if i < len(responses) else []
    return [(unb64(kv.get("key")).decode(), unb64(kv.get("value"))) for kv in kvs]


def batches(prefix: str, kvs: list[tuple[str, bytes]]) -> list[list[dict[str, Any]]]:
    """The journal's batches among `kvs` (keys P/j/SEQ and their parts P/j/SEQ/NNNN), each
    its records in order. A batch whose head is missing is not complete (its head is written
    last) and is left out with everything after it."""
    start = len(prefix) + 3
    heads: dict[str, bytes] = {}
    parts: dict[str, list[bytes]] = {}
    order: list[str] = []
    for key, value in kvs:
        batch, _, part = key[start:].partition("/")
        if part:
            parts.setdefault(batch, []).append(value)
        else:
            heads[batch] = value
            order.append(batch)
    out = []
    for batch in order:
        raw = b"".join(parts.get(batch, ())) + heads[batch]
        out.append([rec for line in raw.splitlines() if line.strip()
                    for rec in (orjson.loads(line),) if isinstance(rec, dict)])
    return out


class Follower:
    """The snapshot last read (`base`) and the journal records after it (`records`), with the
    sequence of the last record applied and when that state was last proven current."""

    def __init__(self, client: Any, prefix: str, *, interval: float,
                 clock: Callable[[], float] = trio.current_time) -> None:
        self.client = client
        self.prefix = prefix
        self.interval = interval
        self.clock = clock
        self.base: dict[str, Any] | None = None
        self.records: list[dict[str, Any]] = []
        self.seq = 0
        self.gen = -1  # the snapshot generation `base` came from (-1: nothing read yet)
        self.version = 0  # one more at each change applied (the view rebuilds on it)
        self.proven_at = -math.inf  # trio time the last successful read was sent
        # the last proof of the version before this one (what a view built from it may claim)
        self.prior: tuple[int, float] = (-1, -math.inf)
        self.polls = self.reloads = 0
        self._reload = True

    def proof_of(self, version: int, built: float) -> float:
        """When the state of `version` was last proven current: a view built from it at a
        time it was proven as of `built` claims no later unless we know better."""
        if version == self.version:
            return self.proven_at
        if version == self.prior[0]:
            return max(built, self.prior[1])
        return built

    def state(self) -> dict[str, Any]:
        """The saved state as the leader would restore it: the snapshot with the records laid
        over it. The result becomes the new base (the records are folded in once)."""
        doc = overlay(self.base, self.records)
        self.base, self.records = doc, []
        return doc

    async def run(self) -> None:
        while True:
            try:
                await self.poll()
            except (EtcdError, ValueError, KeyError, TypeError) as exc:
                logs.event("standby could not read the state from etcd", logging.WARNING,
                           error=str(exc))
            await trio.sleep(self.interval)

    async def poll(self) -> None:
        """One read: the snapshot head and the journal after our sequence; applied, and the
        state proven as of the read's send time. A newer snapshot that holds records we lack
        (the leader trimmed them), a gap or a void over records applied: read everything."""
        if self._reload:
            await self.load()
            return
        p = self.prefix
        sent = self.clock()
        _, doc = await self.client.txn([], [
            range_op(f"{p}/snap"),
            range_op(f"{p}/j/{_seq_key(self.seq + 1)}", prefix_end(f"{p}/j/"))])
        self.polls += 1
        head = _kvs(doc, 0)
        meta = orjson.loads(head[0][1]) if head else None
        if meta is not None and int(meta["gen"]) != self.gen and \
                int(meta.get("journal_seq", 0)) > self.seq:
            self._reload = True  # the records between were trimmed: read the snapshot
            await self.load()
            return
        if meta is not None:
            self.gen = int(meta["gen"])  # a snapshot of what we hold already
        if not self._apply([r for b in batches(p, _kvs(doc, 1)) for r in b]):
            self._reload = True
            await self.load()
            return
        self.proven_at = sent

    def _apply(self, records: list[dict[str, Any]]) -> bool:
        """Lay `records` (the journal after `seq`, in order) on; False when they do not follow
        on (a gap, or a void record over what is applied: read everything again)."""
        if not records:
            return True
        seq = self.seq
        for rec in records:
            if "void_from" in rec:  # numbers a failed write took: nothing under them counts
                if int(rec["void_from"]) <= self.seq:
                    return False  # some of them were applied here already
                seq = max(seq, int(rec["seq"]))
                continue
            n = int(rec.get("seq", 0))
            if n <= seq:
                continue
            if n != seq + 1:
                return False
            seq = n
        self._moved()
        self.records += [r for r in without_voided(records)
                         if "void_from" not in r and int(r.get("seq", 0)) > self.seq]
        self.seq = seq
        return True

    def _moved(self) -> None:
        self.prior = (self.version, self.proven_at)
        self.version += 1

    async def load(self) -> None:
        """Everything at one revision: the snapshot head, every snapshot's parts (the head
        names which), and the whole journal."""
        p = self.prefix
        sent = self.clock()
        _, doc = await self.client.txn([], [
            range_op(f"{p}/snap"), range_op(f"{p}/s/", prefix_end(f"{p}/s/")),
            range_op(f"{p}/j/", prefix_end(f"{p}/j/"))])
        head = _kvs(doc, 0)
        base, gen, after = None, 0, 0
        if head:
            meta = orjson.loads(head[0][1])
            gen, after = int(meta["gen"]), int(meta.get("journal_seq", 0))
            mine = f"{p}/s/{_seq_key(gen)}/"
            parts = [v for k, v in _kvs(doc, 1) if k.startswith(mine)]
            if len(parts) != int(meta["parts"]):
                raise ValueError(f"snapshot {gen} has {len(parts)} of its {meta['parts']} parts")
            base = orjson.loads(b"".join(parts))
        records = [r for b in batches(p, _kvs(doc, 2)) for r in b]
        records = [r for r in without_voided(records) if int(r.get("seq", 0)) > after]
        self._moved()
        self.base, self.records, self.gen = base, records, gen
        self.seq = max([after, *(int(r.get("seq", 0)) for r in records)])
        self.proven_at = sent
        self._reload = False
        self.reloads += 1
        logs.event("standby read the state from etcd", logging.DEBUG, snapshot_gen=gen,
                   journal=len(records), seq=self.seq)
