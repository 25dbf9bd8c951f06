"""What the job side's components are given, as narrow protocols: of the node side, and of the job
store (ctld/jobs/store.py), each a few members; the composition root (ctld/compose/jobs.py) hands
them out. Nothing here names a class of ctld/nodes/: jobs/ and nodes/ never import each other."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ranch.assoc.submitlimits import Groups
from ranch.assoc.tally import Ask

if TYPE_CHECKING:  # leaves: none of them imports a component
    from collections import Counter

    from ranch.conf.model import NodeConfig
    from ranch.ctld.jobs.jobrecord import Job
    from ranch.sched.model import NodeUse, Share
    from ranch.statemachine import jobevents as je
    from ranch.statemachine.model import NodeState


class NodeView(Protocol):
    """What the job side reads of a node's record (ctld/nodes/node.py NodeRecord)."""

    @property
    def name(self) -> str: ...
    @property
    def cfg(self) -> NodeConfig: ...
    @property
    def state(self) -> NodeState: ...
    @property
    def conn(self) -> object | None: ...  # connected: a launch can reach it
    @property
    def protocol(self) -> int: ...  # the protocol version it registered with


class NodesForJobs(Protocol):
    """What the job side reaches of the node side: the nodes to read, allocations and orders to
    them, a drain (a node that cannot launch), and the reservations' windows."""

    @property
    def nodes(self) -> Mapping[str, NodeView]: ...
    @property
    def members_gen(self) -> int: ...  # bumped when a partition's node list may have changed

    def partition_nodes(self, name: str) -> list[str] | None: ...
    def set_use(self, name: str, cpus: int, mem: int, gpus: tuple[int, ...],
                completing: bool) -> None: ...
    def push(self, name: str, msg: Any) -> bool: ...
    # `node` is a record of `nodes`; typed loosely: the node side's own record type is its own
    def apply_event(self, node: Any, event: Any) -> tuple[bool, str | None]: ...
    def blocked(self, limit_s: float | None, now: float) -> frozenset[str]: ...


class JobReader(Protocol):
    """The jobs and what each node holds, read (listings, accounting, mail, placement filters)."""

    @property
    def jobs(self) -> Mapping[int, Job]: ...
    @property
    def uses(self) -> Mapping[str, NodeUse]: ...


class JobDoor(JobReader, Protocol):
    """The one door for a job's state, and what follows a change: the components that change
    jobs (commands, reports from nodes, steps, the allocation watches, limits)."""

    def apply(self, job: Job, event: je.Event) -> str | None: ...
    def touch(self, job: Job, durable: bool = True) -> None: ...
    def kill(self, job: Job, names: Iterable[str], signal: int = 0, why: str = "",
             run: int | None = None) -> None: ...
    def kick(self) -> None: ...
    def tidy(self) -> None: ...  # the pending list rebuilt if a job left it
    def reprioritize(self, job: Job, recompute: bool = True) -> None: ...  # and its place
    def sync_node(self, name: str) -> None: ...


class Reorder(JobDoor, Protocol):
    """rcontrol update (ctld/jobs/jobupdate.py): a pending job's place in the queue."""

    def repartition(self, job: Job, partition: str) -> None: ...


class Queue(Protocol):
    """The scheduling pass (ctld/jobs/jobstart.py): the pending queue, and a placement held."""

    @property
    def jobs(self) -> Mapping[int, Job]: ...
    @property
    def uses(self) -> dict[str, NodeUse]: ...  # read (placement's first fit)
    @property
    def pending(self) -> Sequence[Job]: ...  # by (-priority, id)
    @property
    def pending_parts(self) -> Counter[str]: ...  # pending jobs per partition

    def take_kick(self) -> bool: ...
    def tidy(self) -> None: ...
    def apply(self, job: Job, event: je.Event) -> str | None: ...
    def touch(self, job: Job, durable: bool = True) -> None: ...
    def hold(self, job: Job, shares: Mapping[str, Share]) -> None: ...
    def release(self, job: Job, name: str) -> None: ...


class Launches(Protocol):
    """Launches (ctld/jobs/launches.py), as the reports from nodes are laid against them."""

    def launch(self, job: Job, names: tuple[str, ...]) -> None: ...
    def heard(self, name: str, runs: Iterable[tuple[int, int]]) -> None: ...
    def never_delivered(self, name: str, job: Job) -> bool: ...
    def forget_unheard(self, name: str, keep: Iterable[tuple[int, int]]) -> None: ...


# AccountingStorageEnforce at submission, built by the composition root over the accounting
# tree: (user, -A, partitions, -q, --reservation, job count, what each job asks, the jobs
# not ended by (user, account, partition, QOS)) -> the (account, QOS, time limit its limits
# give it or None) the job keeps, a refusal in sbatch's words (its lines), or None: off
Admit = Callable[[str, str, tuple[str, ...], str, str, int, Ask,
                  Callable[[], Groups]],
                 "tuple[str, str, int | None] | str | None"]


class Intake(Protocol):
    """Submission (ctld/jobs/jobsubmit.py): ids, and jobs in and out of the store."""

    @property
    def jobs(self) -> Mapping[int, Job]: ...
    @property
    def building(self) -> int: ...  # jobs built whose journal write is under way
    @property
    def pending_parts(self) -> Counter[str]: ...

    def new_ids(self, count: int) -> int: ...
    def insert(self, job: Job) -> None: ...
    def drop(self, jobs: Sequence[Job]) -> None: ...
    def kick(self) -> None: ...
    def touch(self, job: Job, durable: bool = True) -> None: ...


@attrs.frozen
class StoreEvents:
    """What follows in other components from a change the job store makes (its job table's
    effects and the states a job enters), given to the store as callables at construction."""

    launch: Callable[[Job, tuple[str, ...]], None]  # the table's Launch: LaunchJob to nodes
    began: Callable[[Job], None]  # the job entered RUNNING
    requeued: Callable[[Job], None]  # back to PENDING: a new run from scratch
    ending: Callable[[Job], None]  # it reached a final state: its watches and steps end
    ended: Callable[[Job], None]  # ... and is logged: its mail and its history record
    reopening: Callable[[Job], None]  # a finished job about to be requeued, still as it ended
    rearm: Callable[[Job], None]  # its deadlines again (a restart, a reconfigure)
    restored: Callable[[], None]  # every saved job is back
    held: Callable[[Job], bool]  # the job may not be purged yet (its history unwritten)


__all__ = ["Intake", "JobDoor", "JobReader", "Launches", "NodeView", "NodesForJobs", "Queue",
           "Reorder", "StoreEvents"]
