"""The controller as in-process tests drive it: `assemble` builds the owners, and the old single
object's names (a tests' convenience, never the daemon's way) forward to the owner that does the
work, so that the tests written against that object keep every assertion."""

from __future__ import annotations

from typing import Any

from ranch.conf.model import ClusterConfig
from ranch.ctld.compose import Controller, assemble
from ranch.ctld.nodes import nodeupdates, savedstate

# the requests' old names, and the owner's door that answers each now
RENAMED = {"snapshot": ("views", "snapshot"), "snapshot_body": ("views", "body"),
           "reboot_nodes": ("reboots", "request"), "node_membership": ("membership", "handle"),
           "guard_request": ("guards", "handle"),
           **{door: ("traffic", door) for door in ("register", "heartbeat", "job_started",
                                                   "shutdown_notice", "disconnected")}}


class Harness:
    """One assembled controller; `c.<old name>` reaches the owner that holds it now."""

    def __init__(self, config: ClusterConfig, **kw: Any) -> None:
        self.controller: Controller = assemble(config, **kw)
        self.registry = self.controller.registry

    def __getattr__(self, name: str) -> Any:
        # the requests first (node traffic, the admin and view doors), then the owners and
        # coordinators, then the registry's own fields (nodes, config, settings, policy ...)
        if name in RENAMED:
            owner, door = RENAMED[name]
            return getattr(getattr(self.controller, owner), door)
        for owner in (self.controller, self.registry):
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
