"""What runs across the owners, in the order it must: the deadline task's dispatch, the start
after a restore, taking back a saved state, reconfigure, and the state file's and the journal's
parts gathered from each owner. Each is built over owners the composition root made."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ranch.conf.model import ClusterConfig
from ranch.ctld import gctune, logs
from ranch.ctld.accounts.store import Accounts
from ranch.ctld.compose.controller import VERSION
from ranch.ctld.compose.jobside import JobParts
from ranch.ctld.compose.usage import settings_of
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.nodes import configdump, savedstate
from ranch.ctld.nodes.hardware import HardwareShelf
from ranch.ctld.nodes.liveness import Liveness
from ranch.ctld.nodes.membership import Membership
from ranch.ctld.nodes.powersave import PowerSave
from ranch.ctld.nodes.reboots import Reboots
from ranch.ctld.nodes.registry import NodeRegistry
from ranch.ctld.nodes.reservations import DEADLINE as RESV_DEADLINE
from ranch.ctld.nodes.reservations import Reservations
from ranch.ctld.nodes.snapshot import EXPIRY_KEY as VIEWS_EXPIRY
from ranch.ctld.nodes.snapshot import Snapshots
from ranch.ctld.site import Site
from ranch.ctld.state.changelog import ChangeLog, Taken
from ranch.protocol import messages as m
from ranch.statemachine import effects


def effect_router(power: PowerSave, reboots: Reboots,
                  parts: JobParts) -> Callable[[Any, Any], None]:
    """Where the node table's effects go (the registry keeps those on the node's connection)."""

    def route(node: Any, eff: Any) -> None:
        if isinstance(eff, effects.KillJobs):
            parts.for_nodes.node_lost(node, eff.requeue, eff.wait)
        elif isinstance(eff, effects.RunSuspendProgram):
            power.queue("suspend", node)
        elif isinstance(eff, effects.RunResumeProgram):
            power.queue_resume(node)
        elif isinstance(eff, effects.RunResumeFailProgram):
            power.queue("resume_fail", node)
        elif isinstance(eff, effects.ScheduleTimeout):
            if eff.kind == "reboot":
                reboots.schedule_timeout(node)
            else:
                power.schedule_timeout(node, eff.kind)
        elif isinstance(eff, effects.RunRebootProgram):
            reboots.run_program(node)

    return route


def deadline_dispatcher(registry: NodeRegistry, liveness: Liveness, power: PowerSave,
                        reboots: Reboots, reservations: Reservations, parts: JobParts,
                        after_change: Callable[[], None],
                        views: Snapshots | None = None) -> Callable[[Iterable[Any]], None]:
    """The deadline task's callback: heartbeat stages, power and reboot timeouts, the
    reservations' windows and the jobs' own deadlines whose time came (a stall of the
    controller's own is credited to every node first)."""

    def on_deadlines(keys: Iterable[Any]) -> None:
        now, wall = registry.clock(), registry.wall()
        for name, kind in liveness.woke(keys, now):
            if (name, kind) == RESV_DEADLINE:  # a reservation's window opens or closes
                reservations.refresh()
                continue
            if (name, kind) == VIEWS_EXPIRY and views is not None:  # snapshots unasked for
                if views.expire(now):
                    gctune.release_free_memory()  # the records' key tables: MBs of C heap
                continue
            if parts.on_deadline(name, kind):  # BeginTime, InactiveLimit, a lowered limit
                continue
            node = registry.nodes.get(name)
            if node is None:
                continue
            if kind == "hb":
                liveness.fired(node, now, wall)
            elif kind in ("suspend", "resume"):
                power.fired(node, kind)
            elif kind == "reboot":
                reboots.fired(node)
        after_change()

    return on_deadlines


def restorer(registry: NodeRegistry, membership: Membership, liveness: Liveness,
             hardware: HardwareShelf, reservations: Reservations, parts: JobParts,
             accounts: Accounts, known: list[str]) -> Callable[[dict[str, Any]], None]:
    """Take back a saved state: the accounting tree first (a damaged one refuses the start
    before anything else is taken), the nodes (`known` gets the names it knew, for the
    start), then the jobs and the reservations. A state with no node (a journal of
    submissions only) gives back its jobs and reservations alone."""

    def restore(doc: dict[str, Any]) -> None:
        accounts.restore(doc.get("accounts"))
        nodes = bool(doc.get("nodes"))
        if nodes:
            known[:] = savedstate.restore(registry.nodes, doc, now=registry.clock(),
                                          hardware=hardware, remake=membership.restore_dynamic)
            liveness.restored(doc.get("saved_at"))
        parts.restore(doc.get("jobs"))
        reservations.restore(doc.get("reservations"))
        if nodes:
            registry.changed_all()

    return restore


def starter(membership: Membership, liveness: Liveness, power: PowerSave, reboots: Reboots,
            reservations: Reservations, known: list[str]) -> Callable[..., None]:
    """Arm the failure-detection deadline of every node that is expected to talk and the
    power timeouts of nodes caught mid power-up/down."""

    def start(grace: float = 0.0) -> None:
        """`grace`: seconds before any node's silence starts to count (a takeover,
        ctld/pair/controller.py)."""
        membership.on_start(known)  # nodes the saved state did not know wait for approval
        liveness.start(grace)
        power.rearm()  # nodes caught mid power-up/down by a restart
        reboots.rearm()  # nodes caught waiting for their new boot
        reservations.refresh()  # windows that opened or closed while it was away

    return start


def reconfigurer(registry: NodeRegistry, membership: Membership, liveness: Liveness,
                 power: PowerSave, reboots: Reboots, reservations: Reservations,
                 deadlines: Deadlines, parts: JobParts, accounts: Accounts,
                 after_change: Callable[[], None]
                 ) -> Callable[[ClusterConfig], m.ReconfigureResult]:
    """Switch to a validated new config: reload nodes, add/remove, push to connected nodes."""

    def apply_config(new: ClusterConfig) -> m.ReconfigureResult:
        added = registry.reload(new, membership.carry_dynamic)
        membership.hold_new(added)
        # New timeouts apply to every node at once: re-arm them all (once per reconfigure).
        deadlines.clear()
        parts.for_nodes.config_changed(new)  # after the clear: it re-arms the jobs' own
        liveness.rearm_all()
        power.use_config()
        power.rearm()
        reboots.rearm()  # a reboot issued before it still times out
        reservations.refresh()  # and a window still opens and closes on time
        accounts.use_config(new.cluster_name, new.accounting.enabled, settings_of(new))
        registry.changed_all()
        pushed = registry.push_config()
        after_change()
        logs.event("reconfigured", path=new.path, hash=new.config_hash[:12],
                   nodes=len(registry.nodes), pushed=pushed)
        return m.ReconfigureResult(ok=True, config_hash=new.config_hash)

    return apply_config


def saved_state(changes: ChangeLog, registry: NodeRegistry, reservations: Reservations,
                parts: JobParts, accounts: Accounts) -> tuple[Callable[[], dict[str, Any]],
                                          Callable[[Taken], list[dict[str, Any]]]]:
    """(the state-file document, the journal records of changes taken from the change log):
    each owner gives its own part."""

    def save_doc() -> dict[str, Any]:
        changes.saved()
        doc = registry.save_doc()
        doc["jobs"] = parts.save_doc()
        doc["reservations"] = reservations.save_doc()
        tree = accounts.save_doc()
        if tree is not None:
            doc["accounts"] = tree
        return doc

    def journal_records(taken: Taken) -> list[dict[str, Any]]:
        return (registry.journal_records(taken) + parts.journal_records(taken)
                + reservations.journal_records(taken) + accounts.journal_records(taken))

    return save_doc, journal_records


def reservation(reservations: Reservations, after_change: Callable[[], None],
                msg: m.ReservationRequest) -> m.ReservationReply:
    """rcontrol create|update|delete|show reservation: a window's nodes change flags."""
    reply = reservations.handle(msg)
    after_change()
    return reply


def config_in_force(registry: NodeRegistry, power: PowerSave, site: Site) -> m.ConfigDump:
    """rcontrol show config: the file's keys, the power settings in force, and where this
    controller lives (its address, key, state dir and log file)."""
    return configdump.in_force(power.config_dump(registry.config_dump),
                               server_addr=site.server_addr, key_file=site.key_file,
                               state_dir=site.state_dir, log_file=site.log_file)


def ping(registry: NodeRegistry, started_at: float) -> m.Pong:
    return m.Pong(cluster_name=registry.config.cluster_name, version=VERSION,
                  started_at=started_at)
