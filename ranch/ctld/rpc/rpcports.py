"""What the rpc layer's steps and routes reach of the server and of one connection, and of the
controller behind them, as protocols.

The routes (ctld/rpc/routes.py), the frame reader (ctld/rpc/reading.py), permissions, user and node
identity and the event stream are parts the server (ctld/rpc/server.py) is built from; they name
these interfaces, never the server's classes, so the server imports them without a cycle. Of the
controller they see only its services (`Services`, `JobServices`: what a request may ask), never
its components' internals; mypy checks that Cluster and Jobs provide them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # none of these imports the rpc layer
    import trio

    from ranch.conf.model import ClusterConfig
    from ranch.ctld.nodes.eventlog import EventLog
    from ranch.ctld.nodes.node import NodeRecord
    from ranch.ctld.nodes.stalls import StallWatch
    from ranch.ctld.rights import Identity
    from ranch.ctld.rpc.admission import Admission
    from ranch.ctld.rpc.capacity import CapacityRefusals
    from ranch.ctld.rpc.fastio import StreamIO
    from ranch.ctld.rpc.idlenodes import IdleNodes
    from ranch.ctld.rpc.nodecredentials import NodeCredentials
    from ranch.ctld.rpc.replaymark import ReplayMark
    from ranch.protocol import messages as m
    from ranch.protocol.framing import ReplayGuard


class Peer(Protocol):
    """One connection (ctld/rpc/connection.py Connection): a node's session or a command's."""

    stream: trio.SocketStream
    io: StreamIO
    peer: str
    ready: bool
    version: int
    node: str | None  # the node that registered on it
    who: Any  # the munge-vouched user (ctld/rpc/userauth.py); None: the cluster key's holder
    key: bytes | None  # that user's session key
    scope: trio.CancelScope | None  # its reader's task runs in it (None while parked)
    closing: bool  # close_soon was called

    async def reply(self, msg: Any, request_id: int, version: int) -> bool: ...
    async def send(self, frame: bytes) -> bool: ...
    def close_soon(self) -> None: ...
    def push(self, msg: Any) -> bool: ...
    def registered_as(self, name: str) -> None: ...


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


class TestOnly(Protocol):
    """sbatch --test-only (ctld/jobs/willrun.py WillRun)."""

    def answer(self, req: m.SubmitJob) -> m.SubmitReply | m.Error: ...


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
    def steps(self) -> StepRequests: ...


class Watching(Protocol):
    """Failure detection (ctld/nodes/liveness.py), as the connection layer tells it what it saw."""

    @property
    def stalls(self) -> StallWatch: ...  # the controller's own stalls: a late frame's excuse

    def refused_for_capacity(self, name: str) -> bool: ...


class ChangeCounts(Protocol):
    """The change log (ctld/state/changelog.py), as a request's dispatch reads it: whether the
    handler changed something a reply would confirm (such a reply waits for the write)."""

    def counts(self) -> tuple[int, int]: ...


class Services(Protocol):
    """What a request may ask of the controller (ctld/nodes/cluster.py Cluster): node traffic,
    admin updates, views, and the job store's services; the config and the event log read."""

    @property
    def config(self) -> ClusterConfig: ...
    @property
    def nodes(self) -> Mapping[str, NodeRecord]: ...  # read: how many, who is connected
    @property
    def eventlog(self) -> EventLog: ...  # rcontrol events (ctld/rpc/eventstream.py)
    @property
    def liveness(self) -> Watching: ...
    @property
    def jobs(self) -> JobServices: ...
    @property
    def changes(self) -> ChangeCounts: ...

    def register(self, msg: m.Register, conn: Peer | None = None,
                 version: int = ...) -> m.RegisterReply: ...
    def heartbeat(self, msg: m.Heartbeat, conn: Peer | None = None) -> Any: ...
    def job_started(self, msg: m.JobStarted, conn: Peer | None = None) -> Any: ...
    def shutdown_notice(self, msg: m.ShutdownNotice, conn: Peer | None = None) -> Any: ...
    def disconnected(self, conn: Peer) -> None: ...
    def snapshot_body(self, metrics: bool = False, fields: tuple[str, ...] = ()) -> bytes: ...
    def update_nodes(self, msg: m.UpdateNodes) -> m.UpdateResult: ...
    def reboot_nodes(self, msg: m.RebootNodes) -> m.UpdateResult: ...
    def reservation(self, msg: m.ReservationRequest) -> m.ReservationReply: ...
    def node_membership(self, msg: m.NodeMembership) -> m.UpdateResult: ...
    def guard_request(self, msg: m.GuardRequest) -> m.GuardStatus: ...
    def config_in_force(self) -> m.ConfigDump: ...
    def ping(self) -> m.Pong: ...


class Rpc(Protocol):
    """The server (ctld/rpc/server.py Server), as its parts see it."""

    @property
    def cluster(self) -> Services: ...
    @property
    def key(self) -> bytes: ...
    @property
    def max_size(self) -> int: ...
    @property
    def unproven_max(self) -> int: ...
    @property
    def message_timeout(self) -> float: ...
    @property
    def admission(self) -> Admission: ...
    @property
    def replay_guard(self) -> ReplayGuard: ...
    @property
    def replay_mark(self) -> ReplayMark: ...
    @property
    def node_credentials(self) -> NodeCredentials: ...
    @property
    def capacity(self) -> CapacityRefusals: ...
    @property
    def sync(self) -> Callable[[], Awaitable[None]] | None: ...
    @property
    def submit(self) -> Callable[[m.SubmitJob], Awaitable[Any]] | None: ...
    @property
    def reconfigure(self) -> Callable[[str], Awaitable[m.ReconfigureResult]]: ...
    @property
    def takeover(self) -> Callable[[str], Any]: ...

    def encode(self, msg: Any, request_id: int, version: int,
               key: bytes | None = None) -> bytes: ...
    async def dispatch(self, conn: Peer, msg: Any) -> tuple[Any, bool]: ...
    def connection_ended(self, conn: Peer) -> bool: ...
    @property
    def idle(self) -> IdleNodes: ...
