"""The node registry: every node's record, the config-derived node settings, and the one door for
a node's state (an event applied through the transition table, statemachine/table.py).

What follows a change on other owners (failure detection re-armed, a scheduling pass due, the
effects for power save, reboots and the jobs) goes through the callables it is given (`Hooks`):
the composition root (ctld/compose/) builds them over the owners it makes next to this one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs

from ranch.conf.model import ClusterConfig, NodeConfig
from ranch.ctld import logs
from ranch.ctld.nodes import configdump, savedstate
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.nodes.liveness import timed
from ranch.ctld.nodes.node import EXPECT_BEAT, EXPECT_TIMEOUT, NodeRecord
from ranch.ctld.state.changelog import ChangeLog, Taken
from ranch.protocol import messages as m
from ranch.protocol.relaymessages import RELAY_PORT, relay_entry
from ranch.statemachine import effects, events, names
from ranch.statemachine.errors import InvalidTransition
from ranch.statemachine.model import Base, Flag, Reason, ReasonSource, initial_state
from ranch.statemachine.policy import Policy
from ranch.statemachine.predicates import takes_new_work
from ranch.statemachine.table import apply

POWER_FLAGS = frozenset({Flag.POWERED_DOWN, Flag.POWERING_UP, Flag.POWERING_DOWN})

CAUSES: dict[type, str] = {
    events.Registered: "registration",
    events.HeartbeatReceived: "heartbeat",
    events.HeartbeatMissed: "heartbeat_missed",
    events.ResponseTimeout: "slurmd_timeout",
    events.HealthResult: "healthcheck",
    events.AllocationChanged: "allocation",
    events.SuspendStarted: "power_save",
    events.SuspendTimeout: "suspend_timeout",
    events.ResumeStarted: "power_up",
    events.ResumeTimeout: "resume_timeout",
    events.ShutdownNotice: "shutdown_notice",
    events.ConfigReload: "reconfigure",
    events.Completing: "completing",
    events.GuardHold: "down_guard",
    events.DrainPaused: "drain_guard",
    events.RebootIssued: "reboot",
    events.RebootTimeout: "resume_timeout",
    events.ReservationChanged: "reservation",
    events.BootCheck: "healthcheck",
}


def _cause(event: Any) -> str:
    user = getattr(event, "user", None)
    if user is not None:  # AdminUpdate and the membership events carry the admin's name
        return f"admin:{user or 'unknown'}"
    return CAUSES.get(type(event), type(event).__name__)


def node_settings(cfg: ClusterConfig) -> m.NodeSettings:
    t, h = cfg.timeouts, cfg.health
    return m.NodeSettings(
        cluster_name=cfg.cluster_name,
        heartbeat_interval=float(t.heartbeat_interval),
        slurmd_timeout=float(t.slurmd_timeout),
        message_timeout=float(t.message_timeout),
        health_check_program=h.program,
        health_check_interval=float(h.interval),
        health_check_timeout=float(h.timeout),
        health_check_node_state=tuple(h.node_state),
        log_file=cfg.control.slurmd_log_file,
        reboot_program=cfg.reboot.program,
        shutdown_on_reboot=cfg.reboot.shutdown_on_reboot,
        controllers=tuple(f"{x.addr or x.name}:{cfg.control.port}" for x in cfg.control.hosts)
        if len(cfg.control.hosts) > 1 else (),
        relays=relay_entries(cfg),
    )


def relay_entries(cfg: ClusterConfig) -> tuple[str, ...]:
    """RelayNodes as the nodes find them (issue 47): NAME=HOST:PORT, the node's own port."""
    out = []
    for name in cfg.relays:
        node = cfg.node(name)
        if node is not None:
            out.append(relay_entry(name, node.addr or node.hostname or name,
                                   node.port or RELAY_PORT))
    return tuple(out)


def config_files(cfg: ClusterConfig) -> tuple[m.ConfigFile, ...]:
    return tuple(m.ConfigFile(name, text) for name, text in cfg.files)


def _noop(*_: Any) -> None:
    return None


@attrs.frozen
class Hooks:
    """What a node's change sets off on other owners (ctld/compose/ builds them)."""

    arm: Callable[[NodeRecord], None] = _noop  # failure detection re-arms the node
    kick: Callable[[], None] = _noop  # a node took up work: a scheduling pass is due
    effect: Callable[[NodeRecord, Any], None] = _noop  # power, reboot and job effects
    rebooting: Callable[[NodeRecord], None] = _noop  # a node with a pending reboot changed


