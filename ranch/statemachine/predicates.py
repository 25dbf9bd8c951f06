"""Node rules by name: what a node's state allows (new work, booting for work, suspend, the
keep-warm pool) and what an admin request needs. Written once here; the scheduler, power save,
/metrics and the table itself ask these rather than repeat the flag sets."""

from __future__ import annotations

from ranch.statemachine.events import REASON_REQUIRED
from ranch.statemachine.model import UNSCHEDULABLE_FLAGS, UP_BASES, Base, Flag, NodeState

# Flags that keep any new work off a node, whatever its power state.
NO_NEW_WORK = frozenset({Flag.DRAIN, Flag.FAIL, Flag.INVALID_REG, Flag.POWER_DOWN,
                         Flag.POWER_DRAIN, Flag.POWERING_DOWN, Flag.PENDING, Flag.REJECTED})
_NO_SUSPEND = frozenset({Flag.POWERED_DOWN, Flag.POWERING_UP, Flag.POWERING_DOWN,
                         Flag.COMPLETING, Flag.REBOOT_REQUESTED, Flag.REBOOT_ISSUED})
# Slurm's "usable" node for a keep-warm pool: idle, not down, draining or off.
_NOT_WARM = frozenset({Flag.POWERED_DOWN, Flag.POWERING_UP, Flag.POWERING_DOWN,
                       Flag.POWER_DOWN, Flag.DRAIN, Flag.FAIL, Flag.NO_RESPOND,
                       Flag.INVALID_REG, Flag.COMPLETING, Flag.PENDING, Flag.REJECTED})
_NOT_BOOTABLE = frozenset({Flag.DRAIN, Flag.FAIL, Flag.INVALID_REG, Flag.POWER_DOWN,
                           Flag.PENDING, Flag.REJECTED})


def takes_new_work(s: NodeState) -> bool:
    """The scheduler may place new work here now (free CPUs aside)."""
    return s.base in UP_BASES and s.flags.isdisjoint(UNSCHEDULABLE_FLAGS)


def takes_work_after_boot(s: NodeState) -> bool:
    """A powered-down or booting node that may be given a job (Slurm powers it up for it):
    up in base, and nothing but its power state keeps it out."""
    return s.base in UP_BASES and s.flags.isdisjoint(NO_NEW_WORK)


def may_be_suspended(s: NodeState) -> bool:
    """Power save may power this node down (idle or DOWN, nothing running or changing)."""
    return s.base in (Base.IDLE, Base.DOWN) and not s.cpus_alloc and s.flags.isdisjoint(
        _NO_SUSPEND)


def counts_as_warm(s: NodeState) -> bool:
    """Counts toward a keep-warm pool (SuspendExcNodes=hostlist:N)."""
    return s.base is Base.IDLE and not s.cpus_alloc and s.flags.isdisjoint(_NOT_WARM)


def may_boot_for_pool(s: NodeState) -> bool:
    """A powered-down idle node a keep-warm pool may boot (it could serve once up)."""
    return (Flag.POWERED_DOWN in s.flags and s.base is Base.IDLE
            and s.flags.isdisjoint(_NOT_BOOTABLE))


def is_unusable(s: NodeState) -> bool:
    """Counted as "other" (not idle) by sinfo's A/I/O/T and /metrics: down, never heard from,
    not in the cluster yet, drained or failed."""
    return s.base in (Base.DOWN, Base.UNKNOWN, Base.FUTURE) or not s.flags.isdisjoint(
        {Flag.DRAIN, Flag.FAIL})


def reason_required(request: str) -> bool:
    return request.upper() in REASON_REQUIRED
