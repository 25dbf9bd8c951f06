"""Today's job store (ctld/jobs/store.py Jobs) fitted to the seam of issue 42: what the store is
given of the node side (`NodeSideForJobs`, the shape it was written against) and what the node
side and the composition root call of it (`JobParts`). The job side's own builder replaces this
module (ctld/compose/__init__.py `_job_side`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs

from ranch.ctld.deadlines import Deadlines
from ranch.ctld.jobs.history import FileHistory
from ranch.ctld.jobs.store import Jobs
from ranch.ctld.nodes.node import NodeRecord
from ranch.ctld.nodes.registry import NodeRegistry
from ranch.ctld.site import Site
from ranch.ctld.state.changelog import Taken
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from ranch.conf.model import ClusterConfig
    from ranch.ctld.ports import Windows


@attrs.frozen
class JobCalls:
    """What the node side calls on the job side (nodes/ports.py JobsForNodes), as callables."""

    kick: Callable[[], None]
    node_lost: Callable[..., None]
    heartbeat: Callable[..., tuple[tuple[int, ...], tuple[Any, ...]]]
    registered: Callable[..., tuple[tuple[int, ...], tuple[Any, ...]]]
    started: Callable[..., Any]
    jobs_holding: Callable[..., list[tuple[int, list[str]]]]
    jobs_running_until: Callable[[], dict[str, float]]
    config_changed: Callable[..., None]


@attrs.frozen
class JobParts:
    """What the composition root needs of the job side."""

    store: Jobs  # what the rpc and web layers and the daemon reach as `jobs`
    for_nodes: JobCalls
    run_pass: Callable[[], None]  # the scheduling pass, when one is due
    on_deadline: Callable[[Any, str], bool]  # a job's deadline came: True when it was one
    restore: Callable[[dict[str, Any] | None], None]
    save_doc: Callable[[], dict[str, Any]]
    journal_records: Callable[[Taken], list[dict[str, Any]]]
    job_partition: Callable[[int], str]  # the resume file's jobs (ctld/nodes/powersave.py)


class NodeSideForJobs:
    """The node side as today's job store reads it (ctld/ports.py NodeSide): plain values, the
    registry's doors, and the config and membership generation of now."""

    def __init__(self, registry: NodeRegistry, *, deadlines: Deadlines, site: Site, epoch: int,
                 spawn: Callable[..., None] | None, reservations: Windows,
                 after_change: Callable[[], None]) -> None:
        self._registry = registry
        self.nodes = registry.nodes
        self.changes = registry.changes
        self.clock = registry.clock
        self.wall = registry.wall
        self.deadlines = deadlines
        self.site = site
        self.epoch = epoch
        self.spawn = spawn
        self.reservations = reservations
        self.apply_event = registry.apply_event
        self.push = registry.push
        self.set_use = registry.set_use
        self.partition_nodes = registry.partition_nodes
        self.flush_programs = after_change

    @property
    def config(self) -> ClusterConfig:
        return self._registry.config

    @property
    def members_gen(self) -> int:
        return self._registry.members_gen


def running_until(store: Jobs) -> dict[str, float]:
    """Node -> when the last job on it may run until (its start + time limit; inf with no
    limit), for a reservation that must not cut a job short."""
    out: dict[str, float] = {}
    for job in store.jobs.values():
        if job.start_time is None or not job.nodes or job.state not in (
                "RUNNING", "CONFIGURING", "SUSPENDED", "COMPLETING"):
            continue
        end = float("inf") if job.time_limit is None else job.start_time + job.time_limit * 60
        for n in job.nodes:
            out[n] = max(out.get(n, float("-inf")), end)
    return out


def _heartbeat(store: Jobs, node: NodeRecord,
               msg: m.Heartbeat) -> tuple[tuple[int, ...], tuple[Any, ...]]:
    """The hot path: a beat that names no job, of a node that holds none, asks nothing."""
    if msg.job_ids or msg.jobs_ended or node.name in store.uses:
        return store.heartbeat(node, msg)
    return (), ()


def on_deadline(store: Jobs, name: Any, kind: str) -> bool:
    """A job's deadline came (ctld/jobs/store.py BEGIN_KEY, inactive.py, jobupdate.py)."""
    if kind == "begin":  # a pending job's BeginTime came
        store.kick()
    elif kind == "inactive":  # an allocation's command went silent
        store.inactive.fired(name)
    elif kind == "orphan":  # rrun's step ended and rrun did not release its allocation
        store.inactive.orphaned(name)
    elif kind == "limit":  # a running job's updated time limit
        store.limits.fired(name)
    else:
        return False
    return True


def journal_records(store: Jobs, taken: Taken) -> list[dict[str, Any]]:
    return [{"job": store.saved_entry(job)} for job in taken.jobs.values()]


def build_today(node_side: NodeSideForJobs, history: FileHistory | None) -> JobParts:
    """Today's job store, given the node side, and the callables made of it."""
    store = Jobs(node_side, history)
    calls = JobCalls(
        kick=store.kick, node_lost=store.node_lost, heartbeat=partial(_heartbeat, store),
        registered=store.registered, started=store.started, jobs_holding=store.jobs_holding,
        jobs_running_until=partial(running_until, store),
        config_changed=lambda _config: store.config_changed())
    return JobParts(
        store=store, for_nodes=calls, run_pass=store.run,
        on_deadline=partial(on_deadline, store), restore=store.restore,
        save_doc=store.save_doc, journal_records=partial(journal_records, store),
        job_partition=lambda jid: store.jobs[jid].partition)
