"""Settings that slurmctld 22.05 refuses at start, with what it logs (checked against 22.05.8).

Ranch itself runs such a file (it warns, or errors under --strict), so that `rctld --check`
also tells an admin whether Slurm would start with the same file.
"""

from __future__ import annotations

from collections.abc import Callable

REFUSES = "slurmctld 22.05 refuses this"  # how a diagnostic says it (rctld --check exits 1)
# slurmctld's last line when its config does not parse, and its exit status then
UNPROCESSABLE = "Unable to process configuration file"
SLURMCTLD_EXIT = 1

# What slurmctld 22.05 logs before it exits, as `slurmctld: fatal: ...` or an error then fatal.
_UNRECOGNIZED = "Parsing error at unrecognized key: {key}"

# Keys 22.05 no longer (or not yet) knows: its parser stops at them.
_UNKNOWN_TO_22_05 = (
    "CacheGroups", "CheckpointType", "JobCheckpointDir", "SchedulerPort", "SchedulerRootFilter",
    "MemLimitEnforce", "DefaultStorageHost", "DefaultStorageLoc", "DefaultStoragePass",
    "DefaultStoragePort", "DefaultStorageType", "DefaultStorageUser",
    # newer than 22.05
    "CertgenParameters", "CertgenType", "CertmgrParameters", "CertmgrType", "CliFilterParameters",
    "DataParserParameters", "HashPlugin", "NamespaceType", "TLSParameters", "TLSType",
)

# Keys 22.05 knows only to refuse, with its own explanation.
_REMOVED = {
    "AccountingStorageLoc": "The AccountingStorageLoc option has been removed. It is safe to "
                            "remove from your configuration.",
    "AccountingStoreJobComment": "The AccountingStoreJobComment option has been removed, please "
                                 "use AccountingStoreFlags=job_comment option instead.",
    "SallocDefaultCommand": "SallocDefaultCommand has been removed. Please consider setting "
                            "LaunchParameters=use_interactive_step instead.",
}

# TaskPluginParam words 22.05 rejects ("Bad TaskPluginParam: WORD").
_BAD_TASK_PARAMS = ("sched", "cpusets")

NO_PARTITION = "No PartitionName information available!"

# PartitionName keys newer than 22.05, which its parser stops at.
_PARTITION_UNKNOWN_TO_22_05 = ("MaxCPUsPerSocket",)


def _fast_schedule(value: str) -> tuple[str, bool] | None:
    v = value.strip()
    if v == "1":
        return ("Ignoring obsolete FastSchedule=1 option. Please remove from your "
                "configuration.", False)
    if v == "2":
        return ("The FastSchedule option has been removed. The FastSchedule=2 functionality is "
                "available through the SlurmdParameters=config_overrides option.", True)
    return "The FastSchedule option has been removed. Please update your configuration.", True


def _task_plugin_param(value: str) -> tuple[str, bool] | None:
    for word in value.split(","):
        if word.strip().lower() in _BAD_TASK_PARAMS:
            return f"Bad TaskPluginParam: {word.strip()}", True
    return None


_BY_VALUE: dict[str, Callable[[str], tuple[str, bool] | None]] = {
    "FastSchedule": _fast_schedule,
    "TaskPluginParam": _task_plugin_param,
}


def slurm_verdict(key: str, value: str) -> tuple[str, bool] | None:
    """(what slurmctld 22.05 logs, whether it then refuses to start) for a global setting, or
    None when 22.05 takes it silently. `key` is the canonical spelling."""
    if key in _REMOVED:
        return _REMOVED[key], True
    if key in _UNKNOWN_TO_22_05:
        return _UNRECOGNIZED.format(key=key), True
    check = _BY_VALUE.get(key)
    return check(value) if check is not None else None


def partition_key_verdict(key: str) -> str | None:
    """What slurmctld 22.05 logs before refusing a PartitionName key, or None."""
    return _UNRECOGNIZED.format(key=key) if key in _PARTITION_UNKNOWN_TO_22_05 else None
