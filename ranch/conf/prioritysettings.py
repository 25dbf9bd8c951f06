"""priority/multifactor's keys (PriorityType, PriorityWeight*, PriorityFlags...): typed once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ranch.conf.model import PrioritySettings
from ranch.conf.values import BadValue, as_billing_weights, as_bool, as_enum, as_enum_list, as_int

PRIORITY_TYPES: tuple[str, ...] = ("PRIORITY/BASIC", "PRIORITY/MULTIFACTOR")
# slurm.conf.5 (22.05)'s PriorityFlags; anything else slurmctld refuses
PRIORITY_FLAGS: tuple[str, ...] = (
    "ACCRUE_ALWAYS", "CALCULATE_RUNNING", "DEPTH_OBLIVIOUS", "NO_FAIR_TREE", "INCR_ONLY",
    "MAX_TRES", "NO_NORMAL_ALL", "NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS",
    "NO_NORMAL_TRES", "SMALL_RELATIVE_TO_TIME")
WEIGHTS = ("PriorityWeightAge", "PriorityWeightAssoc", "PriorityWeightFairshare",
           "PriorityWeightJobSize", "PriorityWeightPartition", "PriorityWeightQOS")
TRES_NAMES = ("cpu", "mem", "node", "billing", "energy", "fs/disk", "vmem", "pages")


def _weight(text: str) -> int:
    return as_int(text, 0, 2**32 - 1)  # a uint32, as slurmctld keeps it


def _flags(text: str) -> tuple[str, ...]:
    words = as_enum_list(text, PRIORITY_FLAGS)
    if "NO_NORMAL_ALL" in words:
        words = (*words, "NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES")
    return tuple(dict.fromkeys(words))


def _tres_weights(text: str) -> tuple[tuple[str, float], ...]:
    """PriorityWeightTRES: `CPU=1000,Mem=2000,GRES/gpu=3000` (a TRES slurmctld does not know
    is refused, as slurm_get_tres_weight_array with fail set)."""
    got = as_billing_weights(text)
    offset = 0
    for (name, _), part in zip(got, text.split(","), strict=False):
        if name not in TRES_NAMES and not name.startswith(("gres/", "license/")):
            raise BadValue(f"invalid TRES {name!r} in PriorityWeightTRES", offset)
        offset += len(part) + 1
    return got


def _max_age(text: str) -> int:
    from ranch.conf.values import as_minutes_to_seconds

    return as_minutes_to_seconds(text)


PRIORITY_CONVERT: dict[str, Callable[[str], Any]] = {
    "PriorityType": lambda s: as_enum(s, PRIORITY_TYPES).lower(),
    **{name: _weight for name in WEIGHTS},
    "PriorityWeightTRES": _tres_weights,
    "PriorityFlags": _flags,
    "PriorityMaxAge": _max_age,
    "PriorityFavorSmall": as_bool,
    "FairShareDampeningFactor": lambda s: as_int(s, 1, 2**16 - 1),
}


def priority_settings(g: Callable[[str, Any], Any], scheduler_params: str) -> PrioritySettings:
    """The settings from the typed keys (`g`: typed_global) and SchedulerParameters' words
    (enable_user_top)."""
    words = {w.strip().lower() for w in scheduler_params.split(",")}
    age, assoc, fairshare, jobsize, partition, qos = (g(n, 0) for n in WEIGHTS)
    return PrioritySettings(
        g("PriorityType", "priority/basic"), age, assoc, fairshare, jobsize, partition, qos,
        tres=g("PriorityWeightTRES", ()), flags=g("PriorityFlags", ()),
        max_age=g("PriorityMaxAge", 7 * 86400), favor_small=g("PriorityFavorSmall", False),
        damp=g("FairShareDampeningFactor", 1), user_top="enable_user_top" in words)
