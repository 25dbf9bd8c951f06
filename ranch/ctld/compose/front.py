"""What the rpc server, the HTTP layer and the durability side are handed of a controller
(ctld/rpc/rpcports.py Services, ctld/web/webports.py WebServices, the durability's and saver's
journal_records and save_doc): the owners' doors, named as those layers read them. Built from
the Controller; nothing here holds state of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ranch.conf.model import ClusterConfig
from ranch.ctld.compose.controller import Controller
from ranch.ctld.jobs.store import Jobs
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.nodes.guards import DrainGuard
from ranch.ctld.nodes.liveness import Liveness
from ranch.ctld.nodes.node import NodeRecord
from ranch.ctld.nodes.registry import NodeRegistry
from ranch.ctld.nodes.reservations import Reservations
from ranch.ctld.site import Site
from ranch.ctld.state.changelog import ChangeLog
from ranch.statemachine.policy import Policy


@attrs.frozen
class Front:
    """A controller's requests, views and state, for the layers above it."""

    registry: NodeRegistry = attrs.field(repr=False)
    nodes: dict[str, NodeRecord]
    eventlog: EventLog
    liveness: Liveness
    drain_guard: DrainGuard
    reservations: Reservations
    jobs: Jobs
    changes: ChangeLog
    site: Site
    # node traffic (ctld/nodes/nodetraffic.py)
    register: Callable[..., Any]
    heartbeat: Callable[..., Any]
    job_started: Callable[..., Any]
    shutdown_notice: Callable[..., Any]
    disconnected: Callable[..., None]
    # views and admin requests
    snapshot: Callable[..., Any]
    snapshot_body: Callable[..., bytes]
    update_nodes: Callable[..., Any]
    reboot_nodes: Callable[..., Any]
    reservation: Callable[..., Any]
    node_membership: Callable[..., Any]
    guard_request: Callable[..., Any]
    config_in_force: Callable[..., Any]
    ping: Callable[..., Any]
    # the durability side: each owner's records and state-file part
    journal_records: Callable[..., list[dict[str, Any]]]
    save_doc: Callable[[], dict[str, Any]]

    @property
    def config(self) -> ClusterConfig:
        """The config in force (the registry's: reconfigure replaces it)."""
        return self.registry.config

    @property
    def policy(self) -> Policy:
        """The node table's settings, for the page's dry runs."""
        return self.registry.policy


def front(c: Controller) -> Front:
    t = c.traffic
    return Front(
        registry=c.registry, nodes=c.registry.nodes, eventlog=c.eventlog, liveness=c.liveness,
        drain_guard=c.drain_guard, reservations=c.reservations, jobs=c.jobs, changes=c.changes,
        site=c.site, register=t.register, heartbeat=t.heartbeat, job_started=t.job_started,
        shutdown_notice=t.shutdown_notice, disconnected=t.disconnected,
        snapshot=c.views.snapshot, snapshot_body=c.views.body, update_nodes=c.update_nodes,
        reboot_nodes=c.reboots.request, reservation=c.reservation,
        node_membership=c.membership.handle, guard_request=c.guards.handle,
        config_in_force=c.config_in_force, ping=c.ping, journal_records=c.journal_records,
        save_doc=c.save_doc)
