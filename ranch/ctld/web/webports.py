"""What the HTTP layer (ctld/web/) reaches of the controller: one narrow port per side it reads
or drives (nodes, jobs, events, admin actions, reservations, guards), handed over separately by
the composition root (ctld/daemon.py web_ports); the web code names these, never an owner."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:  # none of these imports the web layer
    from ranch.conf.model import ClusterConfig
    from ranch.ctld.jobs.jobrecord import Job
    from ranch.ctld.nodes.eventlog import Follower
    from ranch.ctld.nodes.node import NodeRecord
    from ranch.protocol import messages as m
    from ranch.statemachine.policy import Policy


class Configured(Protocol):
    """The configuration in force (replaced by `rcontrol reconfigure`: read it each time)."""

    @property
    def config(self) -> ClusterConfig: ...


class WebNodes(Configured, Protocol):
    """The node registry (ctld/nodes/registry.py, through ctld/compose/front.py), as the
    listings, the metrics and the page's node panel read it."""

    @property
    def nodes(self) -> Mapping[str, NodeRecord]: ...  # the metrics' per-node lines
    @property
    def policy(self) -> Policy: ...  # the node table's settings, for the page's dry runs

    def snapshot(self, metrics: bool = False) -> m.Snapshot: ...
    # (changes a snapshot shows, heartbeat-only changes so far): the page's feed version
    def generation(self) -> tuple[int, int]: ...
    def wall(self) -> float: ...  # the controller's wall clock (heartbeat ages)


class JobsRead(Protocol):
    """The job store (ctld/jobs/store.py JobStore), as the page and the live stream read it."""

    @property
    def gen(self) -> int: ...  # bumped by every change a listing shows
    @property
    def jobs(self) -> Mapping[int, Job]: ...  # a job's record: its script, the table's dry run


@attrs.frozen
class WebJobs:
    """The job side as listings read it and slurmrestd's paths and the page drive it: the store
    to read, and the doors of the components that do the work (built in ctld/daemon.py)."""

    store: JobsRead
    list_body: Callable[..., bytes]  # the JobList body rqueue reads (ctld/jobs/joblisting.py)
    encoded: Callable[[Job], bytes]  # one job's record in it, kept until the job changes
    # rbatch's handler, for slurmrestd's job/submit (restd.py)
    submit: Callable[[m.SubmitJob], m.SubmitReply | m.Error]
    # rcancel's and rcontrol hold|release|requeue's (cancel is slurmrestd's DELETE job's too)
    cancel: Callable[..., m.JobResult]
    control: Callable[..., m.JobResult]
    acct_query: Callable[[m.GetAcct], Awaitable[bytes]]  # the History tab: racct's query
    sched_stats: Callable[[], dict[str, Any]]  # sdiag's figures (ctld/jobs/schedstats.py)
    # rqueue --why's answer (ctld/jobs/why.py): the job page's Why block, /api/v1/jobs/{id}/why
    why: Callable[[m.GetWhy], Awaitable[m.WhyReply | m.Error]] | None = None
    usage: WebUsage | None = None  # the Usage tab's accounting reads (None: tests, no tab)


@attrs.frozen
class WebUsage:
    """The accounting owner (ctld/accounts/store.py Accounts), as the Usage tab reads it."""

    shares: Callable[[str], m.ShareReply]  # rshare's rows, cut for a viewer ("": all)
    # (wall time, ((account, user, raw usage), ...)) per calc period, oldest first
    samples: Callable[[], Iterable[tuple[float, tuple[tuple[str, str, float], ...]]]]
    sees_all: Callable[[str], bool]  # AdminLevel Operator or above sees every association


class WebEvents(Protocol):
    """The event log (ctld/nodes/eventlog.py EventLog): `rcontrol events` and its followers,
    which the page's timeline and live stream read."""

    @property
    def seq(self) -> int: ...  # the newest event's number: the page's version

    def query(self, since: float = 0.0, nodes: Iterable[str] | None = None,
              limit: int = 0) -> list[dict]: ...
    # the page's stream joins as one follower (web/live.py Hub) and leaves when no page is open
    def follow(self, follower: Follower) -> None: ...
    def unsubscribe(self, follower: Follower) -> None: ...


class WebAdmin(Protocol):
    """The admin requests the HTTP layer serves, through the handlers their RPC routes use:
    `rcontrol update` (the nodes' state), `rcontrol reboot`, `rcontrol create|delete
    reservation`."""

    def update_nodes(self, msg: m.UpdateNodes) -> m.UpdateResult: ...
    def reboot_nodes(self, msg: m.RebootNodes) -> m.UpdateResult: ...
    def reservation(self, msg: m.ReservationRequest) -> m.ReservationReply: ...


class ReservationBook(Protocol):
    """Maintenance windows (ctld/nodes/reservations.py), as the listings and metrics read
    them (`show` only)."""

    def handle(self, msg: m.ReservationRequest) -> m.ReservationReply: ...


class Status(Protocol):
    """A guard or the stall watch (ctld/nodes/guards.py, ctld/nodes/stalls.py): its figures."""

    def status(self) -> dict[str, Any]: ...


@attrs.frozen
class Health:
    """What /metrics reports of the controller's own protections."""

    guards: tuple[Status, ...]  # DownGuard, DrainGuard: one ranch_guard_* line set each
    stalls: Status  # the controller's stalls and clock jumps


class WebDurability(Protocol):
    """ctld/state/durability.py Durability, handed over by the daemon: a write's reply leaves
    once what it confirms is on disk, as rbatch's, rcancel's and rcontrol's do."""

    async def submit(self, msg: m.SubmitJob) -> m.SubmitReply | m.Error: ...
    async def durable(self) -> None: ...  # OSError: not written (the changes stay queued)
