"""The accounting records, frozen: what slurmdbd's tables hold for one site (Slurm 22.05)."""

from __future__ import annotations

import attrs

ADMIN_LEVELS = ("None", "Operator", "Administrator")
# The association limits sacctmgr sets (`set NAME=VALUE`), by their canonical names
ASSOC_LIMITS = ("GrpTRES", "GrpJobs", "GrpSubmitJobs", "GrpWall", "GrpTRESMins", "GrpTRESRunMins",
                "MaxTRES", "MaxTRESPerNode", "MaxJobs", "MaxSubmitJobs", "MaxWall", "MaxTRESMins")
# An association's Priority (sacctmgr `set Priority=N`, PriorityWeightAssoc's factor): kept
# with the limits, as slurmdbd keeps it beside them, and inherited the same way
PRIORITY = "Priority"
# The association limits a child takes from its parent when it sets none of its own
# (as_mysql_assoc.c copies the max_* fields and priority down; the Grp* ones are the group's)
INHERITED = ("MaxTRES", "MaxTRESPerNode", "MaxJobs", "MaxSubmitJobs", "MaxWall", "MaxTRESMins",
             PRIORITY)
QOS_LIMITS = ("GrpTRES", "GrpTRESMins", "GrpTRESRunMins", "GrpJobs", "GrpSubmitJobs", "GrpWall",
              "MaxTRES", "MaxTRESPerNode", "MaxTRESMins", "MaxWall", "MaxTRESPerUser",
              "MaxJobsPerUser", "MaxSubmitJobsPerUser", "MaxTRESPerAccount", "MaxJobsPerAccount",
              "MaxSubmitJobsPerAccount", "MinTRES")
QOS_FLAGS = ("DenyOnLimit", "EnforceUsageThreshold", "NoDecay", "NoReserve", "OverPartQOS",
             "PartitionMaxNodes", "PartitionMinNodes", "PartitionTimeLimit", "RequiresReservation",
             "UsageFactorSafe")
PREEMPT_MODES = ("cluster", "off", "cancel", "requeue", "suspend")

FS_PARENT = 0x7FFFFFFF  # Fairshare=parent (SLURMDB_FS_USE_PARENT)
Limits = tuple[tuple[str, str], ...]  # (canonical name, value as shown), sorted by name


def limits(items: dict[str, str]) -> Limits:
    return tuple(sorted((k, v) for k, v in items.items() if v != ""))


@attrs.frozen
class Cluster:
    name: str


@attrs.frozen
class Account:
    name: str
    description: str
    organization: str


@attrs.frozen
class User:
    name: str
    default_account: str
    admin_level: str = "None"


@attrs.frozen
class Assoc:
    """One association: (cluster, account, user, partition); user "" is the account's own.
    `seq` (the command that made it) orders siblings as slurmdbd's lft does: a later command's
    first, one command's in the order it made them (by id)."""
    id: int
    cluster: str
    account: str
    user: str = ""
    partition: str = ""
    parent: str = ""  # the parent account of an account's own association
    shares: int = 1
    qos: tuple[str, ...] = ()  # empty: the parent's
    def_qos: str = ""
    limits: Limits = ()
    seq: int = 0

    def limit(self, name: str) -> str:
        return dict(self.limits).get(name, "")


@attrs.frozen
class Qos:
    id: int
    name: str
    description: str
    priority: int = 0
    flags: tuple[str, ...] = ()
    usage_factor: float = 1.0
    usage_threshold: str = ""
    grace_time: int = 0  # seconds
    preempt: tuple[str, ...] = ()
    preempt_mode: str = "cluster"
    preempt_exempt_time: str = ""
    limits: Limits = ()

    def limit(self, name: str) -> str:
        return dict(self.limits).get(name, "")
