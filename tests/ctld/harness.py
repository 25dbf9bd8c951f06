"""The controller as in-process tests drive it: `assemble` builds the owners, and the old single
object's names (a tests' convenience, never the daemon's way) forward to the owner that does the
work, so that the tests written against that object keep every assertion."""

from __future__ import annotations

from typing import Any

from ranch.conf.model import ClusterConfig
from ranch.ctld.compose import Controller, assemble
from ranch.ctld.compose.front import Front, front
from ranch.ctld.nodes import nodeupdates, savedstate


class Harness:
    """One assembled controller; `c.<old name>` reaches the owner that holds it now."""

    def __init__(self, config: ClusterConfig, **kw: Any) -> None:
        self.controller: Controller = assemble(config, **kw)
        self.front: Front = front(self.controller)
        self.registry = self.controller.registry

    def __getattr__(self, name: str) -> Any:
        # the rpc/web face first (requests, views), then the owners and coordinators, then
        # the registry's own fields (nodes, config, settings, policy, members_gen ...)
        for owner in (self.front, self.controller, self.registry):
            if hasattr(owner, name):
                return getattr(owner, name)
        raise AttributeError(name)

    # names that moved to an owner under another name
    def power_save_pass(self) -> list[str]:
        return self.controller.power_pass.run()

    def flush_programs(self) -> None:
        self.controller.after_change()

    def expand(self, expr: str) -> tuple[list[str], list[str]]:
        return nodeupdates.expand(self.registry.nodes, expr)

    def jobs_holding(self, names: Any) -> list[tuple[int, list[str]]]:
        return self.controller.jobs.jobs_holding(names)

    def take_unsynced(self) -> list[dict[str, Any]]:
        """The journal records of every change not yet handed to a write."""
        return self.controller.journal_records(self.controller.changes.take())

    def node_entry(self, node: Any) -> Any:
        return savedstate.node_entry(node)