class NodeRegistry:
    """Every node of the running config and the state each is in."""

    def __init__(self, config: ClusterConfig, *, clock: Callable[[], float],
                 wall: Callable[[], float], changes: ChangeLog, eventlog: EventLog,
                 hooks: Hooks) -> None:
        self.clock = clock
        self.wall = wall
        self.changes = changes  # what changed since the last durable write
        self.eventlog = eventlog  # membership and state changes (ctld/nodes/eventlog.py)
        self.hooks = hooks
        # one dict for the registry's life: the job side and the views hold it as a Mapping
        self.nodes: dict[str, NodeRecord] = {}
        self.members_gen = 0  # bumped when a partition's node list may have changed
        self._use_config(config)
        now = clock()
        for ncfg in config.nodes:
            self.nodes[ncfg.name] = self._new_node(ncfg, now)

    # -- configuration ---------------------------------------------------------------------

    def _use_config(self, config: ClusterConfig) -> None:
        self.config = config
        self.members_gen += 1
        self.policy = Policy(return_to_service=config.timeouts.return_to_service,
                             health_gate=bool(config.health.program),
                             unhealthy_max=config.reboot.unhealthy_max)
        self.settings = node_settings(config)
        self.node_files = config_files(config)
        listed = configdump.items(config)
        self.config_dump = m.ConfigDump(path=config.path, config_hash=config.config_hash,
                                        items=listed, ignored=configdump.ignored(config, listed))
        self.eventlog.configure(config.membership.event_log_max_events,
                                config.membership.event_log_max_age)
        self._partitions: tuple[dict[str, Any], ...] = tuple(
            {"name": p.name, "nodes": list(p.nodes), "default": p.default, "state": p.state,
             "max_time": p.max_time, "default_time": p.default_time, "hidden": p.hidden,
             "options": dict(p.options)}  # every other key as written, for rcontrol/rinfo -l
            for p in config.partitions
        )

    def _new_node(self, ncfg: NodeConfig, now: float) -> NodeRecord:
        reason = (
            Reason(ReasonSource.CONFIG, ncfg.reason, self.wall(), None) if ncfg.reason else None
        )
        state = initial_state(ncfg.name, ncfg.cpus, ncfg.state, reason, now=self.wall())
        node = NodeRecord(cfg=ncfg, partitions=self.config.partitions_of(ncfg.name), state=state)
        node.set_state(state)
        node.last_heard = now
        node.idle_since = now
        return node

    def reload(self, new: ClusterConfig,
               carry: Callable[[dict[str, NodeRecord], dict[str, NodeRecord]],
                               list[NodeRecord]]) -> list[str]:
        """Switch to a validated new config: nodes reloaded, added and removed (`carry` keeps
        the dynamic ones, ctld/nodes/membership.py). The names of the nodes new to it."""
        old_nodes = dict(self.nodes)
        now, wall = self.clock(), self.wall()
        self._use_config(new)
        nodes: dict[str, NodeRecord] = {}
        for ncfg in new.nodes:
            node = old_nodes.get(ncfg.name)
            if node is None:
                nodes[ncfg.name] = self._new_node(ncfg, now)
                logs.event("node added by reconfigure", node=ncfg.name)
                continue
            old_cfg = node.cfg
            node.cfg = ncfg
            node.partitions = new.partitions_of(ncfg.name)
            nodes[ncfg.name] = node
            if old_cfg.cpus != ncfg.cpus or old_cfg.state != ncfg.state:
                _, err = self.apply_event(node, events.ConfigReload(
                    now=wall, cpus_total=ncfg.cpus, config_state=ncfg.state))
                if err:
                    logs.event("config change not applied to node", logging.WARNING,
                               node=ncfg.name, error=err)
        for node in carry(old_nodes, nodes):
            nodes[node.name] = node
        for name, node in old_nodes.items():
            if name not in nodes:
                logs.event("node removed by reconfigure", node=name)
                if node.conn is not None:
                    node.conn.close_soon()
        self.nodes.clear()
        self.nodes.update(nodes)
        self.members_gen += 1  # the records now in the dict: a placement cache built meanwhile goes
        return [n for n in nodes if n not in old_nodes]

    def push_config(self) -> int:
        """The new settings and files to every connected node; how many were sent."""
        push = m.ConfigPush(settings=self.settings, config_files=self.node_files,
                            config_hash=self.config.config_hash)
        return sum(1 for node in self.nodes.values()
                   if node.conn is not None and node.conn.push(push))

    # -- state changes ---------------------------------------------------------------------

    def apply_event(self, node: NodeRecord, event: Any) -> tuple[bool, str | None]:
        """Feed one event; (changed, error message if the state machine refused it)."""
        old = node.state
        try:
            new, effs = apply(old, event, self.policy)
        except InvalidTransition as exc:
            return False, str(exc)
        changed = new != old
        if changed:
            node.set_state(new)
            if takes_new_work(new) and not takes_new_work(old):
                self.hooks.kick()  # a node took up work: a scheduling pass is due
            reason = new.reason.text if new.reason and new.reason != old.reason else None
            logs.state_change(node.name, names.complete(old), node.complete, _cause(event), reason)
            self.eventlog.state_change(node, old, new, event, _cause(event))
            self._clocks(node, old)
            self.hooks.arm(node)
            self.mark_changed(node)
        for eff in effs:
            self._effect(node, eff)
        if changed and Flag.REBOOT_REQUESTED in node.state.flags:
            self.hooks.rebooting(node)  # idle now: its reboot is issued
        return changed, None

    def _clocks(self, node: NodeRecord, old: Any) -> None:
        """The node's idle and silence clocks after its state changed from `old`."""
        new = node.state
        if new.cpus_alloc == 0 and old.cpus_alloc > 0:
            node.idle_since = self.clock()
            node.last_busy = self.wall()
        if old.flags & POWER_FLAGS and not new.flags & POWER_FLAGS:
            node.idle_since = self.clock()  # just powered up: SuspendTime counts anew
        if not timed(old) and timed(new):
            # Back under watch (RESUME of a dead node, end of power-up...): give it a fresh
            # allowance, as slurmctld asks such a node to register.
            node.last_heard = self.clock()
            node.hb_stage = EXPECT_TIMEOUT if Flag.NO_RESPOND in new.flags else EXPECT_BEAT

    def _effect(self, node: NodeRecord, eff: Any) -> None:
        if isinstance(eff, effects.RequestRegistration):
            # No "register again" message exists. A connected node that is up proves itself
            # with its next heartbeat (which clears NO_RESPOND); a DOWN one that ReturnToService
            # may bring back must register, so its connection is closed and rnoded reconnects
            # and registers. An absent node is timed out as usual.
            if node.state.base == Base.DOWN and node.conn is not None:
                logs.event("asking node to register again (closing its connection)",
                           node=node.name)
                node.conn.close_soon()
        elif isinstance(eff, effects.Evict):  # rejected or deleted (ctld/nodes/membership.py)
            if node.conn is not None:
                node.conn.close_soon()
                node.conn = None
        else:
            self.hooks.effect(node, eff)

    def set_use(self, name: str, cpus: int, mem: int, gpus: tuple[int, ...],
                completing: bool) -> None:
        """What the job side holds of node `name`: its CPUs and COMPLETING go to the state
        machine as events, its memory and GPUs onto the record."""
        node = self.nodes.get(name)
        if node is None:
            return
        wall = self.wall()
        cpus = min(cpus, node.state.cpus_total)
        if node.state.cpus_alloc != cpus:
            _, err = self.apply_event(node, events.AllocationChanged(now=wall, cpus_alloc=cpus))
            if err:
                logs.event("allocation not applied", logging.WARNING, node=name, error=err)
            elif cpus:
                node.last_busy = wall
        if (Flag.COMPLETING in node.state.flags) != completing:
            self.apply_event(node, events.Completing(now=wall, active=completing))
        if node.alloc_mem != mem or node.gpus_used != gpus:
            node.alloc_mem = mem
            node.gpus_used = gpus
            self.mark_changed(node)

    def push(self, name: str, msg: Any) -> bool:
        """Send `msg` to node `name` on its connection of now, once every change made so far
        is on disk; False when the node has no connection."""
        node = self.nodes.get(name)
        if node is None or node.conn is None:
            return False
        self.changes.after_durable(node.conn.push, msg)
        return True

    def mark_changed(self, node: NodeRecord) -> None:
        """Something a snapshot or the state file shows changed on `node`."""
        node.record = None
        node.view_fresh = False
        node.saved = None
        self.changes.node_changed(node)

    def changed_all(self) -> None:
        for node in self.nodes.values():
            node.record = None
            node.view_fresh = False
            node.saved = None
        self.changes.shown_changed()
        self.changes.state_changed()

    # -- membership (ctld/nodes/membership.py) ----------------------------------------------

    def add_node(self, node: NodeRecord) -> None:
        """A node joins the registry (a dynamic node)."""
        self.nodes[node.name] = node

    def drop_node(self, name: str) -> None:
        """A dynamic node leaves the registry (rcontrol delete)."""
        self.nodes.pop(name, None)

    def join_partitions(self, node: NodeRecord) -> None:
        """A dynamic node joins its partitions' live node lists."""
        for pname in node.partitions:
            members = self.partition_nodes(pname)
            if members is not None and node.name not in members:
                members.append(node.name)
                self.members_gen += 1  # a partition's node list changed

    def leave_partitions(self, node: NodeRecord) -> None:
        """A deleted dynamic node leaves its partitions' live node lists."""
        for pname in node.partitions:
            members = self.partition_nodes(pname)
            if members is not None and node.name in members:
                members.remove(node.name)
                self.members_gen += 1

    @property
    def partition_records(self) -> tuple[dict[str, Any], ...]:
        """Every partition as rinfo and the web page show it (live node lists included)."""
        return self._partitions

    def partition_nodes(self, name: str) -> list[str] | None:
        """The live node list of partition `name` (membership adds and removes dynamic nodes
        in it), or None when there is no such partition."""
        for part in self._partitions:
            if part["name"] == name:
                nodes: list[str] = part["nodes"]
                return nodes
        return None

    # -- the nodes' records in the journal and the state file (ctld/nodes/savedstate.py) ------

    def journal_records(self, taken: Taken) -> list[dict[str, Any]]:
        """The journal records of the nodes changed in `taken`."""
        return savedstate.journal_records(self.nodes, taken)

    def save_doc(self) -> dict[str, Any]:
        """The nodes' part of the state-file document."""
        return savedstate.save_doc(self.nodes, self.wall(), self.config.config_hash)
