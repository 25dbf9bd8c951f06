"""`rcontrol show config`: every setting as scontrol prints it (`Key = Value`, units, sorted)."""

from __future__ import annotations

import attrs

from ranch.conf import hostlist
from ranch.conf.model import ClusterConfig
from ranch.protocol import messages as m

NULL = "(null)"


def _sec(value: int) -> str:
    return f"{value} sec"


def _opt(value: str | None) -> str:
    return value if value else NULL


def _user(name: str) -> str:
    """scontrol's `name(uid)`."""
    import pwd

    try:
        pw = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, OverflowError):
        return name
    return f"{pw.pw_name}({pw.pw_uid})"


def effective(cfg: ClusterConfig) -> dict[str, str]:
    """The settings Ranch acts on, with defaults filled in, formatted like scontrol's."""
    c, t, h, p, a = cfg.control, cfg.timeouts, cfg.health, cfg.power, cfg.auth
    exc_nodes = ",".join(
        hostlist.fold(e.nodes) + (f":{e.count}" if e.count is not None else "")
        for e in p.suspend_exc_nodes
    )
    out = {
        "AuthKeyFile": _opt(a.key_file),
        "ClusterName": cfg.cluster_name,
        "HealthCheckInterval": _sec(h.interval),
        "HealthCheckNodeState": ",".join(h.node_state),
        "HealthCheckProgram": _opt(h.program),
        "HealthCheckTimeout": _sec(h.timeout),
        "HeartbeatInterval": _sec(t.heartbeat_interval),
        "MessageTimeout": _sec(t.message_timeout),
        "NodeApproval": a.node_approval,
        "NodeApprovalAuto": hostlist.fold(cfg.membership.node_approval_auto) or NULL,
        "MaxNodeCount": str(cfg.membership.max_node_count),
        "EventLogMaxEvents": str(cfg.membership.event_log_max_events),
        "EventLogMaxAge": _sec(cfg.membership.event_log_max_age),
        "ResumeFailProgram": _opt(p.resume_fail_program),
        "ResumeProgram": _opt(p.resume_program),
        "ResumeRate": f"{p.resume_rate} nodes/min",
        "ResumeTimeout": _sec(p.resume_timeout),
        "RebootProgram": _opt(cfg.reboot.program),
        "RebootUnhealthyMax": str(cfg.reboot.unhealthy_max),
        "ReturnToService": str(t.return_to_service),
        "SlurmctldPort": str(c.port),
        "SlurmdSpoolDir": _opt(c.slurmd_spool_dir),
        "SlurmctldLogFile": _opt(c.log_file),
        "SlurmdLogFile": _opt(c.slurmd_log_file),
        "SlurmdTimeout": _sec(t.slurmd_timeout),
        "StateSaveLocation": _opt(c.state_save_location),
        "SuspendExcNodes": exc_nodes or NULL,
        "SuspendExcParts": ",".join(p.suspend_exc_parts) or NULL,
        "SuspendExcStates": ",".join(p.suspend_exc_states) or NULL,
        "SuspendProgram": _opt(p.suspend_program),
        "SuspendRate": f"{p.suspend_rate} nodes/min",
        "SuspendTime": "NONE" if p.suspend_time is None else _sec(p.suspend_time),
        "SuspendTimeout": _sec(p.suspend_timeout),
        # issue 18: the guards (ctld/nodes/liveness.py, ctld/nodes/guards.py); 0 % = off
        "DownGuardPercent": f"{cfg.guards.down_percent}%",
        "DownGuardWindow": _sec(cfg.guards.down_window or t.slurmd_timeout),
        "DownGuardMinNodes": str(cfg.guards.down_min_nodes),
        "DrainGuardPercent": f"{cfg.guards.drain_percent}%",
        "DrainGuardWindow": _sec(cfg.guards.drain_window),
        "DrainGuardMinNodes": str(cfg.guards.drain_min_nodes),
    }
    out.update(_access(cfg))
    return out


def _access(cfg: ClusterConfig) -> dict[str, str]:
    """Who may do what (issue 19, ctld/rpc/permissions.py) and where the controllers live, as
    scontrol prints them."""
    acc = cfg.access
    out = {
        "AuthType": acc.auth_type or NULL,  # unset: the cluster key alone
        "AuthInfo": ",".join(f"{k}={v}" if v else k for k, v in acc.auth_info) or NULL,
        "SlurmUser": _user(acc.slurm_user),
        "AdminUsers": ",".join(acc.admin_users) or NULL,
        "PrivateData": ",".join(acc.private_data) or "none",
        "DisableRootJobs": "YES" if acc.disable_root_jobs else "NO",
    }
    for i, host in enumerate(cfg.control.hosts):
        out[f"SlurmctldHost[{i}]"] = (
            f"{host.name}({host.addr})" if host.addr and host.addr != host.name else host.name
        )
    return out


def in_force(dump: m.ConfigDump, *, server_addr: str | None, key_file: str | None,
             state_dir: str | None, log_file: str | None = None) -> m.ConfigDump:
    """The listing with what the running rctld uses where its command line overrode the file
    (--listen, --key-file, --state-dir): the address it listens on, the key file it read and
    the state directory it writes, each as an absolute path."""
    shown: dict[str, str] = {}
    if server_addr and server_addr != "?":
        host, _, port = server_addr.rpartition(":")
        shown["SlurmctldPort"] = port
        shown["SlurmctldAddr"] = host.strip("[]")
    if key_file:
        shown["AuthKeyFile"] = key_file
    if state_dir:
        shown["StateSaveLocation"] = state_dir
    if log_file is not None:  # "" when --log-file - sent the log to stderr
        shown["SlurmctldLogFile"] = log_file or NULL
    if not shown:
        return dump
    lower = {k.lower() for k in shown}
    merged = {k: v for k, v in dump.items if k.lower() not in lower}
    merged.update(shown)
    return attrs.evolve(dump, items=tuple(sorted(merged.items(), key=lambda kv: kv[0].lower())))


def ignored(cfg: ClusterConfig, listed: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The keys of the listing that Ranch keeps as written but does not act on."""
    kept = set(cfg.ignored)
    return tuple(k for k, _ in listed if k in kept)


def items(cfg: ClusterConfig) -> tuple[tuple[str, str], ...]:
    """Acted-on settings with their effective values, plus every other key as written; sorted
    case-insensitively by key, as scontrol sorts its listing."""
    out = effective(cfg)
    known = {k.lower() for k in out}
    known.update(("slurmctldhost", "controlmachine", "controladdr", "backupcontroller",
                  "backupaddr"))
    for key, value in cfg.settings:
        if key.lower() not in known:
            out[key] = str(value)
    return tuple(sorted(out.items(), key=lambda kv: kv[0].lower()))
