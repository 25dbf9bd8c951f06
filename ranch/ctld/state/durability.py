"""Durable before acknowledged: replies and pushes wait for the changes they follow from."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ranch.ctld import logs
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from ranch.ctld.state.changelog import ChangeLog
    from ranch.ctld.state.ports import JournalRecords, Submissions
    from ranch.ctld.wakeup import Wakeup


@attrs.frozen
class Journaled:
    """A reply that may leave only once the journal holds what it confirms; `undo` gives the
    reply to send instead when that write failed (and takes the change back)."""

    reply: Any
    undo: Callable[[OSError], Any]


class Durability:
    """Takes the change log's changes to the store (group commit), and sends the pushes that
    waited for them in the order they were made."""

    def __init__(self, journal_records: JournalRecords, submissions: Submissions,
                 changes: ChangeLog, store: Any, outbox: Wakeup) -> None:
        """`journal_records`: each owner's records of the changes taken from the change log;
        `submissions`: the job store's, journaled before their reply; `outbox`: set by the
        change log when a push waits for a write."""
        self.journal_records = journal_records
        self.submissions = submissions
        self.changes = changes
        self.store = store
        self.outbox = outbox

    async def durable(self) -> None:
        """Return once every change made so far is on disk (group commit: the changes of every
        caller that arrives meanwhile share one write). OSError when they could not be written;
        they stay queued for the next try."""
        changes = self.changes
        if changes.pending():
            taken = changes.take()
            ticket = self.store.append(self.journal_records(taken))
            try:
                await self.store.commits.wait(ticket)
            except OSError:
                changes.put_back(taken)
                raise
        else:
            await self.store.commits.wait(self.store.commits.last_ticket)

    def submit_now(self, msg: m.SubmitJob) -> m.Error | Journaled:
        """Accept a job: checked, queued and scheduled now (as submitted, or already RUNNING);
        its reply is Journaled, to leave once the journal holds it (one write with whatever
        else waits). Its LaunchJob waits in the outbox for the same write, so no job runs that
        the journal lacks; if the write fails, it is retracted and the reply is an Error."""
        jobs = self.submissions
        built = jobs.build(msg)
        if isinstance(built, m.Error):
            return built
        return Journaled(jobs.accept(built), partial(self._not_written, built))

    def _not_written(self, built: Any, exc: OSError) -> m.Error:
        """Never acknowledged, never launched: as if never submitted."""
        self.submissions.retract(built)
        logs.event("job journal write failed", logging.ERROR, error=str(exc))
        return m.Error("internal", f"job {built[0].id} could not be written to "
                       f"{self.store.path}: {exc.strerror or exc}")

    async def submit(self, msg: m.SubmitJob) -> m.SubmitReply | m.Error:
        """`submit_now`, its reply once the journal holds the job (the web's submissions)."""
        got = self.submit_now(msg)
        if isinstance(got, m.Error):
            return got
        try:
            await self.durable()
        except OSError as exc:
            return got.undo(exc)
        return got.reply

    async def flush_outbox(self) -> bool:
        """Send the pushes queued so far, in order, once what led to them is on disk."""
        batch = self.changes.take_outbox()
        try:
            await self.durable()
        except OSError as exc:
            logs.event("journal write failed; launches and kills wait", logging.ERROR,
                       error=str(exc))
            self.changes.put_back_outbox(batch)
            return False
        for fn, args in batch:
            fn(*args)
        return True

    async def run_outbox(self) -> None:
        """Pushes that follow from changes (LaunchJob, KillJob) leave once those are on disk,
        one batch after the other, so that a node gets them in the order they were made."""
        while True:
            await self.outbox.wait()
            if not await self.flush_outbox():
                self.outbox.set()
                await trio.sleep(1.0)
