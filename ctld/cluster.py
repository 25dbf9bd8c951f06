"""The controller's core: every node's record, events fed to the state machine, deadlines, effects.

No sockets here: the server hands decoded requests to these methods and sends back what they
return, so tests drive the whole controller in-process under trio's MockClock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson
import trio

from conf import hostlist
from conf.model import ClusterConfig, NodeConfig
from ctld import configdump, logs, membership
from ctld.deadlines import Deadlines
from ctld.eventlog import EventLog
from ctld.guards import DrainGuard
from ctld.jobs import Jobs
from ctld.liveness import Liveness, timed
from ctld.node import (
    EXPECT_BEAT,
    EXPECT_TIMEOUT,
    NodeRecord,
    Pusher,
    pack_metrics,
)
from ctld.powersave import PowerSave
from ctld.snapshot import Snapshots
from ctld.validate import hardware_problem
from ctld.wire import kept
from protocol import messages as m
from protocol.codec import converter
from protocol.limits import MAX_REASON_CHARS, too_long
from protocol.versions import CURRENT as PROTOCOL_CURRENT
from statemachine import (
    Base,
    Flag,
    InvalidTransition,
    NodeState,
    Policy,
    Reason,
    ReasonSource,
    apply,
    effects,
    events,
    initial_state,
    names,
)
from statemachine.predicates import reason_required, takes_new_work

VERSION = "0.1.0"
REASON_REQUIRED = "You must specify a reason when DOWNING or DRAINING a node. Request denied"
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
    )


def config_files(cfg: ClusterConfig) -> tuple[m.ConfigFile, ...]:
    return tuple(m.ConfigFile(name, text) for name, text in cfg.files)


def _reason_from_json(d: dict[str, Any] | None) -> Reason | None:
    if not d:
        return None
    src = d.get("source", "ADMIN")
    source = ReasonSource[src] if src in ReasonSource.__members__ else ReasonSource(src)
    return Reason(source=source, text=d.get("text", ""), time=float(d.get("time") or 0.0),
                  user=d.get("user"))


def state_from_json(name: str, cpus: int, d: dict[str, Any]) -> NodeState:
    """A saved state back into a NodeState (tolerant of how statemachine spells enums)."""
    base = d["base"]
    flags = frozenset(
        Flag[f] if f in Flag.__members__ else Flag(f) for f in d.get("flags", ())
    )
    return NodeState(
        name=name,
        base=Base[base] if base in Base.__members__ else Base(base),
        flags=flags,
        reason=_reason_from_json(d.get("reason")),
        cpus_total=int(d.get("cpus_total", cpus)),
        cpus_alloc=int(d.get("cpus_alloc", 0)),
    )


def hardware_json(hw: m.Hardware) -> bytes:
    """A node's hardware as its state-file entry holds it."""
    return kept(orjson.dumps(converter.unstructure(hw)))


