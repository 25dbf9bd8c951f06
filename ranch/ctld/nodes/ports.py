"""What the node side's components are given, as narrow protocols (ten members at most): of the
node registry (ctld/nodes/registry.py) and of the job side (the seam of issue 42, JobsForNodes).

A component names one of these, never the class that provides it, so that nothing in nodes/ can
reach for more than it was handed; the composition root (ctld/compose/) hands them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # leaves: none of them imports a component or an owner
    from ranch.conf.model import ClusterConfig
    from ranch.ctld.nodes.node import NodeRecord
    from ranch.protocol import messages as m


class JobsForNodes(Protocol):
    """What the node side calls on the job side (ctld/compose/ wires it): work to do when a
    node takes up work, is lost, talks, or the config changes."""

    def kick(self) -> None: ...  # something happened that may let a job start
    def node_lost(self, node: NodeRecord, requeue: bool, wait: bool = False) -> None: ...
    def heartbeat(self, node: NodeRecord, msg: m.Heartbeat) -> tuple[tuple[int, ...],
                                                                     tuple[Any, ...]]: ...
    def registered(self, node: NodeRecord, msg: m.Register) -> tuple[tuple[int, ...],
                                                                     tuple[Any, ...]]: ...
    def started(self, node: NodeRecord, msg: m.JobStarted) -> Any: ...
    def jobs_holding(self, names: Sequence[str]) -> list[tuple[int, list[str]]]: ...
    def jobs_running_until(self) -> dict[str, float]: ...
    def config_changed(self, config: ClusterConfig) -> None: ...


class NodeBook(Protocol):
    """The node registry as a component sees it: the config in force and every node to read;
    a node's state changes only through the table (apply_event)."""

    @property
    def config(self) -> ClusterConfig: ...
    @property
    def nodes(self) -> Mapping[str, NodeRecord]: ...

    def apply_event(self, node: NodeRecord, event: Any) -> tuple[bool, str | None]: ...
    def mark_changed(self, node: NodeRecord) -> None: ...


class Members(NodeBook, Protocol):
    """What membership (ctld/nodes/membership.py) changes of the registry: the nodes it holds
    and the partitions' live node lists."""

    def add_node(self, node: NodeRecord) -> None: ...
    def drop_node(self, name: str) -> None: ...
    def join_partitions(self, node: NodeRecord) -> None: ...
    def leave_partitions(self, node: NodeRecord) -> None: ...


class Shown(Protocol):
    """What the views (ctld/nodes/snapshot.py) read of the registry."""

    @property
    def config(self) -> ClusterConfig: ...
    @property
    def nodes(self) -> Mapping[str, NodeRecord]: ...
    @property
    def partition_records(self) -> tuple[dict[str, Any], ...]: ...


class Greeting(NodeBook, Protocol):
    """What node traffic (ctld/nodes/nodetraffic.py) reads of the registry besides the nodes:
    what a registering node is told."""

    @property
    def settings(self) -> m.NodeSettings: ...
    @property
    def node_files(self) -> tuple[m.ConfigFile, ...]: ...


class Guard(Protocol):
    """A breaker over mass DOWN or DRAIN (ctld/nodes/downguard.py, guards.py), as `rcontrol`
    drives it."""

    def status(self) -> dict[str, Any]: ...
    def confirm(self, names: list[str], user: str) -> tuple[list[str], list[str]]: ...
    def reset(self, user: str) -> list[str]: ...


__all__ = ["Greeting", "Guard", "JobsForNodes", "Members", "NodeBook", "Shown"]
