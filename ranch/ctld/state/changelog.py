"""The change log: what changed since the last durable write, and the pushes waiting for it.

The one door between the controller's state and its store (ctld/state/store.py,
ctld/state/etcdstore.py): every owner of nodes, jobs, reservations and the accounting tree
reports a change here, and the daemon takes the changes from here to the journal. A reply that
confirms a change, and a push (LaunchJob, KillJob) that follows from one, leave only once that
change is on disk; this class holds both ends of that rule, so that no caller has to remember
it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ranch.protocol import messages as m

Push = tuple[Callable[..., Any], tuple[Any, ...]]


class Taken:
    """Changes handed to one journal write: given back whole if that write fails."""

    __slots__ = ("accounts", "jobs", "nodes", "reservations")

    def __init__(self, nodes: dict[str, Any], jobs: dict[int, Any],
                 reservations: dict[str, dict[str, Any] | None],
                 accounts: dict[str, Any] | None = None) -> None:
        self.nodes, self.jobs, self.reservations = nodes, jobs, reservations
        self.accounts = accounts  # the accounting tree as it now is (None: unchanged)


class ChangeLog:
    """Owns the change counters, the changes not yet on disk and the outbox of pushes."""

    def __init__(self, *, on_dirty: Callable[[], None] = lambda: None,
                 on_outbox: Callable[[], None] | None = None) -> None:
        """`on_dirty`: the state file is out of date (a snapshot is due); `on_outbox`: a push
        waits for the next durable write (None: no store, so a push leaves at once)."""
        self._on_dirty = on_dirty
        self._on_outbox = on_outbox
        self._gen = 0  # bumped by every change a snapshot (rinfo, the web page) shows
        self._soft_gen = 0  # bumped by heartbeat-only data (metrics, load)
        self._dirty = False  # the state file is out of date
        # Bumped by every change the journal must hold: a request that left them as they were
        # confirms nothing new, and its reply need not wait for the disk.
        self._node_changes = 0
        self._job_changes = 0
        self._nodes: dict[str, Any] = {}
        self._jobs: dict[int, Any] = {}
        self._reservations: dict[str, dict[str, Any] | None] = {}  # name -> record; None: gone
        self._accounts: dict[str, Any] | None = None  # the accounting tree's latest record
        self._outbox: list[Push] = []

    # -- what readers compare -----------------------------------------------------------------

    @property
    def gen(self) -> int:
        return self._gen

    @property
    def soft_gen(self) -> int:
        return self._soft_gen

    @property
    def dirty(self) -> bool:
        return self._dirty

    def counts(self) -> tuple[int, int]:
        """(node changes, job changes) so far: a request whose handler moved them confirms
        a change (ctld/rpc/server.py holds its reply for the write)."""
        return self._node_changes, self._job_changes

    # -- what owners report -------------------------------------------------------------------

    def node_changed(self, node: Any) -> None:
        """A change of `node` that the journal must hold."""
        self._nodes[node.name] = node
        self._node_changes += 1
        self._gen += 1
        self._mark_dirty()

    def reservation_changed(self, name: str, record: dict[str, Any] | None) -> None:
        """Reservation `name` is now `record` (None: it is gone); the journal must hold it."""
        self._reservations[name] = record
        self._node_changes += 1
        self._gen += 1
        self._mark_dirty()

    def accounts_changed(self, record: dict[str, Any]) -> None:
        """The accounting tree is now `record` (ctld/accounts/); the journal must hold it.
        Counted with the node changes as reservations are: a reply confirming it waits."""
        self._accounts = record
        self._node_changes += 1
        self._gen += 1
        self._mark_dirty()

    def job_changed(self, job: Any, durable: bool = True) -> None:
        """`job` changed. `durable`: a fact a reply may confirm, so it goes to the journal
        before that reply leaves (a recomputed pending reason is not)."""
        if durable:
            self._jobs[job.id] = job
            self._job_changes += 1
        self._mark_dirty()

    def shown_changed(self) -> None:
        """Something a snapshot shows changed that the journal need not hold (a health
        report, every node at a reconfigure)."""
        self._gen += 1

    def soft_changed(self) -> None:
        self._soft_gen += 1

    def state_changed(self) -> None:
        """The state file is out of date (jobs may be purged, every node changed...)."""
        self._mark_dirty()

    def _mark_dirty(self) -> None:
        if not self._dirty:
            self._dirty = True
            self._on_dirty()

    def after_durable(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) (a push to a node) once every change reported so far is on disk."""
        if self._on_outbox is None:
            fn(*args)
            return
        self._outbox.append((fn, args))
        self._on_outbox()

    def retract_jobs(self, ids: Iterable[int]) -> None:
        """Jobs whose journal write failed are gone as if never submitted: their records and
        the pushes about them leave with them."""
        gone = set(ids)
        for jid in gone:
            self._jobs.pop(jid, None)
        self._outbox = [(fn, args) for fn, args in self._outbox
                        if not (args and isinstance(args[0], m.LaunchJob | m.KillJob)
                                and _job_id(args[0]) in gone)]

    # -- the store's side -----------------------------------------------------------------------

    def pending(self) -> bool:
        """Changes wait that no write has taken yet."""
        return bool(self._nodes or self._jobs or self._reservations
                    or self._accounts is not None)

    def take(self) -> Taken:
        """Every change not yet handed to a write."""
        taken = Taken(self._nodes, self._jobs, self._reservations, self._accounts)
        self._nodes, self._jobs, self._reservations = {}, {}, {}
        self._accounts = None
        return taken

    def put_back(self, taken: Taken) -> None:
        """The write that took these failed: they wait for the next one (later changes of the
        same record win)."""
        self._nodes = {**taken.nodes, **self._nodes}
        self._jobs = {**taken.jobs, **self._jobs}
        self._reservations = {**taken.reservations, **self._reservations}
        if self._accounts is None and taken.accounts is not None:  # a later change wins
            self._accounts = dict(taken.accounts)

    def take_outbox(self) -> list[Push]:
        batch, self._outbox = self._outbox, []
        return batch

    def put_back_outbox(self, batch: list[Push]) -> None:
        self._outbox[:0] = batch

    def saved(self) -> None:
        """A snapshot is being written of the state as it is now."""
        self._dirty = False

    def save_failed(self) -> None:
        self._dirty = True


def _job_id(push: m.LaunchJob | m.KillJob) -> int:
    return push.job.job_id if isinstance(push, m.LaunchJob) else push.job_id