class Cluster:
    """Every node of the running config and what happens to them."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        clock: Callable[[], float] = trio.current_time,
        wall: Callable[[], float] = time.time,
        spawn: Spawn | None = None,
        on_dirty: Callable[[], None] = lambda: None,
    ) -> None:
        self.clock = clock
        self.wall = wall
        self.spawn = spawn
        self.on_dirty = on_dirty
        self.deadlines = Deadlines()
        self.nodes: dict[str, NodeRecord] = {}
        self.gen = 0  # bumped by every change a snapshot shows
        self.soft_gen = 0  # bumped by heartbeat-only data (metrics, load)
        self.dirty = False  # state file out of date
        # Changes a reply may confirm that are not in the journal yet (ctld/durable.py writes
        # them, and holds the reply, and the pushes that follow from them, until they are).
        self.unsynced_jobs: dict[int, Any] = {}
        # Bumped by every change the journal must hold (a request that left it as it was
        # confirms nothing new: its reply need not wait for the disk).
        self.node_changes = self.job_changes = 0
        self.unsynced_nodes: dict[str, NodeRecord] = {}
        self.outbox: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.on_outbox: Callable[[], None] | None = None  # None: no store, push at once
        self.started_at = wall()
        self.views = Snapshots(self)  # what rinfo and the web page read (ctld/snapshot.py)
        self._config_files: tuple[m.ConfigFile, ...] = ()
        self.config = config
        self.eventlog = EventLog(wall=wall)  # membership and state changes (ctld/eventlog.py)
        self._restored: tuple[str, ...] = ()  # nodes the saved state knew
        self._use_config(config)
        self.power = PowerSave(self)  # power save, rates and programs (ctld/powersave.py)
        self.liveness = Liveness(self)  # failure detection, stalls, DownGuard (ctld/liveness.py)
        self.drain_guard = DrainGuard(self)  # the breaker over health drains (ctld/guards.py)
        now = clock()
        for ncfg in config.nodes:
            self.nodes[ncfg.name] = self._new_node(ncfg, now)
        self.jobs = Jobs(self)  # batch jobs and the allocations they make (ctld/jobs.py)

    # -- configuration ---------------------------------------------------------------------

    def _use_config(self, config: ClusterConfig) -> None:
        self.config = config
        self.policy = Policy(return_to_service=config.timeouts.return_to_service)
        self.settings = node_settings(config)
        self._config_files = config_files(config)
        self.config_dump = m.ConfigDump(
            path=config.path, config_hash=config.config_hash, items=configdump.items(config)
        )
        self.eventlog.configure(config.membership.event_log_max_events,
                                config.membership.event_log_max_age)
        self._partitions = tuple(
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
        """Take back the saved state; log every node that is saved but gone, or new."""
        saved = doc.get("nodes", {})
        now = self.clock()
        for name, entry in saved.items():
            node = self.nodes.get(name) or membership.restore_dynamic(self, name, entry)
            if node is None:
                logs.event("saved node is no longer in the config; dropped", logging.WARNING,
                           node=name)
                continue
            try:
                state = state_from_json(name, node.cfg.cpus, entry["state"])
            except (KeyError, ValueError, TypeError) as exc:
                logs.event("saved node state unreadable; starting it fresh", logging.WARNING,
                           node=name, error=repr(exc))
                continue
            node.set_state(state)
            hw = entry.get("hardware")
            node.hardware_json = hardware_json(converter.structure(hw, m.Hardware)) if hw else None
            node.boot_time = entry.get("boot_time")
            node.last_registration = entry.get("last_registration")
            node.slurmd_start_time = entry.get("slurmd_start_time")
            node.version = entry.get("version", "")
            node.last_busy = entry.get("last_busy")
            node.power_started = entry.get("power_started")
            node.power_action = entry.get("power_action")
            node.last_change = entry.get("last_change")
            node.last_heard = now
        for name in self.nodes:
            if name not in saved:
                logs.event("node not in the saved state; starting it from the config",
                           node=name)
        self._restored = tuple(n for n in saved if n in self.nodes)
        self.liveness.restored_at = doc.get("saved_at")
        logs.event("state restored", nodes=len(saved), saved_at=doc.get("saved_at"))
        self.jobs.restore(doc.get("jobs"))
        self._changed_all()

    def start(self) -> None:
        """Arm the failure-detection deadline of every node that is expected to talk
        (ctld/liveness.py) and the power timeouts of nodes caught mid power-up/down."""
        membership.on_start(self, self._restored)
        self.liveness.start()
        self.power.rearm()  # nodes caught mid power-up/down by a restart

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
                self.jobs.kicked = True  # a node took up work: a scheduling pass is due
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
            self.power.schedule_timeout(node, eff.kind)
        elif isinstance(eff, effects.RequestRegistration):
            # No "register again" message exists. A connected node that is up proves itself
            # with its next heartbeat (which clears NO_RESPOND); a DOWN one that ReturnToService
            # may bring back must register, so its connection is closed and rnoded reconnects
            # and registers. An absent node is timed out as usual.
            if node.state.base == Base.DOWN and node.conn is not None:
                logs.event("asking node to register again (closing its connection)",
                           node=node.name)
                node.conn.close_soon()
        elif isinstance(eff, effects.Evict):  # rejected or deleted (ctld/membership.py)
            if node.conn is not None:
                node.conn.close_soon()
                node.conn = None

    def flush_programs(self) -> None:
        """Start the power programs the last operation asked for, one run per kind (batched).
        A scheduling pass that is due runs first: placing work may power nodes up."""
        self.jobs.run()
        self.power.flush()

    def after_durable(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) (a push to a node) once every change made so far is on disk."""
        if self.on_outbox is None:
            fn(*args)
            return
        self.outbox.append((fn, args))
        self.on_outbox()

    def mark_changed(self, node: NodeRecord) -> None:
        """Something a snapshot or the state file shows changed on `node`."""
        node.record = None
        node.view_fresh = False
        node.saved = None
        self.unsynced_nodes[node.name] = node
        self.node_changes += 1
        self.gen += 1
        if not self.dirty:
            self.dirty = True
            self.on_dirty()

    def _changed_all(self) -> None:
        for node in self.nodes.values():
            node.record = None
            node.view_fresh = False
            node.saved = None
        self.gen += 1
        self.dirty = True
        self.on_dirty()

    # -- failure detection (ctld/liveness.py) ---------------------------------------------

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
            if kind == "begin":  # a pending job's BeginTime came (ctld/jobs.py BEGIN_KEY)
                self.jobs.kicked = True
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
        self.flush_programs()

    # -- node traffic ----------------------------------------------------------------------

    def register(
        self, msg: m.Register, conn: Pusher | None = None, version: int = PROTOCOL_CURRENT
    ) -> m.RegisterReply:
        """`version`: the peer's protocol version (3 and later can check health first)."""
        peer = conn.peer if conn else "-"
        refused = membership.admit(self, msg, peer)  # unknown, dynamic or rejected nodes
        if refused is not None:
            return refused
        node = self.nodes[msg.name]
        if msg.health is None and self.settings.health_check_program and version >= 3:
            # Like configless slurmd: a node checks its health before it registers, so it is
            # never offered as IDLE before its first verdict. Its state stays as it was.
            logs.event("health check required before registration", node=msg.name, peer=peer)
            return m.RegisterReply(
                accepted=False,
                health_check_first=True,
                reason="health check required before registration",
                settings=self.settings,
                config_files=self._config_files,
                config_hash=self.config.config_hash,
                node_state=node.complete,
            )
        now, wall = self.clock(), self.wall()
        problem = hardware_problem(node.cfg, msg.hardware)
        rebooted = (
            node.boot_time is not None
            and node.last_registration is not None
            and msg.boot_time > node.boot_time + 1.0  # boot times jitter by a fraction
        )
        node.hardware_json = hardware_json(msg.hardware)
        node.boot_time = msg.boot_time
        node.last_registration = wall
        node.slurmd_start_time = wall
        node.version = msg.rnoded_version
        node.seq = -1  # a restarted rnoded counts again from the start
        node.last_heard = now
        node.last_heartbeat = wall
        node.hb_stage = EXPECT_BEAT
        if node.conn is not None and node.conn is not conn:
            node.conn.close_soon()  # the node reconnected; the old connection is dead
        if conn is not None:
            if conn.node is not None and conn.node != msg.name:  # one connection, a second name
                self.disconnected(conn)
            conn.node = msg.name  # so that its close is a lookup, not a scan of every node
        node.conn = conn
        logs.event("node registered", node=msg.name, peer=peer, version=msg.rnoded_version,
                   valid=problem is None, rebooted=rebooted)
        self.eventlog.add("registered", msg.name, peer=peer, problem=problem)
        if problem:
            logs.event("registration invalid", logging.WARNING, node=msg.name, problem=problem)
        self._apply(
            node, events.Registered(now=wall, valid=problem is None, problem=problem,
                                    rebooted=rebooted)
        )
        if msg.health is not None:
            self._health(node, msg.health)
        kill, kill_runs = self.jobs.registered(node, msg)
        self._arm(node)
        self.mark_changed(node)
        self.flush_programs()
        return m.RegisterReply(
            accepted=True,
            settings=self.settings,
            config_files=self._config_files,
            config_hash=self.config.config_hash,
            node_state=node.complete,
            kill_job_ids=kill,
            kill_runs=kill_runs,
        )

    def heartbeat(self, msg: m.Heartbeat, conn: Pusher | None = None) -> Any:
        """The hot path: O(1) per beat, no snapshot rebuild, no file write."""
        node = self.nodes.get(msg.name)
        if node is None or node.conn is not conn:
            return m.Error(
                code="unknown_node",
                message=f"node {msg.name} has not registered on this connection; register first",
                field="name",
            )
        if msg.seq <= node.seq:  # an old beat from a burst: says nothing new
            return m.HeartbeatReply(node_state=node.complete, config_hash=self.config.config_hash)
        node.seq = msg.seq
        node.last_heartbeat = self.wall()
        node.metrics = pack_metrics(msg.metrics)
        node.view_fresh = False
        self.soft_gen += 1
        node.last_heard = self.clock()
        if node.hb_stage != EXPECT_BEAT:
            node.hb_stage = EXPECT_BEAT
            self._arm(node)
        elif (node.name, "hb") not in self.deadlines:
            self._arm(node)
        st = node.state
        if Flag.NO_RESPOND in st.flags or st.base in (Base.DOWN, Base.UNKNOWN):
            self._apply(node, events.HeartbeatReceived(now=node.last_heartbeat))
        if msg.health is not None and msg.health != node.health:
            self._health(node, msg.health)
        jobs = self.jobs
        kill, kill_runs = (jobs.heartbeat(node, msg) if msg.job_ids or msg.jobs_ended
                           or node.name in jobs.uses else ((), ()))
        if self.power.pending or self.jobs.kicked:
            self.flush_programs()
        return m.HeartbeatReply(node_state=node.complete, config_hash=self.config.config_hash,
                                kill_job_ids=kill, kill_runs=kill_runs)

    def job_started(self, msg: m.JobStarted, conn: Pusher | None = None) -> Any:
        node = self.nodes.get(conn.node) if conn is not None and conn.node else None
        if node is None or node.conn is not conn:
            return m.Error(code="unknown_node", message="JobStarted from a connection on which "
                           "no node registered")
        reply = self.jobs.started(node, msg)
        self.flush_programs()
        return reply

    def _health(self, node: NodeRecord, report: m.HealthReport) -> None:
        node.health = report
        node.record = None
        node.view_fresh = False
        self.gen += 1
        verdict = report.verdict if report.verdict in ("ok", "drain", "fail") else "drain"
        # rnoded's runner already writes "HC: <line>"; prefix only what lacks it.
        text = report.message.strip()
        message = text if text.startswith("HC:") else f"HC: {text or 'health check failed'}"
        if len(message) > MAX_REASON_CHARS:  # a node's word, kept as a reason everywhere
            message = message[: MAX_REASON_CHARS - 1] + "…"
        _, err = self.drain_guard.health(node, verdict, message)  # the DrainGuard may pause it
        if err:
            logs.event("health result not applied", logging.DEBUG, node=node.name, error=err)

    def shutdown_notice(self, msg: m.ShutdownNotice, conn: Pusher | None = None) -> Any:
        node = self.nodes.get(msg.name)
        if node is None or node.conn is not conn:
            return m.Error(code="unknown_node",
                           message=f"node {msg.name} has not registered on this connection")
        logs.event("node shutting down", node=msg.name, reason=msg.reason)
        self._apply(node, events.ShutdownNotice(now=self.wall()))
        node.conn = None
        self.flush_programs()
        return m.Ack()

    def disconnected(self, conn: Pusher) -> None:
        node = self.nodes.get(conn.node) if conn.node is not None else None
        if node is not None and node.conn is conn:  # not if the node has reconnected since
            node.conn = None
            self.eventlog.add("left", node.name, peer=conn.peer)

    # -- hooks for ctld/jobs.py -------------------------------------------------------------

    def apply_event(self, node: NodeRecord, event: Any) -> tuple[bool, str | None]:
        return self._apply(node, event)

    def touch(self, node: NodeRecord) -> None:
        """mark_changed under the name ctld/jobs.py calls."""
        self.mark_changed(node)

    @property
    def partition_records(self) -> tuple[dict, ...]:
        """Every partition as rinfo and the web page show it (live node lists included)."""
        return self._partitions

    def partition_nodes(self, name: str) -> list[str] | None:
        """The live node list of partition `name` (membership adds and removes dynamic nodes
        in it), or None when there is no such partition."""
        for part in self._partitions:
            if part["name"] == name:
                return part["nodes"]
        return None

    def jobs_holding(self, names: Sequence[str]) -> list[tuple[int, list[str]]]:
        return self.jobs.jobs_holding(names)

    # -- admin requests --------------------------------------------------------------------

    def expand(self, expr: str) -> tuple[list[str], list[str]]:
        """(names, errors) of a hostlist expression or ALL."""
        expr = expr.strip()
        if expr.upper() == "ALL":
            return list(self.nodes), []
        try:
            wanted = hostlist.expand(expr)
        except ValueError as exc:  # it names the expression (cut short when long) and the limit
            return [], [str(exc)]
        unknown = [n for n in wanted if n not in self.nodes]
        if unknown:  # folding 100,000 names would cost the loop 0.1 s: name the first 1,000
            more = f" and {len(unknown) - 1000:,} more" if len(unknown) > 1000 else ""
            return [], [f"unknown node(s): {hostlist.fold(unknown[:1000])}{more}"]
        return wanted, []

    def update_nodes(self, msg: m.UpdateNodes) -> m.UpdateResult:
        if msg.reason and len(msg.reason) > MAX_REASON_CHARS:  # refused, never cut: docs/limits.md
            return m.UpdateResult(ok=False, errors=(
                too_long("Reason", len(msg.reason), MAX_REASON_CHARS, "characters"),))
        node_names, errors = self.expand(msg.node_names)
        if errors:
            return m.UpdateResult(ok=False, errors=tuple(errors))
        reason = (msg.reason or "").strip() or None
        if msg.state is None:
            if reason is None:
                return m.UpdateResult(ok=False, errors=("nothing to update: give State= or "
                                                        "Reason=",))
            return self._set_reasons(node_names, reason, msg.user)
        try:
            request = events.parse_admin_state(msg.state)
        except ValueError as exc:
            return m.UpdateResult(ok=False, errors=(str(exc),))
        if reason_required(request) and reason is None:
            return m.UpdateResult(ok=False, errors=(REASON_REQUIRED,))
        wall = self.wall()
        changed: list[str] = []
        errs: list[str] = []
        for name in node_names:
            node = self.nodes[name]
            ok, err = self._apply(
                node, events.AdminUpdate(now=wall, request=request, reason=reason, user=msg.user)
            )
            if err:
                errs.append(err)
            elif ok:
                changed.append(name)
        self.flush_programs()
        logs.event("update nodes", nodes=msg.node_names, state=request, user=msg.user or "-",
                   changed=len(changed), refused=len(errs))
        return m.UpdateResult(ok=not errs, changed=tuple(changed), errors=tuple(errs))

    def _set_reasons(self, node_names: list[str], text: str, user: str) -> m.UpdateResult:
        """Reason= without State=: a row of the node table like every other change."""
        event = events.ReasonUpdate(now=self.wall(), reason=text, user=user)
        changed: list[str] = []
        errs: list[str] = []
        for name in node_names:
            ok, err = self._apply(self.nodes[name], event)
            if err:
                errs.append(err)
            elif ok:
                changed.append(name)
        return m.UpdateResult(ok=not errs, changed=tuple(changed), errors=tuple(errs))

    def snapshot(self, metrics: bool = False) -> m.Snapshot:
        return self.views.snapshot(metrics)

    def snapshot_body(self, metrics: bool = False, fields: tuple[str, ...] = ()) -> bytes:
        return self.views.body(metrics, fields)

    def ping(self) -> m.Pong:
        return m.Pong(cluster_name=self.config.cluster_name, version=VERSION,
                      started_at=self.started_at)

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
        self.jobs.config_changed()
        # New timeouts apply to every node at once: re-arm them all (once per reconfigure).
        self.deadlines.clear()
        self.liveness.rearm_all()
        self.power.use_config()
        self.power.rearm()
        self._changed_all()
        push = m.ConfigPush(settings=self.settings, config_files=self._config_files,
                            config_hash=new.config_hash)
        pushed = sum(1 for node in nodes.values() if node.conn is not None and node.conn.push(push))
        self.flush_programs()
        logs.event("reconfigured", path=new.path, hash=new.config_hash[:12], nodes=len(nodes),
                   pushed=pushed)
        return m.ReconfigureResult(ok=True, config_hash=new.config_hash)

    # -- power save ------------------------------------------------------------------------

    def power_save_pass(self) -> list[str]:
        """See PowerSave.power_save_pass (ctld/powersave.py)."""
        return self.power.power_save_pass()

    # -- state save ------------------------------------------------------------------------

    def node_entry(self, node: NodeRecord) -> orjson.Fragment:
        """The node's state-file entry (also its journal record), encoded once per change."""
        entry = node.saved
        if entry is None:
            st = node.state
            state = names.to_json(st)
            state["cpus_total"] = st.cpus_total
            state["cpus_alloc"] = st.cpus_alloc
            hw = node.hardware_json
            entry = node.saved = orjson.Fragment(kept(orjson.dumps({
                "state": state,
                "hardware": orjson.Fragment(hw) if hw is not None else None,
                "boot_time": node.boot_time,
                "last_registration": node.last_registration,
                "slurmd_start_time": node.slurmd_start_time,
                "version": node.version,
                "last_busy": node.last_busy,
                "power_started": node.power_started,
                "power_action": node.power_action,
                "dynamic_conf": node.dynamic_conf,  # not None: a dynamic node (membership)
                "last_change": node.last_change,
            })))
        return entry

    def take_unsynced(self) -> list[dict[str, Any]]:
        """The journal records of every change not yet handed to the store."""
        records: list[dict[str, Any]] = [
            {"node": name, "entry": self.node_entry(node)}
            for name, node in self.unsynced_nodes.items() if self.nodes.get(name) is node]
        records += [{"job": self.jobs.saved_entry(job)} for job in self.unsynced_jobs.values()]
        self.unsynced_nodes = {}
        self.unsynced_jobs = {}
        return records

    def save_doc(self) -> dict[str, Any]:
        """The state-file document, for orjson: each node's entry is encoded once, when the node
        changed, and kept as an orjson.Fragment (bytes, nothing for the collector to walk)."""
        self.dirty = False
        out = {name: self.node_entry(node) for name, node in self.nodes.items()}
        return {"saved_at": self.wall(), "config_hash": self.config.config_hash, "nodes": out,
                "jobs": self.jobs.save_doc()}
