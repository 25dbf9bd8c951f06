"""The replicated store (StateStore=etcd): rctld's journal, snapshots and job packs in etcd,
behind the same calls as FileStore, every write fenced by the leader's epoch.

Keys under the prefix P (values are the bytes FileStore would write):
  P/j/SEQ            one group commit: the journal lines of a batch, named by its first seq
  P/j/SEQ/NNNN       parts of a batch over CHUNK bytes, written before P/j/SEQ (which ends it)
  P/s/GEN/NNNN       a snapshot's parts;  P/snap: {"gen", "parts", "journal_seq"} (the current)
  P/b/PACK/NNNN      a job pack's parts (ctld/state/bulkfiles.py);  P/bh/PACK: {"parts", "size"}
  P/f/NAME           a small file of StateSaveLocation kept whole (node_credentials.json)
etcd refuses a request over ~1.5 MiB, so anything larger goes in parts of CHUNK bytes, each
its own transaction; the key that names them is written last, so a half-written thing is never
read (load skips parts without their head; the next trim deletes them).

Every transaction compares the leader key's create revision with ours (the epoch): once
another controller holds the seat, etcd itself refuses what we send, and `on_fenced` is told.
A write that gets no answer is sent again (the same puts under the same compare) until it
lands or the controller's lease is past saving (`alive()` false): an acknowledged change is in
etcd, and one that was refused to its client is nowhere that a reply confirmed.

Job ids never go back here either, without FileStore's id mark: a batch is acknowledged only
once its transaction is committed, and etcd (Raft, each write fsynced on a quorum) never loses a
committed transaction nor cuts a batch short, so every id acknowledged is in the journal or in a
snapshot (whose jobs.next_id is past it) that the next leader reads.

Job packs are written to the local StateSaveLocation first (ctld/state/bulkfiles.py reads them from
there at launch) and copied into etcd before the snapshot that points to them; a controller
that wins the seat copies them all back before it loads (`fetch`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

import orjson
import trio

from ranch.ctld import logs
from ranch.ctld.state import bulkfiles, continuity, deferred, etcdrecords
from ranch.ctld.state.etcdclient import (
    EtcdClient,
    EtcdError,
    EtcdUnavailable,
    created_at,
    delete_range,
    prefix_end,
    put,
)
from ranch.ctld.state.groupcommit import GroupCommit

FETCH_TRIES = 5  # reads of the whole store, each at a newer revision, before giving up
CHUNK = 1_000_000  # bytes of value per transaction (etcd's default request limit: 1.5 MiB)


class Fenced(EtcdError):
    """etcd refused a write: this controller no longer holds the seat."""


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write_file(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _seq_key(n: int) -> str:
    return f"{n:020d}"


class EtcdStore:
    def __init__(self, client: EtcdClient, prefix: str, leader_key: str, epoch: int,
                 state_dir: str, *, on_fenced: Callable[[], None] = lambda: None,
                 alive: Callable[[], bool] = lambda: True, in_thread: bool = True) -> None:
        self.client = client
        self.prefix = prefix
        self.leader_key = leader_key
        self.epoch = epoch
        self.state_dir = state_dir
        self.on_fenced = on_fenced
        self.alive = alive
        self.seq = 0
        self.in_thread = in_thread  # the local file writes (mirrors, packs) in a worker thread
        # FileStore's list of damaged files moved aside (rctld -i): etcd's records carry no
        # file to move; a damaged value is refused in words at load
        self.moved_aside: list[str] = []
        self.ignored: list[str] = []  # FileStore's -i list of missing state: refused here
        self.writes = 0  # journal transactions (for the benchmark)
        self._groups: list[tuple[int, list[bytes]]] = []  # (first seq, lines) to write
        self._cut = True  # the next append starts a new group (a new key)
        # group commit (ctld/state/groupcommit.py): each transaction takes every batch appended
        # by the time it runs (its `run` is the committer in the daemon's nursery)
        self.commits = GroupCommit(self._flush, "journal write to etcd failed")
        self._gen = 0  # the current snapshot's generation
        self._read_rev = 0  # fetch's pinned revision while it runs (0: the newest)
        self._packs: set[int] = set()  # packs in etcd
        self._loaded: tuple[dict[str, Any] | None, list[dict[str, Any]]] = (None, [])
        self._flushed_seq = 0  # every record up to it is in etcd (or voided: _flush)
        self._void: bytes | None = None  # the void record the next batch starts with

    @property
    def path(self) -> str:
        return f"etcd {self.client.endpoint}{self.prefix}"

    # -- transactions -------------------------------------------------------------------

    async def _txn(self, ops: list[dict[str, Any]]) -> int:
        """The fenced transaction `ops`; its revision. Fenced when refused; retried while the
        lease may still be ours, then the last EtcdUnavailable."""
        while True:
            try:
                ok, doc = await self.client.txn([created_at(self.leader_key, self.epoch)], ops)
            except EtcdUnavailable:
                if not self.alive():
                    raise
                await trio.sleep(0.05)
                continue
            if not ok:
                self.on_fenced()
                raise Fenced(f"etcd refused a write of epoch {self.epoch}: another controller "
                             f"holds the seat")
            return int(doc.get("header", {}).get("revision", 0))

    async def transact(self, ops: list[dict[str, Any]]) -> int:
        """One fenced transaction of another module's keys (ctld/state/etcdrecords.py)."""
        return await self._txn(ops)

    async def _put_parts(self, base: str, data: bytes) -> tuple[int, bytes]:
        """Write all but the last CHUNK of `data` as base/NNNN parts; (parts, the last)."""
        pieces = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)] or [b""]
        for i, piece in enumerate(pieces[:-1]):
            await self._txn([put(f"{base}/{i:04d}", piece)])
        return len(pieces) - 1, pieces[-1]

    async def _get_parts(self, base: str) -> bytes:
        kvs = await self.read_range(base + "/", prefix_end(base + "/"))
        return b"".join(v for _, v, _ in kvs)

    # -- start ----------------------------------------------------------------------------

    async def fetch(self) -> None:
        """Read everything (after winning the seat, before `load`): the snapshot, the journal
        after it, and the job packs, copied into the local StateSaveLocation. Every read is
        pinned to one revision: a reader beside a leader (a tool, a test) would otherwise see
        the journal after a compaction deleted what its older snapshot still needed."""
        for attempt in range(FETCH_TRIES):
            self._read_rev = await self.client.revision(f"{self.prefix}/snap")
            try:
                await self._fetch_at()
                return
            except EtcdError as exc:  # the leader compacted past our revision: read again
                if "compacted" not in str(exc) or attempt == FETCH_TRIES - 1:
                    raise
            finally:
                self._read_rev = 0

    async def read_range(self, key: str, end: bytes | None = None
                         ) -> list[tuple[bytes, bytes, dict[str, Any]]]:
        """A range read, at fetch's pinned revision while it runs."""
        return await self.client.range(key, end, revision=self._read_rev)

    async def _fetch_at(self) -> None:
        p = self.prefix
        doc = None
        head = await self.read_range(f"{p}/snap")
        if head:
            meta = orjson.loads(head[0][1])
            self._gen = int(meta["gen"])
            base = f"{p}/s/{_seq_key(self._gen)}"
            kvs = await self.read_range(base + "/", prefix_end(base + "/"))
            if len(kvs) != int(meta["parts"]):
                raise ValueError(f"missing state: {self.path}/s/{_seq_key(self._gen)} (the "
                                 f"snapshot) has {len(kvs)} of its {meta['parts']} parts")
            doc = orjson.loads(b"".join(v for _, v, _ in kvs))
        kvs = await self.read_range(f"{p}/j/", prefix_end(f"{p}/j/"))
        parts: dict[str, list[bytes]] = {}
        batches: list[bytes] = []
        for key, value, _ in kvs:
            name = key.decode()[len(p) + 3:]
            batch, _, part = name.partition("/")
            if part:
                parts.setdefault(batch, []).append(value)
            else:  # its head sorts before its parts: join them at the end
                batches.append(batch.encode() + b"\0" + value)
        lines: list[dict[str, Any]] = []
        named: list[tuple[str, list[dict[str, Any]]]] = []  # (key, its records), in order
        for item in batches:
            head_name, _, last = item.partition(b"\0")
            raw = b"".join(parts.get(head_name.decode(), [])) + last
            recs = [rec for line in raw.splitlines() if line.strip()
                    for rec in (orjson.loads(line),) if isinstance(rec, dict)]
            lines += recs
            named.append((f"{self.path}/j/{head_name.decode()}", recs))
        after = int(doc.get("journal_seq", 0)) if doc else 0
        files = await self.read_range(f"{p}/f/", prefix_end(f"{p}/f/"))
        self._check(doc, after, named, {os.path.basename(k.decode()) for k, _, _ in files})
        self.seq = self._flushed_seq = max([after, *(int(r.get("seq", 0)) for r in lines)])
        self._loaded = (doc, continuity.without_voided(
            [r for r in lines if int(r.get("seq", 0)) > after]))
        await self._fetch_packs()
        for key, value, _ in files:
            name = os.path.basename(key.decode())
            await self._run(_write_file, os.path.join(self.state_dir, name), value)
        events, history = await etcdrecords.fetch(self)
        logs.event("state read from etcd", prefix=p, snapshot_gen=self._gen,
                   journal=len(self._loaded[1]), packs=len(self._packs), events=events,
                   history=history)

    def _check(self, doc: dict[str, Any] | None, after: int,
               batches: list[tuple[str, list[dict[str, Any]]]], files: set[str]) -> None:
        """What the keys prove about each other (ctld/state/continuity.py): a batch of the
        journal, the snapshot or the credentials file deleted from etcd is refused (ValueError:
        the controller gives the seat up and says why), never taken as a fresh start. etcd
        loses nothing committed, so only a hand that deleted keys leaves a hole; the newest
        batch deleted leaves none to see."""
        missing = continuity.journal_gap(after, batches, None, f"{self.path}/snap",
                                         doc is not None) or continuity.credentials_missing(
            doc, continuity.CREDENTIALS_FILE in files,
            f"{self.path}/f/{continuity.CREDENTIALS_FILE}")
        if missing is not None:
            raise ValueError(f"missing state: {missing.what}; restore it (etcdctl snapshot "
                             "restore) or remove the prefix to start afresh")

    async def _fetch_packs(self) -> None:
        p = self.prefix
        heads = await self.read_range(f"{p}/bh/", prefix_end(f"{p}/bh/"))
        self._packs = set()
        directory = bulkfiles.jobs_dir(self.state_dir)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        for key, _, _ in heads:
            pack = int(key.decode().rsplit("/", 1)[1])
            data = await self._get_parts(f"{p}/b/{_seq_key(pack)}")
            await self._run(_write_file, bulkfiles.pack_path(self.state_dir, pack), data)
            self._packs.add(pack)
        for pack in bulkfiles.packs(self.state_dir):  # another reign's, never copied: not ours
            if pack not in self._packs:
                bulkfiles.remove_pack(self.state_dir, pack)

    async def put_file(self, name: str, data: bytes) -> None:
        """A small state file (under CHUNK), fenced like every write."""
        await self._txn([put(f"{self.prefix}/f/{name}", data)])

    def load(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        return self._loaded

    def read(self) -> list[dict[str, Any]]:
        return self._loaded[1]

    # -- group commit (as FileStore's) -----------------------------------------------------

    def append(self, records: list[dict[str, Any]]) -> int:
        if self._cut or not self._groups:
            self._groups.append((self.seq + 1, []))
            self._cut = False
        lines = self._groups[-1][1]
        if self._void is not None:  # first in the next batch, under that batch's key
            lines.append(self._void)
            self._void = None
        for rec in records:
            self.seq += 1
            lines.append(orjson.dumps({"seq": self.seq, **rec}) + b"\n")
        return self.commits.ticket()

    async def commit(self, records: list[dict[str, Any]]) -> None:
        """Append and wait: durable on return (OSError if not)."""
        ticket = self.append(records)
        await self.commits.wait(ticket)

    async def _flush(self) -> None:
        """Every group appended so far, one transaction (more only past CHUNK). One that
        fails leaves a void record for the numbers its records took, written first with the
        next batch (as FileStore does), so that the journal's numbers run without a gap."""
        groups, self._groups = self._groups, []
        self._cut = True
        first, upto = self._flushed_seq + 1, self.seq
        try:
            await self._put_groups(groups)
        except OSError:  # EtcdError is one
            if upto >= first:
                void = orjson.dumps({"seq": upto, "void_from": first}) + b"\n"
                if self._groups:  # appended while it was sent: their batch comes next
                    self._groups[0][1].insert(0, void)
                else:
                    self._void = void
            raise
        self._flushed_seq = upto

    async def _put_groups(self, groups: list[tuple[int, list[bytes]]]) -> None:
        ops: list[dict[str, Any]] = []
        size = 0
        for first, lines in groups:  # one group but after a snapshot cut: one transaction
            base = f"{self.prefix}/j/{_seq_key(first)}"
            _, last = await self._put_parts(base, b"".join(lines))
            if ops and size + len(last) > CHUNK:
                await self._txn(ops)
                ops, size = [], 0
            ops.append(put(base, last))
            size += len(last)
        if ops:
            await self._txn(ops)
            self.writes += 1

    def close(self) -> None:
        """Nothing held open between calls but the connection, which the owner closes."""

    # -- snapshots ------------------------------------------------------------------------

    def rotate(self) -> int:
        """A snapshot is being built: later records go under a new key, so that trimming the
        journal up to the snapshot's seq deletes only what it holds."""
        self._cut = True
        return self.seq + 1

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.in_thread:
            return await trio.to_thread.run_sync(fn, *args)
        return fn(*args)

    async def snapshot(self, doc: dict[str, Any], keep_from: int | None = None,
                       before: Callable[[], None] | None = None,
                       after: Callable[[], None] | None = None) -> None:
        """The job packs new since the last snapshot, then the snapshot in parts, then its head
        with the journal it holds and the older snapshot deleted (one transaction); then the
        packs no longer on disk go from etcd too. OSError when any of it failed."""
        if before is not None:
            await self._run(before)
        await self._upload_packs()
        p = self.prefix
        gen = self._gen + 1
        base = f"{p}/s/{_seq_key(gen)}"
        parts, last = await self._put_parts(base, deferred.dumps(doc))
        seq = int(doc.get("journal_seq", 0))
        head = orjson.dumps({"gen": gen, "parts": parts + 1, "journal_seq": seq})
        revision = await self._txn([
            put(f"{base}/{parts:04d}", last),
            put(f"{p}/snap", head),
            delete_range(f"{p}/j/", f"{p}/j/{_seq_key(seq + 1)}".encode()),
            delete_range(f"{p}/s/", f"{p}/s/{_seq_key(gen)}".encode()),
        ])
        self._gen = gen
        if after is not None:
            try:
                await self._run(after)
            except OSError as exc:
                logs.event("job files not removed", logging.WARNING, error=str(exc))
        gone = self._packs - set(bulkfiles.packs(self.state_dir))
        for pack in sorted(gone):
            key = f"{p}/b/{_seq_key(pack)}/"
            await self._txn([delete_range(f"{p}/bh/{_seq_key(pack)}",
                                          f"{p}/bh/{_seq_key(pack)}\0".encode()),
                             delete_range(key, prefix_end(key))])
            self._packs.discard(pack)
        # etcd keeps every revision until compacted: without this its database only grows
        with contextlib.suppress(EtcdError):
            await self.client.call("kv/compaction", {"revision": revision})

    async def _upload_packs(self) -> None:
        p = self.prefix
        for pack in bulkfiles.packs(self.state_dir):
            if pack in self._packs:
                continue
            data = await self._run(_read, bulkfiles.pack_path(self.state_dir, pack))
            base = f"{p}/b/{_seq_key(pack)}"
            parts, last = await self._put_parts(base, data)
            head = orjson.dumps({"parts": parts + 1, "size": len(data)})
            await self._txn([put(f"{base}/{parts:04d}", last),
                             put(f"{p}/bh/{_seq_key(pack)}", head)])
            self._packs.add(pack)
