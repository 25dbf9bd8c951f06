"""The controller as the composition root built it: its owners, side by side, and the
coordinator callables that sequence them (ctld/compose/__init__.py assemble)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ranch import __version__
from ranch.conf.model import ClusterConfig
from ranch.ctld.accounts.store import Accounts
from ranch.ctld.compose.jobs import JobSide
from ranch.ctld.deadlines import Deadlines
from ranch.ctld.nodes.eventlog import EventLog
from ranch.ctld.nodes.guards import DrainGuard, GuardDesk
from ranch.ctld.nodes.hardware import HardwareShelf
from ranch.ctld.nodes.liveness import Liveness
from ranch.ctld.nodes.membership import Membership
from ranch.ctld.nodes.nodetraffic import NodeTraffic
from ranch.ctld.nodes.powerpass import PowerPass
from ranch.ctld.nodes.powersave import PowerSave
from ranch.ctld.nodes.reboots import Reboots
from ranch.ctld.nodes.registry import NodeRegistry
from ranch.ctld.nodes.reservations import Reservations
from ranch.ctld.nodes.snapshot import Snapshots
from ranch.ctld.site import Site
from ranch.ctld.state.changelog import ChangeLog, Taken
from ranch.protocol import messages as m

VERSION = __version__  # rctld's, as `rcontrol ping` and `rctld --version` say it


@attrs.frozen
class Controller:
    """Every owner of one controller and what runs across them."""

    # -- the owners ---------------------------------------------------------------------------
    registry: NodeRegistry  # every node's record and state (ctld/nodes/registry.py)
    jobs: JobSide  # the job store and its components (ctld/compose/jobs.py)
    traffic: NodeTraffic  # what nodes send (ctld/nodes/nodetraffic.py)
    membership: Membership  # approval, rejection, dynamic nodes (ctld/nodes/membership.py)
    liveness: Liveness  # failure detection, stalls, DownGuard (ctld/nodes/liveness.py)
    drain_guard: DrainGuard  # the breaker over health drains (ctld/nodes/guards.py)
    guards: GuardDesk  # rcontrol show|confirm|reset guards
    power: PowerSave  # power programs, rates, timeouts (ctld/nodes/powersave.py)
    power_pass: PowerPass  # which idle nodes power down (ctld/nodes/powerpass.py)
    reboots: Reboots  # rcontrol reboot, RebootProgram (ctld/nodes/reboots.py)
    reservations: Reservations  # maintenance windows (ctld/nodes/reservations.py)
    accounts: Accounts  # the accounting tree racctmgr reads and changes (ctld/accounts/)
    views: Snapshots  # what rinfo and the web page read (ctld/nodes/snapshot.py)
    eventlog: EventLog  # membership and state changes (ctld/nodes/eventlog.py)
    hardware: HardwareShelf  # what nodes report, kept deflated (ctld/nodes/hardware.py)
    deadlines: Deadlines  # every timer, one task (ctld/deadlines.py)
    changes: ChangeLog  # what changed since the last durable write (ctld/state/changelog.py)
    site: Site  # where this controller lives
    # -- the coordinators ---------------------------------------------------------------------
    after_change: Callable[[], None]  # the scheduling pass if due, then power's programs
    on_deadlines: Callable[[Iterable[Any]], None]  # the deadline task's callback
    start: Callable[..., None]  # start(grace=0.0): arm every timer after restore
    restore: Callable[[dict[str, Any]], None]  # take back a saved state (every owner's part)
    apply_config: Callable[[ClusterConfig], m.ReconfigureResult]  # reconfigure
    save_doc: Callable[[], dict[str, Any]]  # the state-file document, each owner's part
    journal_records: Callable[[Taken], list[dict[str, Any]]]  # each owner's records
    # -- admin requests that span owners ---------------------------------------------------------
    update_nodes: Callable[[m.UpdateNodes], m.UpdateResult]
    reservation: Callable[[m.ReservationRequest], m.ReservationReply]
    config_in_force: Callable[[], m.ConfigDump]
    ping: Callable[[], m.Pong]
