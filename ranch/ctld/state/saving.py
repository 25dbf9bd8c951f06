"""The state file, the job-script packs and the event log, written in the background."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from ranch.ctld import gctune, logs
from ranch.ctld.state import bulkfiles, eventfile, statefile
from ranch.ctld.state.etcdrecords import put_events

if TYPE_CHECKING:
    from ranch.ctld.state.changelog import ChangeLog
    from ranch.ctld.state.ports import BulkSource, SaveDoc, UnsavedEvents
    from ranch.ctld.wakeup import Wakeup

# Seconds between snapshots (the state file). A SIGKILL loses nothing in between: every change a
# reply confirmed is in the journal; a snapshot only lets the journal's older segments go.
SAVE_INTERVAL = 5.0
# A snapshot's share of the controller's time is held under about 1 / SAVE_SPACING: the next
# one waits at least SAVE_SPACING times as long as the last one took. Encoding 50,000 nodes'
# entries (96 MB) holds the interpreter lock for a few hundred ms, more on a loaded machine,
# and every 5 s while a registration storm changed every node it took that much from the
# event loop (docs/benchmarks.md, relays). Durability does not move: every confirmed change is
# in the journal already; a later snapshot only keeps the journal's segments a little longer.
SAVE_SPACING = 10.0
EVENT_SAVE_INTERVAL = 0.5  # coalescing window of event log appends


class Saver:
    """When the state file and the event log are written, and which pack the next snapshot's
    job scripts go to."""

    def __init__(self, save_doc: SaveDoc, bulk: BulkSource, event_log: UnsavedEvents,
                 changes: ChangeLog, store: Any, state_dir: str, *,
                 local: bool, dirty: Wakeup, events: Wakeup, in_thread: bool = True,
                 credential_holders: Callable[[], list[str]] = list) -> None:
        """`save_doc`: every owner's saved records; `bulk`: the job store's new jobs' scripts
        and environments, packed by each snapshot; `event_log`: what the event log holds
        unsaved. `local`: the state lives in `state_dir` (a replicated store's journal holds it
        all); `dirty`/`events`: set when a snapshot / an event log write is due; `in_thread`:
        writes leave the event loop (tests under MockClock write inline, so time stays
        exact); `credential_holders`: the nodes that hold a credential, which a snapshot names,
        so that node_credentials.json gone missing is refused at start
        (ctld/state/continuity.py)."""
        self.save_doc = save_doc
        self.bulk = bulk
        self.event_log = event_log
        self.changes = changes
        self.store = store
        self.state_dir = state_dir
        self.local = local
        self.dirty = dirty
        self.events = events
        self.in_thread = in_thread
        self.next_pack = 1 + max(bulkfiles.packs(state_dir), default=0)  # ctld/state/bulkfiles.py
        self.credential_holders = credential_holders

    def snapshot_doc(self) -> dict[str, Any]:
        doc = self.save_doc()
        doc["node_credentials"] = self.credential_holders()
        doc["journal_seq"] = self.store.seq  # every record handed to the store so far
        doc["journal_keep_from"] = self.store.rotate()  # later records go to a new segment
        return doc

    def save_now(self) -> None:
        """Write the state file synchronously (shutdown). Not for a replicated store: its
        journal already holds everything, and a controller that lost the seat may write no
        more."""
        if not self.local:
            return
        try:
            self.store.save(self.snapshot_doc())
            logs.event("state saved", path=statefile.state_path(self.state_dir))
        except OSError as exc:
            logs.event("state save failed", logging.ERROR, error=str(exc))

    async def run(self) -> None:
        """A snapshot when something changed, at most one a SAVE_INTERVAL (or, for a snapshot
        that took long, SAVE_SPACING times as long as it took)."""
        while True:
            await self.dirty.wait()
            started = trio.current_time()
            await self.save_snapshot()
            gctune.release_free_memory()
            took = trio.current_time() - started
            await trio.sleep(max(SAVE_INTERVAL, SAVE_SPACING * took) - took)

    async def save_snapshot(self) -> bool:
        """One snapshot: the new jobs' bulk packed, the state file, the journal trimmed, the
        files of purged jobs removed. False (logged, retried by the saver) if it failed."""
        doc = self.snapshot_doc()  # built here; the entries are never mutated later
        bulk, gone = self.bulk.take_bulk()
        pack, placed = self.next_pack, list[tuple[int, int, int]]()
        if bulk:
            self.next_pack += 1
        try:
            await self.store.snapshot(doc, doc["journal_keep_from"],
                                      partial(self._write_bulk, pack, bulk, placed),
                                      partial(self._remove_bulk, gone))
        except OSError as exc:
            logs.event("state save failed", logging.ERROR, error=str(exc))
            # no saved record points into a pack it wrote: the next snapshot writes anew
            self.bulk.bulk_not_written([pack, *gone[1]] if placed else gone[1], gone[0])
            self.changes.save_failed()
            self.dirty.set()
            return False
        if placed:
            self.bulk.bulk_written(pack, placed)
        return True

    def _write_bulk(self, pack: int, bulk: list[tuple[int, str, tuple | bytes]],
                    placed: list[tuple[int, int, int]]) -> None:
        """In the snapshot's thread: the new jobs' scripts and environments in one pack, before
        the snapshot lets go of the journal segment that holds them."""
        placed += bulkfiles.write_pack(self.state_dir, pack, bulk)

    def _remove_bulk(self, gone: tuple[list[int], list[int]]) -> None:
        """In the snapshot's thread, once the snapshot without them is on disk: the files of
        purged jobs (a crash before it must find the files its saved records point to)."""
        for jid in gone[0]:
            bulkfiles.remove(self.state_dir, jid)
        for pack in gone[1]:
            bulkfiles.remove_pack(self.state_dir, pack)

    async def run_events(self) -> None:
        """Appends new events to the state dir's event log, batched like state saves."""
        log = self.event_log
        while True:
            await self.events.wait()
            batch, everything = log.take_unsaved()
            try:
                if not self.local:  # etcd first: a retry puts the same keys again
                    await put_events(self.store, batch, everything)
                if self.in_thread:
                    n = await trio.to_thread.run_sync(eventfile.write, self.state_dir, batch,
                                                      everything)
                else:
                    n = eventfile.write(self.state_dir, batch, everything)
                log.written(n, everything is not None)
            except OSError as exc:
                logs.event("event log save failed", logging.ERROR, error=str(exc))
                log.not_written(batch)
            await trio.sleep(EVENT_SAVE_INTERVAL)

    def flush_events(self) -> None:
        """Write what the event log holds unsaved, synchronously (shutdown)."""
        log = self.event_log
        batch, everything = log.take_unsaved()
        if not batch and everything is None:
            return
        try:
            log.written(eventfile.write(self.state_dir, batch, everything),
                        everything is not None)
        except OSError as exc:
            logs.event("event log save failed", logging.ERROR, error=str(exc))
