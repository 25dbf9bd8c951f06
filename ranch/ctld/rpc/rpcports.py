"""What the rpc layer's routes and steps reach of the controller behind them, as narrow ports.

Each route group (ctld/rpc/routes.py) is given only its own: node traffic (`Traffic`), admin on
nodes (`NodeAdmin`), reads and listings (`Reads`, `EventFeed`), the job store's services
(`JobServices`); the server (ctld/rpc/server.py) takes them as separate arguments, built in the
composition root (ctld/compose/rpcside.py) from the owners; mypy checks each owner against its port.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:  # none of these imports the rpc layer
    from ranch.ctld.nodes.eventlog import Follower
    from ranch.ctld.nodes.node import Pusher
    from ranch.ctld.nodes.stalls import StallWatch
    from ranch.ctld.rights import Identity
    from ranch.protocol import messages as m


class Traffic(Protocol):
    """What node daemons send (ctld/nodes/nodetraffic.py NodeTraffic), and a node's connection
    ending."""

    def register(self, msg: m.Register, conn: Pusher | None = None,
                 version: int = ...) -> m.RegisterReply: ...
    def heartbeat(self, msg: m.Heartbeat, conn: Pusher | None = None) -> Any: ...
    def job_started(self, msg: m.JobStarted, conn: Pusher | None = None) -> Any: ...
    def shutdown_notice(self, msg: m.ShutdownNotice, conn: Pusher | None = None) -> Any: ...
    def disconnected(self, conn: Pusher) -> None: ...


@attrs.frozen
class NodeAdmin:
    """The admin requests on nodes (rcontrol update|reboot|reservation|approve|guards), each the
    door of the owner that does the work."""

    update_nodes: Callable[[m.UpdateNodes], m.UpdateResult]
    reboot_nodes: Callable[[m.RebootNodes], m.UpdateResult]
    reservation: Callable[[m.ReservationRequest], m.ReservationReply]
    node_membership: Callable[[m.NodeMembership], m.UpdateResult]
    guard_request: Callable[[m.GuardRequest], m.GuardStatus]


@attrs.frozen
class Reads:
    """What the read-only requests answer from: rinfo's snapshot, the config, ping, rdiag."""

    snapshot_body: Callable[..., bytes]  # (metrics=False, fields=()) -> the Snapshot's body
    config_in_force: Callable[[], m.ConfigDump]
    ping: Callable[[], m.Pong]
    diag: Callable[[], dict[str, Any]]  # the schedulers' statistics (ctld/jobs/schedstats.py)


class EventFeed(Protocol):
    """The event log (ctld/nodes/eventlog.py): rcontrol events, and what node identity records."""

    @property
    def followers(self) -> set[Follower]: ...

    def add(self, kind: str, node: str, *, keep: bool = True, **fields: Any) -> dict[str, Any]: ...
    def query(self, since: float = 0.0, nodes: Iterable[str] | None = None,
              limit: int = 0) -> list[dict]: ...
    def subscribe(self, nodes: Iterable[str] | None = None) -> Follower: ...
    def unsubscribe(self, follower: Follower) -> None: ...


class Submitting(Protocol):
    """Submission (ctld/jobs/jobsubmit.py JobSubmission)."""

    def submit(self, req: m.SubmitJob) -> m.SubmitReply | m.Error: ...


class JobCommanding(Protocol):
    """rcancel's and rcontrol's job commands (ctld/jobs/jobcommands.py JobCommands)."""

    def cancel(self, msg: m.CancelJobs, actor: Identity | None = None) -> m.JobResult: ...
    def control(self, msg: m.JobControl, actor: Identity | None = None) -> m.JobResult: ...


class JobLists(Protocol):
    """The job listings (ctld/jobs/joblisting.py JobListing)."""

    def list_body(self, ids: Sequence[int] = ()) -> bytes: ...
    def list_fields(self, fields: tuple[str, ...]) -> bytes: ...


class AcctQuery(Protocol):
    """racct's query (ctld/jobs/acct.py Accounting)."""

    async def query(self, q: m.GetAcct) -> bytes: ...


class PriorityFactors(Protocol):
    """rsprio's rows (ctld/jobs/priorities.py Priorities)."""

    def reply(self, req: m.PriorityRequest, actor: Any = None) -> m.PriorityReply: ...


class TestOnly(Protocol):
    """sbatch --test-only (ctld/jobs/willrun.py WillRun)."""

    def answer(self, req: m.SubmitJob) -> m.SubmitReply | m.Error: ...


class WhyAnswers(Protocol):
    """rqueue --why (ctld/jobs/why.py WhyDesk)."""

    async def answer(self, msg: m.GetWhy) -> m.WhyReply | m.Error: ...


class DryRunAnswers(Protocol):
    """rcontrol reconfigure --dry-run (ctld/jobs/dryrun.py DryRuns)."""

    async def answer(self, msg: m.ReconfigureDryRun) -> m.ReconfigureDryRunReply: ...


class StepRequests(Protocol):
    """rrun's steps (ctld/jobs/steps.py JobSteps)."""

    def request(self, msg: m.StepRequest, actor: Identity) -> m.StepGranted | m.Error: ...
    def node_ended(self, node: str | None, msg: m.StepEnd) -> m.Ack | m.Error: ...


class JobServices(Protocol):
    """What a request may ask of the job side (ctld/compose/jobs.py JobSide): the component
    that does the work, each."""

    @property
    def submission(self) -> Submitting: ...
    @property
    def commands(self) -> JobCommanding: ...
    @property
    def listing(self) -> JobLists: ...
    @property
    def accounting(self) -> AcctQuery: ...
    @property
    def will_run(self) -> TestOnly: ...
    @property
    def priorities(self) -> PriorityFactors: ...
    @property
    def steps(self) -> StepRequests: ...
    @property
    def why(self) -> WhyAnswers: ...
    @property
    def dry_runs(self) -> DryRunAnswers: ...


class Watching(Protocol):
    """Failure detection (ctld/nodes/liveness.py), as the connection layer tells it what it saw."""

    @property
    def stalls(self) -> StallWatch: ...  # the controller's own stalls: a late frame's excuse

    def refused_for_capacity(self, name: str) -> bool: ...


class ChangeCounts(Protocol):
    """The change log (ctld/state/changelog.py), as a request's dispatch reads it: whether the
    handler changed something a reply would confirm (such a reply waits for the write)."""

    def counts(self) -> tuple[int, int]: ...
