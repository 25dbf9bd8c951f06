"""What the state layer is given of the owners above it (the job store, the event log, the
composition root's callables): narrow protocols, so that state/ imports neither ctld/nodes/ nor
ctld/jobs/. The composition root (ctld/daemon.py) hands each owner in; mypy checks it fits."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ranch.ctld.state.changelog import Taken
    from ranch.protocol import messages as m

# The snapshot's document: every owner's saved records (the composition root gathers them).
SaveDoc = Callable[[], dict[str, Any]]
# The journal records of the changes taken from the change log, each owner's own.
JournalRecords = Callable[["Taken"], list[dict[str, Any]]]
# A new job's bulk: (job id, script, environment or that already as JSON).
BulkItem = tuple[int, str, tuple | bytes]


class BulkSource(Protocol):
    """The job store (ctld/jobs/store.py), as the snapshot packs its new jobs' scripts and
    environments (ctld/state/bulkfiles.py) and removes the files of purged ones."""

    def take_bulk(self) -> tuple[list[BulkItem], tuple[list[int], list[int]]]:
        """(the new jobs' bulk, (purged jobs whose directories may go, packs that may go))."""

    def bulk_written(self, pack: int, placed: Iterable[tuple[int, int, int]]) -> None:
        """Their bulk is in `pack` now, each (job id, offset, length)."""

    def bulk_not_written(self, packs: Iterable[int], purged: Iterable[int]) -> None:
        """The snapshot failed: these files are for the next one to remove."""


class UnsavedEvents(Protocol):
    """The event log (ctld/nodes/eventlog.py), as its file's writer (ctld/state/saving.py)
    takes what is to be written (ctld/state/eventfile.py)."""

    def take_unsaved(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """(events to append, or every kept event when the file is to be rewritten)."""

    def written(self, count: int, everything: bool) -> None: ...

    def not_written(self, batch: list[dict[str, Any]]) -> None: ...


class Submissions(Protocol):
    """The job store's submissions (ctld/jobs/jobsubmit.py), as a submission is made durable
    before its reply (ctld/state/durability.py)."""

    def build(self, req: m.SubmitJob) -> Sequence[Any] | m.Error:
        """The checked jobs, ids reserved, not queued; or why not."""

    def accept(self, built: Sequence[Any]) -> m.SubmitReply:
        """Queue them (their launches wait in the outbox for the journal write)."""

    def retract(self, accepted: Sequence[Any]) -> None:
        """Their journal write failed: gone as if never submitted."""
