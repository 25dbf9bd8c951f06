"""What the controller knows about one node: config, state, registration facts, last heartbeat."""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from conf.model import NodeConfig
from protocol.messages import Hardware, HealthReport, Metrics
from statemachine import NodeState, names

# Deadline stages of the heartbeat monitor (see Cluster._hb_due).
EXPECT_BEAT = 0  # next: HeartbeatMissed after 2 x HeartbeatInterval of silence
EXPECT_TIMEOUT = 1  # next: ResponseTimeout after SlurmdTimeout of silence
SILENT = 2  # nothing more to do until the node is heard from


class Pusher(Protocol):
    """A node's live connection, as the core sees it."""

    peer: str

    def push(self, msg: Any) -> bool: ...

    def close_soon(self) -> None: ...


@attrs.define(slots=True, eq=False)
class NodeRecord:
    cfg: NodeConfig
    partitions: tuple[str, ...]
    state: NodeState
    complete: str = ""  # names.complete(state), cached for the heartbeat reply
    hardware: Hardware | None = None
    boot_time: float | None = None
    last_registration: float | None = None  # wall clock
    slurmd_start_time: float | None = None
    version: str = ""
    last_heard: float = 0.0  # trio clock: last registration or heartbeat (or controller start)
    last_heartbeat: float | None = None  # wall clock
    hb_stage: int = EXPECT_BEAT
    seq: int = -1
    metrics: Metrics | None = None
    job_ids: tuple[int, ...] = ()
    health: HealthReport | None = None
    last_busy: float | None = None  # wall clock
    idle_since: float = 0.0  # trio clock, for SuspendTime
    conn: Pusher | None = None
    record: dict[str, Any] | None = None  # cached snapshot record, None when state changed
    view: dict[str, Any] | None = None  # record + latest heartbeat figures, None when stale
    saved: dict[str, Any] | None = None  # cached state-file entry, None when stale

    @property
    def name(self) -> str:
        return self.cfg.name

    def set_state(self, state: NodeState) -> None:
        self.state = state
        self.complete = names.complete(state)
        self.record = None
        self.view = None
        self.saved = None


def gres_used(cfg: NodeConfig) -> str:
    return ",".join(
        f"{g.name}:{g.type}:0" if g.type else f"{g.name}:0" for g in cfg.gres
    )


def snapshot_record(node: NodeRecord) -> dict[str, Any]:
    """The node's record of a Snapshot (docs/internals.md "Snapshot records"), without metrics."""
    cfg, st, m = node.cfg, node.state, node.metrics
    health = node.health
    return {
        "name": cfg.name,
        "hostname": cfg.hostname,
        "addr": cfg.addr,
        "port": cfg.port,
        "partitions": list(node.partitions),
        "state": names.to_json(st),
        "compact": names.compact(st),
        "long": names.long(st),
        "complete": node.complete,
        "cpus": cfg.cpus,
        "cpus_alloc": st.cpus_alloc,
        "cpu_load": m.load_1m if m else None,
        "boards": cfg.boards,
        "sockets": cfg.sockets,
        "cores_per_socket": cfg.cores_per_socket,
        "threads_per_core": cfg.threads_per_core,
        "real_memory": cfg.real_memory,
        "alloc_mem": 0,
        "free_mem": (m.memory_total_mib - m.memory_used_mib) if m else None,
        "tmp_disk": cfg.tmp_disk,
        "gres": cfg.gres_str,
        "gres_used": gres_used(cfg),
        "features": list(cfg.features),
        "weight": cfg.weight,
        "boot_time": node.boot_time,
        "slurmd_start_time": node.slurmd_start_time,
        "last_busy": node.last_busy,
        "last_heartbeat": node.last_heartbeat,
        "version": node.version,
        "health": (
            {"verdict": health.verdict, "message": health.message,
             "warnings": list(health.warnings)}
            if health
            else None
        ),
    }


def heartbeat_fields(node: NodeRecord) -> dict[str, Any]:
    """The part of a snapshot record that every heartbeat changes."""
    m = node.metrics
    return {
        "cpu_load": m.load_1m if m else None,
        "free_mem": (m.memory_total_mib - m.memory_used_mib) if m else None,
        "last_heartbeat": node.last_heartbeat,
    }


def metrics_record(node: NodeRecord, wall_now: float) -> dict[str, Any] | None:
    m = node.metrics
    if m is None:
        return None
    return {
        "cpu_pct": m.cpu_pct,
        "mem_used_mib": m.memory_used_mib,
        "mem_total_mib": m.memory_total_mib,
        "max_temp_c": m.max_temperature_c,
        "gpus": [
            {"index": g.index, "util_pct": g.util_pct, "mem_used_mib": g.memory_used_mib,
             "mem_total_mib": g.memory_total_mib, "temp_c": g.temperature_c, "power_w": g.power_w}
            for g in m.gpus
        ],
        "heartbeat_age_s": (
            round(max(0.0, wall_now - node.last_heartbeat), 1)
            if node.last_heartbeat is not None
            else None
        ),
    }
