"""ClusterConfig -> normalized TOML (node groups folded into hostlists) or a JSON-ready dict."""

from __future__ import annotations

from typing import Any

import tomli_w

from ranch.conf.hostlist import fold
from ranch.conf.model import ClusterConfig, NodeConfig, PartitionConfig


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    """TOML has no null: leave unset values out."""
    return {k: v for k, v in d.items() if v is not None and v not in ((), [], {})}


def _gres(node: NodeConfig) -> str:
    return node.gres_str


def _node_shape(n: NodeConfig) -> tuple:
    """Everything but the names: nodes with the same shape fold into one group."""
    return (n.hostname == n.name, n.addr == n.hostname, n.port, n.cpus, n.boards, n.sockets,
            n.cores_per_socket, n.threads_per_core, n.real_memory, n.tmp_disk, n.gres,
            n.features, n.weight, n.state, n.reason, n.options, n.suspend_time)


def _node_group(members: list[NodeConfig]) -> dict[str, Any]:
    n = members[0]
    group: dict[str, Any] = {"nodes": fold([m.name for m in members])}
    if n.hostname != n.name:
        group["hostnames"] = [m.hostname for m in members]
    if n.addr != n.hostname:
        group["addrs"] = [m.addr for m in members]
    group.update(count=len(members), port=n.port, cpus=n.cpus, boards=n.boards,
                 sockets=n.sockets, cores_per_socket=n.cores_per_socket,
                 threads_per_core=n.threads_per_core, real_memory=n.real_memory,
                 tmp_disk=n.tmp_disk, gres=_gres(n) or None, features=list(n.features),
                 weight=n.weight, state=n.state, reason=n.reason,
                 suspend_time=_own_time(n.suspend_time), options=dict(n.options) or None)
    return _drop_none(group)


def node_groups(cfg: ClusterConfig) -> list[dict[str, Any]]:
    """Nodes grouped by identical configuration, in order of first appearance."""
    groups: dict[tuple, list[NodeConfig]] = {}
    for n in cfg.nodes:
        groups.setdefault(_node_shape(n), []).append(n)
    return [_node_group(members) for members in groups.values()]


def _partition(p: PartitionConfig, *, folded: bool) -> dict[str, Any]:
    return {"name": p.name, "nodes": fold(p.nodes) if folded else list(p.nodes),
            "default": p.default, "state": p.state,
            "max_time": "UNLIMITED" if p.max_time is None and folded else p.max_time,
            "default_time": p.default_time, "hidden": p.hidden,
            **({} if p.suspend_time is None else {"suspend_time": _own_time(p.suspend_time)}),
            "options": dict(p.options)}


def _own_time(value: int | None) -> int | str | None:
    """A node's or partition's own SuspendTime as written back: -1 is INFINITE."""
    return "INFINITE" if value == -1 else value


def _header(cfg: ClusterConfig) -> dict[str, Any]:
    c, t, h, pw, a = cfg.control, cfg.timeouts, cfg.health, cfg.power, cfg.auth
    return {
        "cluster_name": cfg.cluster_name,
        "path": cfg.path,
        "config_hash": cfg.config_hash,
        "files": [name for name, _ in cfg.files],
        "control": {"hosts": [{"name": x.name, "addr": x.addr} for x in c.hosts],
                    "port": c.port, "state_save_location": c.state_save_location,
                    "slurmd_spool_dir": c.slurmd_spool_dir, "log_file": c.log_file,
                    "slurmd_log_file": c.slurmd_log_file,
                    # issue 32: shown only for a controller pair (the file store is the default)
                    **({"state_store": c.state_store, "etcd_endpoints": list(c.etcd_endpoints),
                        "etcd_prefix": c.etcd_prefix, "etcd_lease_ttl": c.etcd_lease_ttl}
                       if c.state_store == "etcd" else {})},
        "timeouts": {"slurmd_timeout": t.slurmd_timeout, "message_timeout": t.message_timeout,
                     "heartbeat_interval": t.heartbeat_interval,
                     "return_to_service": t.return_to_service},
        "health": {"program": h.program, "interval": h.interval, "timeout": h.timeout,
                   "node_state": list(h.node_state)},
        "power": {"suspend_program": pw.suspend_program, "resume_program": pw.resume_program,
                  "resume_fail_program": pw.resume_fail_program, "suspend_time": pw.suspend_time,
                  "suspend_timeout": pw.suspend_timeout, "resume_timeout": pw.resume_timeout,
                  "suspend_rate": pw.suspend_rate, "resume_rate": pw.resume_rate,
                  "suspend_exc_nodes": [{"nodes": list(e.nodes), "count": e.count}
                                        for e in pw.suspend_exc_nodes],
                  "suspend_exc_parts": list(pw.suspend_exc_parts),
                  "suspend_exc_states": list(pw.suspend_exc_states)},
        "auth": {"key_file": a.key_file, "node_approval": a.node_approval},
    }


def to_toml(cfg: ClusterConfig) -> str:
    """The normalized config as TOML: node groups folded into hostlists, unset values left out."""
    doc = _header(cfg)
    for section in ("control", "timeouts", "health", "power", "auth"):
        doc[section] = _drop_none(doc[section])
    doc["control"]["hosts"] = [dict(x) for x in doc["control"].get("hosts", [])]
    if "suspend_exc_nodes" in doc["power"]:
        doc["power"]["suspend_exc_nodes"] = [
            _drop_none({"nodes": fold(e.nodes), "count": e.count})
            for e in cfg.power.suspend_exc_nodes]
    if cfg.power.suspend_time is None:
        doc["power"]["suspend_time"] = "INFINITE"
    doc["node_groups"] = node_groups(cfg)
    doc["partitions"] = [_drop_none(_partition(p, folded=True)) for p in cfg.partitions]
    settings: dict[str, Any] = {}
    for key, value in cfg.settings:
        # SlurmctldHost may repeat: keep every value.
        if key in settings:
            prev = settings[key]
            settings[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            settings[key] = value
    doc["settings"] = settings
    doc["ignored"] = list(cfg.ignored)
    return tomli_w.dumps(_drop_none(doc))


def node_record(n: NodeConfig, partitions: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": n.name, "hostname": n.hostname, "addr": n.addr, "port": n.port,
            "cpus": n.cpus, "boards": n.boards, "sockets": n.sockets,
            "cores_per_socket": n.cores_per_socket, "threads_per_core": n.threads_per_core,
            "real_memory": n.real_memory, "tmp_disk": n.tmp_disk, "gres": n.gres_str,
            "gpus": n.gpus, "features": list(n.features), "state": n.state, "reason": n.reason,
            "weight": n.weight, "partitions": list(partitions), "options": dict(n.options),
            "suspend_time": n.suspend_time}


def to_json_dict(cfg: ClusterConfig) -> dict[str, Any]:
    """The config as plain JSON values: `nodes` one record each, `partitions` with name lists."""
    doc = _header(cfg)
    doc["nodes"] = [node_record(n, cfg.partitions_of(n.name)) for n in cfg.nodes]
    doc["partitions"] = [_partition(p, folded=False) for p in cfg.partitions]
    doc["settings"] = [[k, v] for k, v in cfg.settings]
    doc["ignored"] = list(cfg.ignored)
    doc["warnings"] = [{"path": w.path, "line": w.line, "col": w.col, "message": w.message}
                       for w in cfg.warnings]
    return doc
