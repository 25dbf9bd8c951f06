"""The composition root: every owner of a controller built once, side by side, each handed the
few things it uses (a narrow port, plain values, callables); circular needs are closures over
owners built later in the same function. The daemon (ctld/daemon.py) and in-process tests build a
controller only through `assemble`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import attrs
import trio

from ranch.assoc.partpolicy import PartPolicy
from ranch.assoc.submitlimits import Groups
from ranch.assoc.tally import Ask
from ranch.assoc.usage import RunningJob
from ranch.conf.model import ClusterConfig
from ranch.ctld.accounts.store import Accounts
from ranch.ctld.compose import coordinate, usage
from ranch.ctld.compose.controller import VERSION, Controller
from ranch.ctld.compose.jobs import build_jobs, nodes_of
from ranch.ctld.compose.jobside import JobParts, parts_of
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.jobs.history import FileHistory
from ranch.ctld.nodes import nodeupdates
from ranch.ctld.nodes.downguard import DownGuard
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.nodes.guards import DrainGuard, GuardDesk
from ranch.ctld.nodes.hardware import HardwareShelf
from ranch.ctld.nodes.liveness import Liveness
from ranch.ctld.nodes.membership import Membership
from ranch.ctld.nodes.node import NodeRecord
from ranch.ctld.nodes.nodetraffic import NodeTraffic
from ranch.ctld.nodes.powerpass import PowerPass
from ranch.ctld.nodes.powersave import PowerSave
from ranch.ctld.nodes.reboots import Reboots
from ranch.ctld.nodes.registry import Hooks, NodeRegistry
from ranch.ctld.nodes.reservations import Reservations
from ranch.ctld.nodes.snapshot import Snapshots
from ranch.ctld.site import Site
from ranch.ctld.state import statefile
from ranch.ctld.state.changelog import ChangeLog

__all__ = ["VERSION", "Controller", "assemble"]


def _job_side(registry: NodeRegistry, reservations: Reservations, base: _Base,
              spawn: Callable[..., None] | None, history: FileHistory | None,
              programs: Callable[[], None], accounts: Accounts) -> JobParts:
    """The job side, given what it reads and calls of the node side: the registry's doors
    (nodes, members_gen, partition_nodes, set_use, push, apply_event), the reservations'
    `blocked` and `windows` (backfill's map), and plain values (ctld/compose/jobs.py
    build_jobs). `programs`: power save's flush, run after the pass a submission or a job
    command runs; `accounts`: the tree AccountingStorageEnforce checks a submission against
    (as the config in force says)."""

    policies: list[Any] = [None, {}]  # (the partitions they were read from, by name)

    def parts() -> dict[str, PartPolicy]:
        """Each partition's QOS= and Allow/Deny words, read again when the config changes."""
        config = registry.config.partitions
        if policies[0] is not config:
            policies[:] = [config, {p.name: PartPolicy.of(p.name, p.options) for p in config}]
        return policies[1]

    def admit(user: str, account: str, partitions: tuple[str, ...], qos: str,
              reservation: str, count: int,
              ask: Ask | None = None,
              groups: Callable[[], Groups] | None = None
              ) -> tuple[str, str, int | None] | str | None:
        return accounts.admit(registry.config.accounting.enforce, user, account, partitions,
                              qos, reservation, count, ask, parts(),
                              registry.config.jobs.enforce_part_limits, groups)

    def limits() -> Callable[[str, str, str, str], Any] | None:
        return accounts.rule_of(registry.config.accounting.enforce, parts())

    side = build_jobs(nodes_of(registry, reservations.blocked), config=registry.config,
                      clock=base.clock, wall=base.wall, deadlines=base.deadlines,
                      changes=base.changes, site=base.site, epoch=base.epoch, spawn=spawn,
                      history=history, programs=programs, windows=reservations.windows,
                      admit=admit, limits=limits, record=base.eventlog.add,
                      tree=lambda: (accounts.db, accounts.usage.assocs) if accounts.enabled
                      else None,
                      qos=lambda: accounts.db.qos if accounts.enabled else None)
    return parts_of(side)


def _accounts(config: ClusterConfig, base: _Base,
              running: Callable[[float], list[RunningJob]],
              history: FileHistory | None) -> Accounts:
    """The accounting tree's owner, before the job side: its submissions are checked on it;
    `running` reads the job side's running jobs for usage accrual (built after it)."""
    state_dir = base.site.state_dir
    accounts = Accounts(
        cluster=config.cluster_name, enabled=config.accounting.enabled, changes=base.changes,
        where=statefile.state_path(state_dir) if state_dir else "the saved state",
        settings=usage.settings_of(config),
        running=lambda: running(accounts.usage.last_decay), wall=base.wall,
        history=None if history is None else (
            lambda: usage.history_jobs(history.read(), config)))
    return accounts


