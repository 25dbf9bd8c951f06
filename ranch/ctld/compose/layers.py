"""What the layers above the owners are handed of a controller: the rpc server's ports
(ctld/rpc/rpcports.py) and the HTTP layer's node view (ctld/web/webports.py WebNodes), each built
from the owners that do the work; nothing here holds state of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ranch.conf.model import ClusterConfig
from ranch.ctld.compose.controller import Controller
from ranch.ctld.nodes.node import NodeRecord
from ranch.ctld.rpc.rpcports import NodeAdmin, Reads
from ranch.ctld.rpc.server import Server
from ranch.protocol import messages as m
from ranch.statemachine.policy import Policy


def node_admin(c: Controller) -> NodeAdmin:
    """rcontrol's changes on nodes (rpc and the web page's writes alike)."""
    return NodeAdmin(update_nodes=c.update_nodes, reboot_nodes=c.reboots.request,
                     reservation=c.reservation, node_membership=c.membership.handle,
                     guard_request=c.guards.handle)


def rpc_server(c: Controller, key: bytes, **options: Any) -> Server:
    """The rpc server over `c`'s owners; `options`: Server's own (reconfigure, submit, sync,
    state_dir, caps, mirror, takeover, spawn, limits)."""
    registry = c.registry
    return Server(key, config=lambda: registry.config, nodes=registry.nodes, traffic=c.traffic,
                  admin=node_admin(c),
                  reads=Reads(snapshot_body=c.views.body, config_in_force=c.config_in_force,
                              ping=c.ping, diag=c.jobs.sched_stats.record),
                  jobs=c.jobs, eventlog=c.eventlog, liveness=c.liveness, changes=c.changes,
                  acctmgr=c.accounts.request, shares=c.accounts.shares_reply, **options)


@attrs.frozen
class NodesShown:
    """The nodes as the HTTP layer reads them (ctld/web/webports.py WebNodes)."""

    nodes: Mapping[str, NodeRecord]  # the metrics' per-node lines
    snapshot: Callable[..., m.Snapshot]  # (metrics=False)
    # (changes a snapshot shows, heartbeat-only changes): the page's feed is rebuilt on these
    generation: Callable[[], tuple[int, int]]
    wall: Callable[[], float]  # the controller's wall clock (heartbeat ages)
    # reconfigure replaces both: asked each time
    config_in_force: Callable[[], ClusterConfig]
    policy_in_force: Callable[[], Policy]

    @property
    def config(self) -> ClusterConfig:
        return self.config_in_force()

    @property
    def policy(self) -> Policy:
        """The node table's settings, for the page's dry runs."""
        return self.policy_in_force()


def nodes_shown(c: Controller) -> NodesShown:
    registry = c.registry
    changes = c.changes
    return NodesShown(nodes=registry.nodes, snapshot=c.views.snapshot,
                      generation=lambda: (changes.gen, changes.soft_gen), wall=registry.wall,
                      config_in_force=lambda: registry.config,
                      policy_in_force=lambda: registry.policy)
