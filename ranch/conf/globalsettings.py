"""Global settings: each key typed once, and the settings read from several keys."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from ranch.conf import keys
from ranch.conf.buildbase import BuilderBase, Source
from ranch.conf.model import (
    AccessSettings,
    AccountingSettings,
    AuthSettings,
    ControllerHost,
    ControlSettings,
    GuardSettings,
    HealthSettings,
    HttpSettings,
    JobSettings,
    MembershipSettings,
    PreemptSettings,
    RebootSettings,
    SchedulerSettings,
    Timeouts,
)
from ranch.conf.parser import Pair
from ranch.conf.prioritysettings import PRIORITY_CONVERT
from ranch.conf.refused import slurm_verdict
from ranch.conf.timefmt import parse_seconds
from ranch.conf.values import (
    ENFORCE,
    HEALTH_NODE_STATES,
    HTTP_AUTH,
    SUSPEND_EXC_STATES,
    BadValue,
    as_bool,
    as_endpoints,
    as_enum,
    as_enum_list,
    as_etcd_prefix,
    as_int,
    as_list,
    as_listen,
    as_minutes_to_seconds,
    as_port_range,
    as_purge_age,
    as_seconds_or_infinite,
)

_RESOLVED_PATHS = ("HealthCheckProgram", "SuspendProgram", "ResumeProgram", "ResumeFailProgram",
                   "RebootProgram",
                   "AuthKeyFile", "StateSaveLocation", "HttpTokenFile")
_CTL_HOST_RE = re.compile(r"^([^()\s]+)(?:\(([^()\s]+)\))?$")


_GLOBAL_CONVERT: dict[str, Callable[[str], Any]] = {
    "ClusterName": lambda s: s.strip().lower(),
    "SlurmctldPort": lambda s: as_int(s.split("-", 1)[0], 1, 65535),
    "SrunPortRange": as_port_range,
    "SlurmdTimeout": lambda s: as_int(s, 0, 65533),
    "MessageTimeout": lambda s: as_int(s, 1),
    "ReturnToService": lambda s: as_int(s, 0, 2),
    "HeartbeatInterval": lambda s: as_int(s, 1),
    "HealthCheckInterval": lambda s: as_int(s, 0),
    "HealthCheckTimeout": lambda s: as_int(s, 1, 65535),
    "HealthCheckNodeState": lambda s: as_enum_list(s, HEALTH_NODE_STATES),
    "SuspendTime": as_seconds_or_infinite,
    "SuspendTimeout": lambda s: as_int(s, 1, 65533),
    "ResumeTimeout": lambda s: as_int(s, 1, 65533),
    "RebootUnhealthyMax": lambda s: as_int(s, 0, 1000),
    "SuspendRate": lambda s: as_int(s, 0),
    "ResumeRate": lambda s: as_int(s, 0),
    "SuspendExcParts": as_list,
    "SuspendExcStates": lambda s: as_enum_list(s, SUSPEND_EXC_STATES),
    "NodeApproval": lambda s: as_enum(s, ("AUTO", "MANUAL")).lower(),
    "HttpListen": as_listen,
    "StateStore": lambda s: as_enum(s, ("FILE", "ETCD")).lower(),
    "EtcdEndpoints": as_endpoints,
    "EtcdPrefix": as_etcd_prefix,
    "EtcdLeaseTTL": lambda s: as_int(s, 2, 3600),
    "HttpAuth": lambda s: as_enum(s, HTTP_AUTH).lower(),
    "MaxNodeCount": lambda s: as_int(s, 0),
    "EventLogMaxEvents": lambda s: as_int(s, 1),
    "EventLogMaxAge": lambda s: as_int(s, 1),
    "KillWait": lambda s: as_int(s, 0, 65533),
    "InactiveLimit": lambda s: as_int(s, 0, 65533),
    "MinJobAge": lambda s: as_int(s, 0),
    "PurgeJobAfter": as_purge_age,
    "MaxJobCount": lambda s: as_int(s, 1),
    "MaxArraySize": lambda s: as_int(s, 0, 4000001),
    "EnforcePartLimits": lambda s: as_enum(s, ENFORCE).replace("YES", "ALL"),
    "DownGuardPercent": lambda s: as_int(s, 0, 100),
    "DownGuardWindow": lambda s: as_int(s, 0, 65533),
    "DownGuardMinNodes": lambda s: as_int(s, 2),
    "DrainGuardPercent": lambda s: as_int(s, 0, 100),
    "DrainGuardWindow": lambda s: as_int(s, 1),
    "DrainGuardMinNodes": lambda s: as_int(s, 2),
    "AuthType": lambda s: as_enum(s, AUTH_TYPES).lower(),
    "AdminUsers": as_list,
    "PrivateData": lambda s: tuple(w.lower() for w in as_enum_list(s, PRIVATE_DATA)),
    "DisableRootJobs": as_bool,
    "AccountingStorageType": lambda s: as_enum(s, ACCOUNTING_STORAGE).lower(),
    "AccountingStorageEnforce": lambda s: tuple(w.lower() for w in as_enum_list(s, ENFORCE_WORDS)),
    "SlurmUser": lambda s: s.strip() or "root",
    "PriorityDecayHalfLife": as_minutes_to_seconds,
    "PriorityCalcPeriod": lambda s: max(as_minutes_to_seconds(s), 60),
    "PriorityUsageResetPeriod": lambda s: as_enum(s, RESET_PERIODS),
    "SchedulerType": lambda s: as_enum(s, SCHEDULER_TYPES).lower(),
    **PRIORITY_CONVERT,  # issue 44's priority/multifactor keys
    "PreemptType": lambda s: as_enum(s, PREEMPT_TYPES).lower(),
    "PreemptExemptTime": parse_seconds,
}
PREEMPT_TYPES: tuple[str, ...] = ("PREEMPT/NONE", "PREEMPT/QOS", "PREEMPT/PARTITION_PRIO")
# PreemptMode's words (slurm.conf.5); Ranch acts on OFF, CANCEL and REQUEUE
PREEMPT_WORDS: tuple[str, ...] = ("OFF", "CANCEL", "REQUEUE", "SUSPEND", "GANG", "WITHIN")
SCHEDULER_TYPES: tuple[str, ...] = ("SCHED/BACKFILL", "SCHED/BUILTIN")
# SchedulerParameters' backfill keys Ranch acts on: (field, lowest, highest) as slurm.conf.5
# gives them (bf_interval=-1 turns backfill off); the other words are kept for what reads them
BF_KEYS: dict[str, tuple[int, int]] = {
    "bf_interval": (-1, 10800), "bf_window": (1, 43200), "bf_resolution": (1, 3600),
    "bf_max_job_test": (1, 1000000), "bf_max_job_user": (0, 1000000),
    "bf_max_job_part": (0, 1000000), "bf_min_prio_reserve": (0, 2**63 - 1)}
# SchedulerParameters' words of Ranch's own (docs/slurm-compat.md): word -> the setting it sets
# and Slurm's flag words (no value) Ranch reads: bf_busy_nodes, bf_continue (docs/config.md)
BF_FLAGS: dict[str, str] = {"ranch_estimate_all": "estimate_all",
                            "bf_busy_nodes": "bf_busy_nodes", "bf_continue": "bf_continue"}
# AuthType values Ranch acts on (unset: the cluster key alone)
AUTH_TYPES: tuple[str, ...] = ("AUTH/MUNGE",)
# Slurm 22.05's accounting_storage plugins: slurmdbd turns rctld's own store on (issue 43)
RESET_PERIODS: tuple[str, ...] = ("NONE", "NOW", "DAILY", "WEEKLY", "MONTHLY", "QUARTERLY",
                                  "YEARLY")
ACCOUNTING_STORAGE: tuple[str, ...] = ("ACCOUNTING_STORAGE/NONE", "ACCOUNTING_STORAGE/SLURMDBD")
ENFORCE_WORDS: tuple[str, ...] = ("ALL", "ASSOCIATIONS", "LIMITS", "NOJOBS", "NOSTEPS", "QOS",
                                  "SAFE", "WCKEYS")
# slurm.conf's PrivateData words; Ranch hides jobs, nodes and usage (and events with nodes)
PRIVATE_DATA: tuple[str, ...] = ("ACCOUNTS", "CLOUD", "EVENTS", "JOBS", "NODES", "PARTITIONS",
                                 "RESERVATIONS", "USAGE", "USERS")


class GlobalSettings(BuilderBase):
    """Global key=value pairs, and the settings records built from them."""

    def global_pair(self, src: Source, p: Pair) -> None:
        spec = keys.GLOBAL_KEYS.get(p.key.lower())
        if spec is None:
            self.unknown_key(src, p, keys.GLOBAL_KEYS, "")
            return
        if spec.name in ("SlurmctldHost", "ControlMachine", "BackupController"):
            self.ctl_hosts.append((p, src))
        elif spec.name in self.globals:
            _, prev, psrc = self.globals[spec.name]
            self.warn(src, p.line, p.col, f"{spec.name} specified more than once, latest value "
                      f"used (previous at {psrc.display}:{prev.line})")
            del self.globals[spec.name]
        if not spec.acted:
            self.ignored.setdefault(spec.name)
        self.globals[spec.name] = (spec, p, src)
        verdict = slurm_verdict(spec.name, p.value)
        if verdict is not None:
            said, fatal = verdict
            if fatal:
                self.slurm_refuses(src, p.line, p.col, said)
            else:
                self.warn(src, p.line, p.col, f"slurmctld 22.05 logs: {said}")

    def typed_global(self, name: str, default: Any) -> Any:
        got = self.globals.get(name)
        if got is None:
            return default
        _, p, src = got
        fn = _GLOBAL_CONVERT.get(name)
        value: Any = p.value
        if fn is not None:
            try:
                value = fn(p.value)
            except ValueError as exc:
                self.value_error(src, p, exc)
                return default
        if name in _RESOLVED_PATHS:
            value = value.strip()
            if not value:
                return None
            if not os.path.isabs(value):
                value = os.path.normpath(os.path.join(self.base_dir, value))
        return value

    def controller_hosts(self) -> tuple[ControllerHost, ...]:
        hosts: list[ControllerHost] = []
        new_style = [(p, s) for p, s in self.ctl_hosts if p.key.lower() == "slurmctldhost"]
        if new_style:
            for p, s in new_style:
                m = _CTL_HOST_RE.match(p.value.strip())
                if not m:
                    self.error(s, p.vline, p.vcol, f"{p.key}: expected HOST or HOST(ADDRESS), got "
                               f"{p.value!r}")
                    continue
                hosts.append(ControllerHost(m.group(1), m.group(2) or m.group(1)))
            return tuple(hosts)
        old = {p.key.lower(): p.value.strip() for p, _ in self.ctl_hosts}
        for host_key, addr_key in (("controlmachine", "ControlAddr"),
                                   ("backupcontroller", "BackupAddr")):
            if host_key in old:
                addr_val = self.globals.get(addr_key)
                host = old[host_key]
                hosts.append(ControllerHost(host, addr_val[1].value.strip() if addr_val else host))
        return tuple(hosts)

    def state_store(self) -> tuple[str, tuple[str, ...], str, int]:
        """StateStore, EtcdEndpoints, EtcdPrefix, EtcdLeaseTTL (issue 32): etcd needs endpoints."""
        g = self.typed_global
        store = g("StateStore", "file")
        endpoints = g("EtcdEndpoints", None) or ()
        prefix = g("EtcdPrefix", None) or f"/ranch/{g('ClusterName', 'cluster') or 'cluster'}"
        if store == "etcd" and not endpoints:
            _, p, src = self.globals["StateStore"]
            self.error(src, p.vline, p.vcol, "StateStore=etcd needs EtcdEndpoints=HOST:PORT,...")
        return store, tuple(endpoints), prefix.rstrip("/"), g("EtcdLeaseTTL", 5)

    def approval_auto(self) -> tuple[str, ...]:
        got = self.globals.get("NodeApprovalAuto")
        if got is None:
            return ()
        _, p, src = got
        return tuple(self.expand_at(src, p, p.value.strip(), 0) or ())

    def auth_info(self) -> tuple[tuple[str, str], ...]:
        """AuthInfo=socket=PATH,ttl=N: its options (a relative socket path is the config's)."""
        got = self.globals.get("AuthInfo")
        if got is None:
            return ()
        out = []
        for part in got[1].value.split(","):
            key, _, value = part.strip().partition("=")
            key, value = key.strip().lower(), value.strip()
            if key == "socket" and value and not os.path.isabs(value):
                value = os.path.normpath(os.path.join(self.base_dir, value))
            if key:
                out.append((key, value))
        return tuple(out)

    # -- the settings records, one per area --------------------------------------------------

    def control_settings(self) -> ControlSettings:
        g = self.typed_global
        return ControlSettings(self.controller_hosts(), g("SlurmctldPort", 6817),
                               g("StateSaveLocation", None), g("SlurmdSpoolDir", None),
                               g("SrunPortRange", None), g("SlurmctldLogFile", None),
                               g("SlurmdLogFile", None), *self.state_store())

    def timeouts(self) -> Timeouts:
        g = self.typed_global
        return Timeouts(g("SlurmdTimeout", 300), g("MessageTimeout", 10),
                        g("HeartbeatInterval", 10), g("ReturnToService", 0))

    def health_settings(self) -> HealthSettings:
        g = self.typed_global
        return HealthSettings(g("HealthCheckProgram", None), g("HealthCheckInterval", 0),
                              g("HealthCheckTimeout", 60),
                              g("HealthCheckNodeState", ("ANY",)) or ("ANY",))

    def auth_settings(self) -> AuthSettings:
        return AuthSettings(self.typed_global("AuthKeyFile", None),
                            self.typed_global("NodeApproval", "auto"))

    def http_settings(self) -> HttpSettings:
        g = self.typed_global
        return HttpSettings(g("HttpListen", None), g("HttpTokenFile", None),
                            g("HttpAuth", "loopback"))

    def membership_settings(self) -> MembershipSettings:
        g = self.typed_global
        return MembershipSettings(
            self.approval_auto(), g("MaxNodeCount", 0), g("EventLogMaxEvents", 10000),
            g("EventLogMaxAge", 30 * 86400))

    def job_settings(self) -> JobSettings:
        g = self.typed_global
        return JobSettings(g("KillWait", 30), g("MinJobAge", 300), g("MaxJobCount", 10000),
                           g("MaxArraySize", 1001), g("PurgeJobAfter", 365 * 86400),
                           g("InactiveLimit", 0), g("EnforcePartLimits", "NO"))

    def guard_settings(self) -> GuardSettings:
        g = self.typed_global
        return GuardSettings(g("DownGuardPercent", 50), g("DownGuardWindow", 0),
                             g("DownGuardMinNodes", 4), g("DrainGuardPercent", 25),
                             g("DrainGuardWindow", 600), g("DrainGuardMinNodes", 4))

    def reboot_settings(self) -> RebootSettings:
        g = self.typed_global
        slurmd_params = {w.strip().lower() for w in (g("SlurmdParameters", None) or "").split(",")}
        return RebootSettings(g("RebootProgram", None), "shutdown_on_reboot" in slurmd_params,
                              g("RebootUnhealthyMax", 2))

    def access_settings(self) -> AccessSettings:
        g = self.typed_global
        return AccessSettings(
            g("AuthType", None) or "", self.auth_info(), g("SlurmUser", "root"),
            g("AdminUsers", ()), g("PrivateData", ()), g("DisableRootJobs", False))

    def accounting_settings(self) -> AccountingSettings:
        g = self.typed_global
        half_life, reset = g("PriorityDecayHalfLife", 7 * 86400), g("PriorityUsageResetPeriod",
                                                                    "NONE")
        if half_life == 0 and reset == "NONE":  # Slurm's read_config refuses it the same way
            _, p, src = self.globals["PriorityDecayHalfLife"]
            self.error(src, p.vline, p.vcol, "You have to either have PriorityDecayHalfLife != 0 "
                       "or PriorityUsageResetPeriod set to something or the priority plugin will "
                       "result in rolling over.")
        return AccountingSettings(g("AccountingStorageType", None) or "",
                                  g("AccountingStorageEnforce", ()), half_life,
                                  g("PriorityCalcPeriod", 300), reset)

    def scheduler_settings(self) -> SchedulerSettings:
        """SchedulerType, and SchedulerParameters' bf_* words (a bad one: an error at it)."""
        got: dict[str, Any] = {}
        param = self.globals.get("SchedulerParameters")
        if param is not None:
            _, p, src = param
            offset = 0
            for word in p.value.split(","):
                key, eq, value = word.partition("=")
                key = key.strip().lower()
                if key in BF_KEYS:
                    try:
                        got[key] = _bf_value(key, value if eq else "")
                    except ValueError as exc:
                        lead = len(word) - len(word.lstrip())
                        self.value_error(src, p, BadValue(f"{key}: {exc}", offset + lead))
                elif key in BF_FLAGS:  # flag words: present or not, no value
                    if eq:
                        lead = len(word) - len(word.lstrip())
                        self.value_error(src, p, BadValue(
                            f"{key} takes no value (a flag: present or not)", offset + lead))
                    else:
                        got[BF_FLAGS[key]] = True
                offset += len(word) + 1
        kind = self.typed_global("SchedulerType", "sched/backfill")
        return SchedulerSettings(kind, **got)

    def preempt_settings(self) -> PreemptSettings:
        """PreemptType, PreemptMode, PreemptExemptTime, refused as slurmctld's read_config
        refuses them; SUSPEND, GANG, WITHIN and preempt/partition_prio are not Ranch's."""
        g = self.typed_global
        kind = g("PreemptType", "preempt/none")
        mode = self._preempt_mode()
        if kind == "preempt/partition_prio":
            _, p, src = self.globals["PreemptType"]
            self.error(src, p.vline, p.vcol, "PreemptType=preempt/partition_prio: Ranch "
                       "preempts by QOS only (preempt/qos)")
        elif mode is not None and (kind == "preempt/qos") == (mode == "off"):
            _, p, src = self.globals.get("PreemptType") or self.globals["PreemptMode"]
            self.error(src, p.vline, p.vcol, "PreemptType and PreemptMode values incompatible "
                       f"({kind} with PreemptMode={mode.upper()})")
        exempt = g("PreemptExemptTime", None)
        return PreemptSettings(kind, mode or "off", exempt)

    def _preempt_mode(self) -> str | None:
        """PreemptMode's one mode, lower case; None where it was refused (said once)."""
        got = self.globals.get("PreemptMode")
        if got is None:
            return "off"
        _, p, src = got
        try:
            words = as_enum_list(p.value, PREEMPT_WORDS)
        except ValueError as exc:
            self.value_error(src, p, exc)
            return None
        if words == ("SUSPEND",):  # read_config.c's own refusal
            self.error(src, p.vline, p.vcol, "PreemptMode=SUSPEND requires GANG too")
            return None
        other = [w for w in words if w not in ("OFF", "CANCEL", "REQUEUE")]
        if other:
            self.error(src, p.vline, p.vcol, f"PreemptMode={p.value.strip()}: Ranch does not "
                       f"implement {','.join(other)} (no gang scheduling or suspension); use "
                       "CANCEL or REQUEUE")
            return None
        if len(words) != 1:
            self.error(src, p.vline, p.vcol, f"PreemptMode={p.value.strip()}: one of OFF, "
                       "CANCEL, REQUEUE")
            return None
        return words[0].lower()


def _bf_value(key: str, value: str) -> int:
    lo, hi = BF_KEYS[key]
    v = as_int(value, lo, hi)
    if key == "bf_interval" and v == 0:
        raise BadValue("0 is out of range (-1 or 1..10800)")
    return v
