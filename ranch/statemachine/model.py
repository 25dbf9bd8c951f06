"""A node's state: base state + flags + the reason it is out of service (frozen data only)."""

from __future__ import annotations

import enum

import attrs


class Base(enum.Enum):
    """Slurm's base node states (Ranch never uses ERROR)."""

    UNKNOWN = "UNKNOWN"
    IDLE = "IDLE"
    ALLOCATED = "ALLOCATED"
    MIXED = "MIXED"
    DOWN = "DOWN"
    FUTURE = "FUTURE"

    __hash__ = object.__hash__  # members are singletons; identity hash keeps set ops cheap


class Flag(enum.Enum):
    """Flags that combine with a base state; the value is Slurm's name in the complete string."""

    CLOUD = "CLOUD"
    COMPLETING = "COMPLETING"
    DRAIN = "DRAIN"
    INVALID_REG = "INVALID_REG"
    FAIL = "FAIL"
    MAINT = "MAINTENANCE"  # in a maintenance reservation now (`maint`, `$`; issue 33)
    POWER_DOWN = "POWER_DOWN"  # pending power down (`!`)
    POWER_DRAIN = "POWER_DRAIN"  # the DRAIN was set by POWER_DOWN_ASAP and ends with the suspend
    POWERED_DOWN = "POWERED_DOWN"
    REBOOT_REQUESTED = "REBOOT_REQUESTED"  # `rcontrol reboot`: reboot once idle (`@`)
    REBOOT_ISSUED = "REBOOT_ISSUED"  # RebootProgram sent, waiting for the new boot (`^`)
    RESERVED = "RESERVED"  # in a reservation now (`resv` when idle; issue 33)
    NO_RESPOND = "NOT_RESPONDING"
    POWERING_UP = "POWERING_UP"
    POWERING_DOWN = "POWERING_DOWN"
    # Membership (issue 13), Ranch's own: waiting for `rcontrol approve`; refused by an admin.
    PENDING = "PENDING"
    REJECTED = "REJECTED"
    # A reboot's plan (Slurm keeps it as the node's next_state): what the node becomes once it
    # is back, and whether the ASAP drain is the reboot's own. Saved with the state, never shown.
    NEXT_RESUME = "NEXT_RESUME"
    NEXT_DOWN = "NEXT_DOWN"
    REBOOT_DRAIN = "REBOOT_DRAIN"
    # Back from a reboot (or a power-save resume) and held out until the health check on the
    # new boot passes (HealthCheckProgram set; issue 33's reboot until healthy).
    BOOT_CHECK = "BOOT_CHECK"

    __hash__ = object.__hash__


# Flags that are bookkeeping, not state: left out of every name, listing and filter.
REBOOT_PLAN = frozenset({Flag.NEXT_RESUME, Flag.NEXT_DOWN, Flag.REBOOT_DRAIN})
HIDDEN_FLAGS = REBOOT_PLAN | {Flag.BOOT_CHECK}

# Slurm's order in the "+"-joined complete string (mostly alphabetical, NOT_RESPONDING and
# POWERING_* last); the enum above is declared in that order.
FLAG_ORDER: tuple[Flag, ...] = tuple(Flag)
SHOWN_ORDER: tuple[Flag, ...] = tuple(f for f in Flag if f not in HIDDEN_FLAGS)


class ReasonSource(enum.Enum):
    """Who set a reason; health-check recovery clears only HEALTH_CHECK reasons."""

    ADMIN = "admin"
    HEALTH_CHECK = "health_check"
    CONTROLLER = "controller"
    CONFIG = "config"

    __hash__ = object.__hash__


@attrs.frozen(slots=True)
class Reason:
    source: ReasonSource
    text: str
    time: float  # wall clock, epoch seconds
    user: str | None = None


UP_BASES = frozenset({Base.IDLE, Base.ALLOCATED, Base.MIXED})

# Any of these keeps a node out of the scheduler's reach.
UNSCHEDULABLE_FLAGS = frozenset(
    {
        Flag.DRAIN,
        Flag.FAIL,
        Flag.NO_RESPOND,
        Flag.POWERED_DOWN,
        Flag.POWERING_UP,
        Flag.POWERING_DOWN,
        Flag.POWER_DOWN,
        Flag.POWER_DRAIN,
        Flag.INVALID_REG,
        Flag.PENDING,
        Flag.REJECTED,
    }
)


@attrs.frozen(slots=True)
class NodeState:
    name: str
    base: Base
    flags: frozenset[Flag]
    reason: Reason | None
    cpus_total: int
    cpus_alloc: int = 0

    @property
    def schedulable(self) -> bool:
        """ranch.statemachine.predicates.takes_new_work, as a property."""
        from ranch.statemachine.predicates import takes_new_work

        return takes_new_work(self)


def derive_base(cpus_alloc: int, cpus_total: int) -> Base:
    """IDLE / MIXED / ALLOCATED follow from the allocation, never from a request."""
    if cpus_alloc <= 0:
        return Base.IDLE
    if cpus_alloc >= cpus_total:
        return Base.ALLOCATED
    return Base.MIXED


CONFIG_STATES = ("UNKNOWN", "DOWN", "DRAIN", "FAIL", "FAILING", "FUTURE", "CLOUD")


def initial_state(
    name: str,
    cpus_total: int,
    config_state: str = "UNKNOWN",
    reason: str | Reason | None = None,
    now: float = 0.0,
) -> NodeState:
    """The state a node starts in from its cluster.conf State= (and DownNodes Reason=)."""
    cs = config_state.upper()
    if cs not in CONFIG_STATES:
        raise ValueError(
            f"node {name}: unknown config State={config_state!r} "
            f"(expected one of {', '.join(CONFIG_STATES)})"
        )
    if cs == "FUTURE":
        return NodeState(name, Base.FUTURE, frozenset(), None, cpus_total)
    if cs == "CLOUD":
        return NodeState(
            name, Base.IDLE, frozenset({Flag.CLOUD, Flag.POWERED_DOWN}), None, cpus_total
        )
    if cs == "UNKNOWN":
        return NodeState(name, Base.UNKNOWN, frozenset(), None, cpus_total)
    if isinstance(reason, Reason):
        why = reason
    else:
        why = Reason(ReasonSource.CONFIG, reason or f"State={cs} in config", now, None)
    if cs == "DOWN":
        return NodeState(name, Base.DOWN, frozenset(), why, cpus_total)
    flag = Flag.DRAIN if cs == "DRAIN" else Flag.FAIL
    return NodeState(name, Base.UNKNOWN, frozenset({flag}), why, cpus_total)