def assemble(
    config: ClusterConfig,
    *,
    clock: Callable[[], float] = trio.current_time,
    wall: Callable[[], float] = time.time,
    spawn: Callable[..., None] | None = None,
    changes: ChangeLog | None = None,
    epoch: int = 0,
    site: Site | None = None,
    history: FileHistory | None = None,
    on_events_unsaved: Callable[[], None] = lambda: None,
) -> Controller:
    """`spawn` starts a task in the daemon's nursery (None: in-process tests, no programs
    run); `changes`: the change log the daemon builds with its store's callbacks (without one,
    pushes leave at once); `epoch`: the seat this controller holds (ctld/pair/controller.py; 0:
    none); `site`: where it lives; `history`: finished jobs on disk (racct);
    `on_events_unsaved`: the event log has records to write."""
    base = _Base(clock=clock, wall=wall, site=site if site is not None else Site(),
                 changes=changes if changes is not None else ChangeLog(), epoch=epoch,
                 eventlog=EventLog(wall=wall, on_unsaved=on_events_unsaved), started_at=wall())
    times = {"clock": clock, "wall": wall}
    deadlines, eventlog = base.deadlines, base.eventlog
    # built below, reached before by the closures handed to those built first
    parts: JobParts
    power: PowerSave
    liveness: Liveness
    reboots: Reboots
    route: Callable[[NodeRecord, Any], None]

    def after_change() -> None:
        """A scheduling pass that is due runs first: placing work may power nodes up."""
        parts.run_pass()
        power.flush()

    def holding(names: Sequence[str]) -> list[tuple[int, list[str]]]:
        return parts.for_nodes.jobs_holding(names)

    def kick() -> None:
        parts.for_nodes.kick()

    registry = NodeRegistry(config, **times, changes=base.changes, eventlog=eventlog,
                            hooks=Hooks(arm=lambda node: liveness.arm(node), kick=kick,
                                        effect=lambda node, eff: route(node, eff),
                                        rebooting=lambda node: reboots.after_change(node)))
    power = PowerSave(registry, **times, deadlines=deadlines, site=base.site, spawn=spawn,
                      holding=holding, job_partition=lambda jid: parts.job_partition(jid))
    down = DownGuard(registry, **times, eventlog=eventlog, arm=lambda node: liveness.arm(node))
    liveness = Liveness(registry, **times, deadlines=deadlines, eventlog=eventlog, guard=down,
                        real_clocks=clock is trio.current_time and wall is time.time)
    reboots = Reboots(registry, **times, deadlines=deadlines, push=registry.push,
                      after_change=after_change)
    reservations = Reservations(registry, **times, deadlines=deadlines, changes=base.changes,
                                eventlog=eventlog, kick=kick,
                                running_until=lambda: parts.for_nodes.jobs_running_until())
    accounts = _accounts(config, base, lambda since: usage.running_jobs(parts.side, since),
                         history)
    parts = _job_side(registry, reservations, base, spawn, history, power.flush, accounts)
    route = coordinate.effect_router(power, reboots, parts)
    return _controller(base, registry, parts, power, down, liveness, reboots, reservations,
                       accounts, after_change=after_change, holding=holding)


@attrs.frozen
class _Base:
    """What every owner may be given: clocks, where the controller lives, the change log, the
    seat, the event log, the one deadline heap, the hardware shelf."""

    clock: Callable[[], float]
    wall: Callable[[], float]
    site: Site
    changes: ChangeLog
    epoch: int
    eventlog: EventLog
    started_at: float
    deadlines: Deadlines = attrs.field(factory=Deadlines)
    hardware: HardwareShelf = attrs.field(factory=HardwareShelf)


def _controller(base: _Base, registry: NodeRegistry, parts: JobParts, power: PowerSave,
                down: DownGuard, liveness: Liveness, reboots: Reboots,
                reservations: Reservations, accounts: Accounts, *, after_change: Callable[[], None],
                holding: Callable[[Sequence[str]], list[tuple[int, list[str]]]]) -> Controller:
    """The owners nothing built earlier reaches, and the coordinators over them all."""
    times = {"clock": base.clock, "wall": base.wall}
    eventlog, deadlines, changes, site = base.eventlog, base.deadlines, base.changes, base.site
    drain_guard = DrainGuard(registry, **times, eventlog=eventlog)
    membership = Membership(registry, **times, deadlines=deadlines, eventlog=eventlog,
                            jobs_holding=holding, after_change=after_change)
    traffic = NodeTraffic(registry, **times, epoch=base.epoch, changes=changes,
                          eventlog=eventlog, hardware=base.hardware, deadlines=deadlines,
                          arm=liveness.arm, admit=membership.admit, health=drain_guard.health,
                          jobs=parts.for_nodes, after_change=after_change)
    views = Snapshots(registry, changes=changes, **times, timer=deadlines)
    known: list[str] = []  # the nodes the saved state knew (restore, then start)
    save_doc, journal_records = coordinate.saved_state(changes, registry, reservations, parts,
                                                       accounts)
    return Controller(
        registry=registry, jobs=parts.side, traffic=traffic, membership=membership,
        liveness=liveness, drain_guard=drain_guard,
        guards=GuardDesk(down=down, drain=drain_guard, stalls=liveness.stalls,
                         nodes=registry.nodes, after_change=after_change),
        power=power,
        power_pass=PowerPass(registry, **times, budget=power.suspend_budget, holding=holding,
                             after_change=after_change),
        reboots=reboots, reservations=reservations, accounts=accounts,
        views=views, eventlog=eventlog,
        hardware=base.hardware, deadlines=deadlines, changes=changes, site=site,
        after_change=after_change,
        on_deadlines=coordinate.deadline_dispatcher(registry, liveness, power, reboots,
                                                    reservations, parts, after_change, views),
        start=coordinate.starter(membership, liveness, power, reboots, reservations, known),
        restore=coordinate.restorer(registry, membership, liveness, base.hardware,
                                    reservations, parts, accounts, known),
        apply_config=coordinate.reconfigurer(registry, membership, liveness, power, reboots,
                                             reservations, deadlines, parts, accounts,
                                             after_change),
        save_doc=save_doc, journal_records=journal_records,
        update_nodes=partial(nodeupdates.update_nodes, registry, wall=base.wall,
                             after_change=after_change),
        reservation=partial(coordinate.reservation, reservations, after_change),
        config_in_force=partial(coordinate.config_in_force, registry, power, site),
        ping=partial(coordinate.ping, registry, base.started_at))
