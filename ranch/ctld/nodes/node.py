"""What the controller knows about one node: config, state, registration facts, last heartbeat."""

from __future__ import annotations

import functools
import math
import sys
from array import array
from typing import Any, Protocol

import attrs
import orjson

from ranch.conf.model import NodeConfig
from ranch.ctld.nodes.hardware import PackedHardware
from ranch.protocol.messages import PER_GPU, HealthReport, Metrics
from ranch.statemachine import names
from ranch.statemachine.model import Base, Flag, NodeState, Reason

# Deadline stages of the heartbeat monitor (ctld/nodes/liveness.py Liveness.due).
EXPECT_BEAT = 0  # next: HeartbeatMissed after 2 x HeartbeatInterval of silence
EXPECT_TIMEOUT = 1  # next: ResponseTimeout after SlurmdTimeout of silence
SILENT = 2  # nothing more to do until the node is heard from


# A node's last Metrics are kept as one array of doubles: about 0.5 KB for 8 GPUs instead of
# 2 KB of attrs objects and floats, and nothing that the garbage collector must walk. Objects
# replaced with every heartbeat were what filled its oldest generation (docs/benchmarks.md, hot
# spots 1 and 3). Layout: the five scalars of Metrics, then six per GPU; NaN stands for None.
PACKED_HEAD = 5  # cpu_pct, load_1m, memory_used_mib, memory_total_mib, max_temperature_c
# then GpuMetrics' figures (GPU_FIELDS), PER_GPU of them a GPU, as GpuReadings holds them
_NAN = math.nan


def pack_metrics(mt: Metrics) -> array:
    return array("d", (mt.cpu_pct, mt.load_1m, mt.memory_used_mib, mt.memory_total_mib,
                       _NAN if mt.max_temperature_c is None else mt.max_temperature_c,
                       *mt.gpus.flat))  # GpuMetrics' figures in their order (GPU_FIELDS)


def _opt(x: float) -> float | None:
    return None if x != x else x  # NaN is the packed None


def load_1m(packed: array) -> float:
    return packed[1]


def free_mem(packed: array) -> int:
    return int(packed[3]) - int(packed[2])


def unpack_gpus(packed: array) -> list[dict[str, Any]]:
    return [
        {"index": int(packed[i]), "util_pct": packed[i + 1], "mem_used_mib": int(packed[i + 2]),
         "mem_total_mib": int(packed[i + 3]), "temp_c": packed[i + 4], "power_w": packed[i + 5]}
        for i in range(PACKED_HEAD, len(packed), PER_GPU)
    ]


class Pusher(Protocol):
    """A node's live connection, as the core sees it."""

    @property
    def peer(self) -> str: ...
    @property
    def node(self) -> str | None: ...  # the node that registered on it

    def registered_as(self, name: str) -> None: ...
    def push(self, msg: Any) -> bool: ...

    def close_soon(self) -> None: ...


@attrs.define(slots=True, eq=False)
class NodeRecord:
    cfg: NodeConfig
    partitions: tuple[str, ...]
    state: NodeState
    complete: str = ""  # names.complete(state), cached for the heartbeat reply
    # What the node reported at registration, as the JSON the state file holds, deflated
    # (ctld/nodes/hardware.py): a hundred bytes rather than the dozens of objects a decoded
    # 8-GPU Hardware takes (hot spot 3 of docs/benchmarks.md) or its 2 KB of JSON.
    hardware: PackedHardware | None = None
    boot_time: float | None = None
    last_registration: float | None = None  # wall clock
    slurmd_start_time: float | None = None
    version: str = ""
    protocol: int = 0  # the protocol version the node registered with
    last_heard: float = 0.0  # trio clock: last registration or heartbeat (or controller start)
    last_heartbeat: float | None = None  # wall clock
    hb_stage: int = EXPECT_BEAT
    seq: int = -1
    metrics: array | None = None  # the last heartbeat's Metrics, packed (see pack_metrics)
    health: HealthReport | None = None
    last_busy: float | None = None  # wall clock
    idle_since: float = 0.0  # trio clock, for SuspendTime
    power_started: float | None = None  # wall clock: current Suspend/ResumeProgram's start
    power_action: dict[str, Any] | None = None  # last power program: action, rc, time, error
    conn: Pusher | None = None
    record: dict[str, Any] | None = None  # cached snapshot record, None when state changed
    view_fresh: bool = False  # record holds the latest heartbeat figures
    # the state-file entry less its hardware, encoded (ctld/nodes/savedstate.py); None when stale
    saved: bytes | None = None
    # (hardware it was read from, {"arch", "os"}): parsed once per registration, not per
    # record rebuild.
    platform: tuple[PackedHardware | None, dict[str, str]] | None = None
    # Membership (issue 13): the --conf text of a dynamic node (None: defined in the config),
    # and the wall time of the node's last state change (the event log sets it).
    dynamic_conf: str | None = None
    last_change: float | None = None
    alloc_mem: int = 0  # MiB allocated to jobs (ctld/jobs/store.py keeps it)
    gpus_used: tuple[int, ...] = ()  # GPU indices allocated to jobs
    unhealthy_boots: int = 0  # boots in a row whose health check failed (issue 33)

    @property
    def name(self) -> str:
        return self.cfg.name

    def set_state(self, state: NodeState) -> None:
        self.state = state
        self.complete = sys.intern(names.complete(state))  # one string per distinct state
        self.record = None
        self.view_fresh = False
        self.saved = None


