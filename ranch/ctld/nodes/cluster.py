"""The controller's core: every node's record, events fed to the state machine, deadlines, effects.

No sockets here: the server hands decoded requests to these methods and sends back what they
return, so tests drive the whole controller in-process under trio's MockClock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
import trio

from ranch import __version__
from ranch.conf.model import ClusterConfig, NodeConfig
from ranch.ctld import logs
from ranch.ctld.compose.jobs import NodesOf, build_jobs, on_deadline
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.jobs.history import FileHistory
from ranch.ctld.nodes import (
    configdump,
    guards,
    membership,
    nodetraffic,
    nodeupdates,
    savedstate,
)
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.nodes.guards import DrainGuard
from ranch.ctld.nodes.hardware import HardwareShelf
from ranch.ctld.nodes.liveness import Liveness, timed
from ranch.ctld.nodes.node import (
    EXPECT_BEAT,
    EXPECT_TIMEOUT,
    NodeRecord,
    Pusher,
)
from ranch.ctld.nodes.powersave import PowerSave
from ranch.ctld.nodes.reboots import Reboots
from ranch.ctld.nodes.reservations import DEADLINE as RESV_DEADLINE
from ranch.ctld.nodes.reservations import Reservations
from ranch.ctld.nodes.snapshot import Snapshots
from ranch.ctld.site import Site
from ranch.ctld.state.changelog import ChangeLog, Taken
from ranch.protocol import messages as m
from ranch.protocol.versions import CURRENT as PROTOCOL_CURRENT
from ranch.statemachine import effects, events, names
from ranch.statemachine.errors import InvalidTransition
from ranch.statemachine.model import Base, Flag, Reason, ReasonSource, initial_state
from ranch.statemachine.policy import Policy
from ranch.statemachine.predicates import takes_new_work
from ranch.statemachine.table import apply

VERSION = __version__
POWER_FLAGS = frozenset({Flag.POWERED_DOWN, Flag.POWERING_UP, Flag.POWERING_DOWN})

Spawn = Callable[..., None]


def _cause(event: Any) -> str:
    user = getattr(event, "user", None)
    if user is not None:  # AdminUpdate and the membership events carry the admin's name
        return f"admin:{user or 'unknown'}"
    return {
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
    }.get(type(event), type(event).__name__)


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
    )


def config_files(cfg: ClusterConfig) -> tuple[m.ConfigFile, ...]:
    return tuple(m.ConfigFile(name, text) for name, text in cfg.files)


class Cluster:
    """Every node of the running config and what happens to them."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        clock: Callable[[], float] = trio.current_time,
        wall: Callable[[], float] = time.time,
        spawn: Spawn | None = None,
        changes: ChangeLog | None = None,
        epoch: int = 0,
        site: Site | None = None,
        history: FileHistory | None = None,
        on_events_unsaved: Callable[[], None] = lambda: None,
    ) -> None:
        """`spawn` starts a task in the daemon's nursery (None: in-process tests, no programs
        run); `site`: where this controller lives; `history`: finished jobs on disk (racct);
        `on_events_unsaved`: the event log has records to write."""
        self.clock = clock
        self.wall = wall
        self.spawn = spawn
        self.site = site if site is not None else Site()
        # what changed since the last durable write, and the pushes waiting for it (the daemon
        # builds it with its store's callbacks; without a store, pushes leave at once)
        self.changes = changes if changes is not None else ChangeLog()
        # the seat this controller holds (a controller pair, ctld/pair/controller.py; 0: none):
        # on every order to a node, which refuses orders of an older one
        self.epoch = epoch
        self.deadlines = Deadlines()
        self.nodes: dict[str, NodeRecord] = {}
        self.members_gen = 0  # bumped when a partition's node list may have changed
        self.started_at = wall()
        self.views = Snapshots(self)  # what rinfo and the web page read (ctld/nodes/snapshot.py)
        self.node_files: tuple[m.ConfigFile, ...] = ()
        self.hardware = HardwareShelf()  # what nodes report, kept deflated (ctld/nodes/hardware.py)
        self.config = config
        # membership and state changes (ctld/nodes/eventlog.py)
        self.eventlog = EventLog(wall=wall, on_unsaved=on_events_unsaved)
        self.restored_names: tuple[str, ...] = ()  # nodes the saved state knew
        self._use_config(config)
        self.power = PowerSave(self)  # power save, rates and programs (ctld/nodes/powersave.py)
        # failure detection, stalls, DownGuard (ctld/nodes/liveness.py)
        self.liveness = Liveness(self)
        self.drain_guard = DrainGuard(self)  # the breaker over health drains (ctld/nodes/guards.py)
        self.reboots = Reboots(self)  # rcontrol reboot, RebootProgram, its timeout
        now = clock()
        for ncfg in config.nodes:
            self.nodes[ncfg.name] = self._new_node(ncfg, now)
        # batch jobs and the allocations they make (ctld/compose/jobs.py)
        def blocked(limit: float | None, now: float) -> frozenset[str]:  # reservations: below
            return self.reservations.blocked(limit, now)

        nodes_for_jobs = NodesOf(self, blocked=blocked)
        self.jobs = build_jobs(nodes_for_jobs, config=config, clock=clock, wall=wall,
                               deadlines=self.deadlines, changes=self.changes, site=self.site,
                               epoch=epoch, spawn=spawn, history=history,
                               programs=self.power.flush)
        self.reservations: Reservations = Reservations(self)  # maintenance windows

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

    # -- start and restore -----------------------------------------------------------------

    def restore(self, doc: dict[str, Any]) -> None:
        """Take back the saved state (ctld/nodes/savedstate.py)."""
        self.restored_names = savedstate.restore(self, doc)

    def start(self, grace: float = 0.0) -> None:
        """Arm the failure-detection deadline of every node that is expected to talk
        (ctld/nodes/liveness.py) and the power timeouts of nodes caught mid power-up/down. `grace`:
        seconds before any node's silence starts to count (a takeover, ctld/pair/controller.py)."""
        membership.on_start(self, self.restored_names)
        self.liveness.start(grace)
        self.power.rearm()  # nodes caught mid power-up/down by a restart
        self.reboots.rearm()  # nodes caught waiting for their new boot
        self.reservations.refresh()  # windows that opened or closed while it was away

    # -- state changes ---------------------------------------------------------------------

    def _apply(self, node: NodeRecord, event: Any) -> tuple[bool, str | None]:
        """Feed one event; (changed, error message if the state machine refused it)."""
        old = node.state
        try:
            new, effs = apply(old, event, self.policy)
        except InvalidTransition as exc:
            return False, str(exc)
        changed = new != old
        if changed:
            was_timed = self._timed(old)
            node.set_state(new)
            if takes_new_work(new) and not takes_new_work(old):
                self.jobs.kick()  # a node took up work: a scheduling pass is due
            reason = new.reason.text if new.reason and new.reason != old.reason else None
            logs.state_change(node.name, names.complete(old), node.complete, _cause(event), reason)
            self.eventlog.state_change(node, old, new, event, _cause(event))
            if new.cpus_alloc == 0 and old.cpus_alloc > 0:
                node.idle_since = self.clock()
                node.last_busy = self.wall()
            if old.flags & POWER_FLAGS and not new.flags & POWER_FLAGS:
                node.idle_since = self.clock()  # just powered up: SuspendTime counts anew
            if not was_timed and self._timed(new):
                # Back under watch (RESUME of a dead node, end of power-up...): give it a fresh
                # allowance, as slurmctld asks such a node to register.
                node.last_heard = self.clock()
                node.hb_stage = (
                    EXPECT_TIMEOUT if Flag.NO_RESPOND in new.flags else EXPECT_BEAT
                )
            self._arm(node)
            self.mark_changed(node)
        for eff in effs:
            self._effect(node, eff)
        if changed and Flag.REBOOT_REQUESTED in node.state.flags:
            self.reboots.after_change(node)  # idle now: its reboot is issued
        return changed, None

    def _effect(self, node: NodeRecord, eff: Any) -> None:
        if isinstance(eff, effects.KillJobs):
            self.jobs.node_lost(node, eff.requeue, eff.wait)
        elif isinstance(eff, effects.RunSuspendProgram):
            self.power.queue("suspend", node)
        elif isinstance(eff, effects.RunResumeProgram):
            self.power.queue_resume(node)
        elif isinstance(eff, effects.RunResumeFailProgram):
            self.power.queue("resume_fail", node)
        elif isinstance(eff, effects.ScheduleTimeout):
            if eff.kind == "reboot":
                self.reboots.schedule_timeout(node)
            else:
                self.power.schedule_timeout(node, eff.kind)
        elif isinstance(eff, effects.RunRebootProgram):
            self.reboots.run_program(node)
        elif isinstance(eff, effects.RequestRegistration):
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

    def flush_programs(self) -> None:
        """Start the power programs the last operation asked for, one run per kind (batched).
        A scheduling pass that is due runs first: placing work may power nodes up."""
        self.jobs.starts.run()
        self.power.flush()

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

    def add_node(self, node: NodeRecord) -> None:
        """A node joins the registry (a dynamic node, ctld/nodes/membership.py)."""
        self.nodes[node.name] = node

    def members_changed(self) -> None:
        """A partition's node list may have changed (ctld/nodes/membership.py)."""
        self.members_gen += 1

    # -- failure detection (ctld/nodes/liveness.py) ---------------------------------------------

    _timed = staticmethod(timed)

    def _hb_due(self, node: NodeRecord) -> float | None:
        return self.liveness.due(node)

    def _arm(self, node: NodeRecord) -> None:
        self.liveness.arm(node)

    def on_deadlines(self, keys: Iterable[Any]) -> None:
        """The deadline task's callback: heartbeat stages and power timeouts whose time came
        (a stall of the controller's own is credited to every node first)."""
        now, wall = self.clock(), self.wall()
        for name, kind in self.liveness.woke(keys, now):
            if (name, kind) == RESV_DEADLINE:  # a reservation's window opens or closes
                self.reservations.refresh()
                continue
            if on_deadline(self.jobs, name, kind):  # a job's (ctld/compose/jobs.py)
                continue
            node = self.nodes.get(name)
            if node is None:
                continue
            if kind == "hb":
                self.liveness.fired(node, now, wall)
            elif kind == "suspend" and Flag.POWERING_DOWN in node.state.flags:
                self._apply(node, events.SuspendTimeout(now=wall))
            elif kind == "resume" and Flag.POWERING_UP in node.state.flags:
                self._apply(node, events.ResumeTimeout(now=wall))
            elif kind == "reboot":
                self.reboots.fired(node)
        self.flush_programs()

    # -- node traffic (ctld/nodes/nodetraffic.py) ------------------------------------------------

    def register(
        self, msg: m.Register, conn: Pusher | None = None, version: int = PROTOCOL_CURRENT
    ) -> m.RegisterReply:
        return nodetraffic.register(self, msg, conn, version)

    def heartbeat(self, msg: m.Heartbeat, conn: Pusher | None = None) -> Any:
        return nodetraffic.heartbeat(self, msg, conn)

    def job_started(self, msg: m.JobStarted, conn: Pusher | None = None) -> Any:
        return nodetraffic.job_started(self, msg, conn)

    def shutdown_notice(self, msg: m.ShutdownNotice, conn: Pusher | None = None) -> Any:
        return nodetraffic.shutdown_notice(self, msg, conn)

    def disconnected(self, conn: Pusher) -> None:
        nodetraffic.disconnected(self, conn)

    # -- hooks for ctld/jobs/store.py -------------------------------------------------------------

    def apply_event(self, node: NodeRecord, event: Any) -> tuple[bool, str | None]:
        return self._apply(node, event)

    def set_use(self, name: str, cpus: int, mem: int, gpus: tuple[int, ...],
                completing: bool) -> None:
        """What the job store holds of node `name`: its CPUs and COMPLETING go to the state
        machine as events, its memory and GPUs onto the record."""
        node = self.nodes.get(name)
        if node is None:
            return
        wall = self.wall()
        cpus = min(cpus, node.state.cpus_total)
        if node.state.cpus_alloc != cpus:
            _, err = self._apply(node, events.AllocationChanged(now=wall, cpus_alloc=cpus))
            if err:
                logs.event("allocation not applied", logging.WARNING, node=name, error=err)
            elif cpus:
                node.last_busy = wall
        if (Flag.COMPLETING in node.state.flags) != completing:
            self._apply(node, events.Completing(now=wall, active=completing))
        if node.alloc_mem != mem or node.gpus_used != gpus:
            node.alloc_mem = mem
            node.gpus_used = gpus
            self.mark_changed(node)

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

    # -- admin requests --------------------------------------------------------------------

    def expand(self, expr: str) -> tuple[list[str], list[str]]:
        return nodeupdates.expand(self, expr)

    def update_nodes(self, msg: m.UpdateNodes) -> m.UpdateResult:
        return nodeupdates.update_nodes(self, msg)

    def reboot_nodes(self, msg: m.RebootNodes) -> m.UpdateResult:
        return self.reboots.request(msg)

    def reservation(self, msg: m.ReservationRequest) -> m.ReservationReply:
        reply = self.reservations.handle(msg)
        self.flush_programs()
        return reply

    def snapshot(self, metrics: bool = False) -> m.Snapshot:
        return self.views.snapshot(metrics)

    def snapshot_body(self, metrics: bool = False, fields: tuple[str, ...] = ()) -> bytes:
        return self.views.body(metrics, fields)

    def ping(self) -> m.Pong:
        return m.Pong(cluster_name=self.config.cluster_name, version=VERSION,
                      started_at=self.started_at)

    def config_in_force(self) -> m.ConfigDump:
        """rcontrol show config: the file's keys, the power settings in force, and where this
        controller lives (its address, key, state dir and log file)."""
        site = self.site
        return configdump.in_force(self.power.config_dump(self.config_dump),
                                   server_addr=site.server_addr, key_file=site.key_file,
                                   state_dir=site.state_dir, log_file=site.log_file)

    def guard_request(self, msg: m.GuardRequest) -> m.GuardStatus:
        """rcontrol show guards | confirm down|drain | reset guard (ctld/nodes/guards.py)."""
        return guards.handle(self, msg)

    def node_membership(self, msg: m.NodeMembership) -> m.UpdateResult:
        """rcontrol approve | reject | delete (ctld/nodes/membership.py)."""
        return membership.handle(self, msg)

    # -- reconfigure -----------------------------------------------------------------------

    def apply_config(self, new: ClusterConfig) -> m.ReconfigureResult:
        """Switch to a validated new config: reload nodes, add/remove, push to connected nodes."""
        old_nodes = self.nodes
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
                _, err = self._apply(node, events.ConfigReload(
                    now=wall, cpus_total=ncfg.cpus, config_state=ncfg.state))
                if err:
                    logs.event("config change not applied to node", logging.WARNING,
                               node=ncfg.name, error=err)
        membership.carry_dynamic(self, old_nodes, nodes)
        for name, node in old_nodes.items():
            if name not in nodes:
                logs.event("node removed by reconfigure", node=name)
                if node.conn is not None:
                    node.conn.close_soon()
                self.deadlines.cancel((name, "hb"))
        self.nodes = nodes
        membership.hold_new(self, [n for n in nodes if n not in old_nodes])
        # New timeouts apply to every node at once: re-arm them all (once per reconfigure).
        self.deadlines.clear()
        self.jobs.config_changed(new)  # after the clear: it re-arms the jobs' own deadlines
        self.liveness.rearm_all()
        self.power.use_config()
        self.power.rearm()
        self.changed_all()
        push = m.ConfigPush(settings=self.settings, config_files=self.node_files,
                            config_hash=new.config_hash)
        pushed = sum(1 for node in nodes.values() if node.conn is not None and node.conn.push(push))
        self.flush_programs()
        logs.event("reconfigured", path=new.path, hash=new.config_hash[:12], nodes=len(nodes),
                   pushed=pushed)
        return m.ReconfigureResult(ok=True, config_hash=new.config_hash)

    # -- power save ------------------------------------------------------------------------

    def power_save_pass(self) -> list[str]:
        """See PowerSave.power_save_pass (ctld/nodes/powersave.py)."""
        return self.power.power_save_pass()

    # -- state save (ctld/nodes/savedstate.py) ----------------------------------------------------

    def node_entry(self, node: NodeRecord) -> orjson.Fragment:
        return savedstate.node_entry(node)

    def journal_records(self, taken: Taken) -> list[dict[str, Any]]:
        """The journal records of changes taken from the change log."""
        return savedstate.journal_records(self, taken)

    def take_unsynced(self) -> list[dict[str, Any]]:
        """The journal records of every change not yet handed to a write."""
        return self.journal_records(self.changes.take())

    def save_doc(self) -> dict[str, Any]:
        return savedstate.save_doc(self)
