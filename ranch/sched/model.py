"""The scheduling core's plain data: nodes, what jobs hold on them, requests and decisions."""

from __future__ import annotations

from typing import Protocol

import attrs

from ranch.statemachine.model import Base, Flag, NodeState
from ranch.statemachine.predicates import takes_new_work, takes_work_after_boot

# Node ranks for placement: Slurm fills powered-up nodes first, then booting ones, then powered-
# down ones (which the allocation powers up), each group by Weight then config order.
UP, BOOTING, OFF = 0, 1, 2


class Shape(Protocol):
    """What a node of some configuration has (a NodeConfig or a Node view)."""

    @property
    def cpus(self) -> int: ...
    @property
    def real_memory(self) -> int: ...
    @property
    def gpus(self) -> int: ...


@attrs.frozen
class Node:
    """A node as the scheduler sees it: its configuration and whether it takes work now."""

    name: str
    cpus: int
    real_memory: int
    gpus: int = 0
    features: frozenset[str] = frozenset()
    rank: int | None = UP  # UP/BOOTING/OFF, or None: no new work now
    # any flag at all, or no new work: listed by ReqNodeNotAvail's UnavailableNodes
    unavailable: bool = False


def rank_of(st: NodeState) -> int | None:
    """UP/BOOTING/OFF for a node that may take new work now, None for one that may not."""
    if not takes_work_after_boot(st):
        return None
    if Flag.POWERING_UP in st.flags:
        return BOOTING
    if Flag.POWERED_DOWN in st.flags:
        return OFF if st.base is Base.IDLE else None
    return UP if takes_new_work(st) else None  # NO_RESPOND and the like


def unavailable(st: NodeState) -> bool:
    return bool(st.flags) or not takes_new_work(st)


@attrs.frozen
class Share:
    """What one job holds on one node."""

    cpus: int
    mem: int
    gpus: tuple[int, ...] = ()


@attrs.define
class NodeUse:
    """Everything allocated on one node, summed over its jobs (the job store's running tally;
    the core only reads it)."""

    cpus: int = 0
    mem: int = 0
    gpus: set[int] = attrs.Factory(set)
    jobs: set[int] = attrs.Factory(set)

    def add(self, job_id: int, share: Share) -> None:
        self.cpus += share.cpus
        self.mem += share.mem
        self.gpus.update(share.gpus)
        self.jobs.add(job_id)

    def remove(self, job_id: int, share: Share) -> None:
        """Give back what `job_id` held here (nothing if it holds nothing here)."""
        if job_id not in self.jobs:
            return
        self.jobs.discard(job_id)
        self.cpus -= share.cpus
        self.mem -= share.mem
        self.gpus.difference_update(share.gpus)

    def copy(self) -> NodeUse:
        return NodeUse(self.cpus, self.mem, set(self.gpus), set(self.jobs))


def take(uses: dict[str, NodeUse], job_id: int, shares: dict[str, Share]) -> None:
    """Count a started job's shares into `uses`."""
    for name, share in shares.items():
        uses.setdefault(name, NodeUse()).add(job_id, share)


@attrs.frozen
class Need:
    """A job's request per node, resolved against the config."""

    nodes: int
    cpus: int
    mem: int
    gpus: int
    exclusive: bool = False
    # sbatch -n without -N (or -N min-max): the tasks spread over as many nodes as they need,
    # each node taking what its free CPUs hold; `nodes` is then the minimum, `cpus` one task's.
    spread: bool = False
    tasks: int = 1
    cpus_per_task: int = 1
    max_nodes: int = 0  # 0: no upper bound
    # spread with --gpus-per-task: each task's GPUs (`gpus` is then one task's too), so a node
    # takes only as many tasks as its free GPUs hold as well
    gpus_per_task: int = 0


@attrs.frozen
class Holder:
    """Of a job holding a node, what --exclusive=user asks: its user, and whether it asked."""

    uid: int
    user_exclusive: bool = False


@attrs.frozen
class Partition:
    """A partition as the pass sees it; `size` is (node count, CPUs) of its members now."""

    name: str
    up: bool = True
    max_time: int | None = None  # minutes
    size: tuple[int, int] = (0, 0)


@attrs.frozen
class Pending:
    """A pending job's request in one partition, resolved against the config. The FIFO pass
    takes the queue in priority order as given; `priority` is the number that order came from
    (the planner weighs it)."""

    id: int
    partition: str
    need: Need
    priority: int = 0
    time_limit: int | None = None  # minutes
    req_nodes: tuple[str, ...] = ()  # -w, expanded
    exc_nodes: tuple[str, ...] = ()  # -x, expanded
    constraint: str = ""  # -C
    uid: int = 0
    user_exclusive: bool = False  # --exclusive=user
    ntasks: int = 1
    cpus_per_task: int = 1
    num_nodes: int = 1  # -N as asked


@attrs.frozen
class Ending:
    """A running job's bound: it ends by `at` (wall clock, its time limit) and frees its
    shares then."""

    at: float
    job_id: int
    shares: dict[str, Share] = attrs.field(eq=False)


@attrs.frozen
class Start:
    """Start the job now on these nodes, each with its share."""

    job_id: int
    partition: str
    shares: dict[str, Share] = attrs.field(eq=False)


@attrs.frozen
class Wait:
    """The job stays pending, for this reason."""

    job_id: int
    reason: str


Decision = Start | Wait


@attrs.frozen
class Window:
    """A reservation or maintenance window: no job may run on these nodes in [begin, end)
    (wall clock). The backfill planner keeps them out of its map."""

    begin: float
    end: float
    nodes: frozenset[str]


@attrs.frozen
class Planned:
    """The backfill planner's estimate for a job that cannot start now: it should start at
    `start` (wall clock, squeue's StartTime) on `nodes` (SchedNodeList), which are reserved for
    it, whole, from then until its time limit; `reason` is its pending reason now."""

    job_id: int
    partition: str
    start: float
    nodes: tuple[str, ...]
    reason: str


@attrs.frozen
class Unplanned:
    """A pending job the planner gave no estimate (squeue --start shows N/A): `reason` is its
    pending reason ("" where the planner did not look at it: it keeps the one it had), `why`
    says why there is no estimate (beyond bf_window, bf_max_job_test, bf_min_prio_reserve...)."""

    job_id: int
    reason: str
    why: str


Estimate = Start | Planned | Unplanned