def gres_used(cfg: NodeConfig, gpus: tuple[int, ...] = ()) -> str:
    """sinfo's GresUsed: "gpu:0", or "gpu:2(IDX:0-1)" with the indices jobs hold."""
    out = []
    for g in cfg.gres:
        name = f"{g.name}:{g.type}" if g.type else g.name
        if g.name == "gpu" and gpus:
            out.append(f"{name}:{len(gpus)}(IDX:{_ranges(gpus)})")
        else:
            out.append(f"{name}:0")
    return ",".join(out)


def _ranges(values: tuple[int, ...]) -> str:
    parts: list[str] = []
    start = prev = values[0]
    for v in (*values[1:], None):
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ",".join(parts)


def next_state(st: NodeState) -> str | None:
    """What a node with a pending or issued reboot becomes once back (scontrol's NextState)."""
    f = st.flags
    if Flag.REBOOT_REQUESTED not in f and Flag.REBOOT_ISSUED not in f:
        return None
    return "RESUME" if Flag.NEXT_RESUME in f else "DOWN" if Flag.NEXT_DOWN in f else None


def snapshot_record(node: NodeRecord) -> dict[str, Any]:
    """The node's record of a Snapshot (docs/internals.md "Snapshot records"), without metrics."""
    cfg, st, m = node.cfg, node.state, node.metrics
    health = node.health
    return {
        "name": cfg.name,
        "hostname": cfg.hostname,
        "addr": cfg.addr,
        "port": cfg.port,
        "partitions": _shared_list(node.partitions),
        "state": _state_view(st.base, st.flags, st.reason),
        # a few distinct values over the whole cluster: one string each, not one per node
        "compact": sys.intern(names.compact(st)),
        "long": sys.intern(names.long(st)),
        "complete": node.complete,
        "cpus": cfg.cpus,
        "cpus_alloc": st.cpus_alloc,
        "cpu_load": load_1m(m) if m is not None else None,
        "boards": cfg.boards,
        "sockets": cfg.sockets,
        "cores_per_socket": cfg.cores_per_socket,
        "threads_per_core": cfg.threads_per_core,
        "real_memory": cfg.real_memory,
        "alloc_mem": node.alloc_mem,
        "free_mem": free_mem(m) if m is not None else None,
        "tmp_disk": cfg.tmp_disk,
        "gres": cfg.gres_str,
        "gres_used": sys.intern(gres_used(cfg, node.gpus_used)),
        "features": _shared_list(cfg.features),
        "weight": cfg.weight,
        "boot_time": node.boot_time,
        "slurmd_start_time": node.slurmd_start_time,
        # Idle since it registered until a job ends on it (scontrol prints a time, not None).
        "last_busy": node.last_busy if node.last_busy is not None else node.last_registration,
        "last_heartbeat": node.last_heartbeat,
        "version": node.version,
        "last_power_action": node.power_action,
        **platform_of(node),
        "last_change": node.last_change,
        "next_state": next_state(st),
        "dynamic": node.dynamic_conf is not None,
        "health": (
            {"verdict": health.verdict, "message": health.message,
             "warnings": list(health.warnings)}
            if health
            else None
        ),
    }


# Parts of a snapshot record that most nodes have alike are one object, shared by their records
# (read-only: the records are encoded, never changed there): about 0.3 KB a node.
@functools.lru_cache(maxsize=1024)
def _state_view(base: Base, flags: frozenset[Flag], reason: Reason | None) -> dict[str, Any]:
    return names.to_json(NodeState(name="", base=base, flags=flags, reason=reason, cpus_total=0))


@functools.lru_cache(maxsize=1024)
def _shared_list(items: tuple[str, ...]) -> list[str]:
    return list(items)


def platform_of(node: NodeRecord) -> dict[str, str]:
    """`arch` and `os` the node reported at registration (scontrol's Arch= and OS=)."""
    packed = node.hardware
    cached = node.platform
    if cached is not None and cached[0] is packed:
        return cached[1]
    if packed is None:
        got = _platform("", "")
    else:
        hw = orjson.loads(packed.json())
        got = _platform(hw.get("arch") or "", hw.get("os") or "")
    node.platform = (packed, got)
    return got


@functools.lru_cache(maxsize=256)
def _platform(arch: str, os: str) -> dict[str, str]:
    """One dict per platform, shared by its nodes (read-only: records copy it)."""
    return {"arch": arch, "os": os}


def heartbeat_fields(node: NodeRecord) -> dict[str, Any]:
    """The part of a snapshot record that every heartbeat changes."""
    m = node.metrics
    return {
        "cpu_load": load_1m(m) if m is not None else None,
        "free_mem": free_mem(m) if m is not None else None,
        "last_heartbeat": node.last_heartbeat,
    }


def metrics_record(node: NodeRecord, wall_now: float) -> dict[str, Any] | None:
    m = node.metrics
    if m is None:
        return None
    return {
        "cpu_pct": m[0],
        "mem_used_mib": int(m[2]),
        "mem_total_mib": int(m[3]),
        "max_temp_c": _opt(m[4]),
        "gpus": unpack_gpus(m),
        "heartbeat_age_s": (
            round(max(0.0, wall_now - node.last_heartbeat), 1)
            if node.last_heartbeat is not None
            else None
        ),
    }
