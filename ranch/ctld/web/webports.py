"""What the HTTP layer (ctld/web/) reaches of the controller, as protocols: read views, the
guards' and stalls' status for the metrics, and the one admin update it serves. mypy checks that
Cluster provides them; the web code names these, never Cluster."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # none of these imports the web layer
    from ranch.conf.model import ClusterConfig
    from ranch.ctld.jobs.jobrecord import Job
    from ranch.ctld.nodes.eventlog import Follower
    from ranch.ctld.nodes.node import NodeRecord
    from ranch.ctld.ports import HealthBreaker, Watch
    from ranch.ctld.rpc.rpcports import AcctQuery, JobCommanding, JobLists, Submitting
    from ranch.ctld.site import Site
    from ranch.protocol import messages as m
    from ranch.statemachine.policy import Policy


class WebJobStore(Protocol):
    """The job store (ctld/jobs/store.py JobStore), as the page reads it."""

    @property
    def gen(self) -> int: ...  # bumped by every change a listing shows
    # The page's job view (ctld/web/pages.py): a job's record for its script and the job
    # table's dry run.
    @property
    def jobs(self) -> Mapping[int, Job]: ...


class WebJobs(Protocol):
    """The job side (ctld/compose/jobs.py JobSide), as listings read it and slurmrestd's paths
    submit and cancel through it."""

    @property
    def store(self) -> WebJobStore: ...
    @property
    def listing(self) -> JobLists: ...
    # rbatch's handler, for slurmrestd's job/submit (restd.py)
    @property
    def submission(self) -> Submitting: ...
    # the commands rcancel and rcontrol hold|release|requeue go through (cancel is slurmrestd's
    # DELETE job's too)
    @property
    def commands(self) -> JobCommanding: ...
    # The page's History tab: racct's query (ctld/jobs/acct.py), the AcctList body.
    @property
    def accounting(self) -> AcctQuery: ...


class ReservationBook(Protocol):
    """Maintenance windows (ctld/nodes/reservations.py), as the metrics read them."""

    def handle(self, msg: m.ReservationRequest) -> m.ReservationReply: ...


class WebDurability(Protocol):
    """ctld/state/durability.py Durability, handed over by the daemon: a write's reply leaves
    once what it confirms is on disk, as rbatch's, rcancel's and rcontrol's do."""

    async def submit(self, msg: m.SubmitJob) -> m.SubmitReply | m.Error: ...
    async def durable(self) -> None: ...  # OSError: not written (the changes stay queued)


class WebEvents(Protocol):
    """The event log (ctld/nodes/eventlog.py EventLog): `rcontrol events` and its followers,
    which the page's timeline and live stream read."""

    @property
    def seq(self) -> int: ...  # the newest event's number: the page's version
    @property
    def followers(self) -> set[Follower]: ...  # the page's stream joins as one (web/live.py Hub)

    def query(self, since: float = 0.0, nodes: Iterable[str] | None = None,
              limit: int = 0) -> list[dict]: ...


class WebServices(Protocol):
    """The controller (ctld/nodes/cluster.py Cluster), as the HTTP layer sees it."""

    @property
    def config(self) -> ClusterConfig: ...
    @property
    def nodes(self) -> Mapping[str, NodeRecord]: ...  # the metrics' per-node lines
    @property
    def liveness(self) -> Watch: ...  # the DOWN guard and the controller's stalls
    @property
    def drain_guard(self) -> HealthBreaker: ...
    @property
    def reservations(self) -> ReservationBook: ...
    @property
    def jobs(self) -> WebJobs: ...

    @property
    def policy(self) -> Policy: ...  # the node table's settings, for the page's dry runs
    @property
    def site(self) -> Site: ...  # where job scripts are kept (state_dir)

    def snapshot(self, metrics: bool = False) -> m.Snapshot: ...
    def update_nodes(self, msg: m.UpdateNodes) -> m.UpdateResult: ...

    # The page's timeline, live stream and admin actions: rcontrol events, reboot and
    # create|delete reservation go through these, as their RPC routes do.
    @property
    def eventlog(self) -> WebEvents: ...
    def reboot_nodes(self, msg: m.RebootNodes) -> m.UpdateResult: ...
    def reservation(self, msg: m.ReservationRequest) -> m.ReservationReply: ...
