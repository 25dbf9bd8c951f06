"""Every message Ranch daemons and commands exchange, as frozen attrs classes.

One cattrs converter (protocol.codec) turns them into bytes; the frame header carries the type name
(`MESSAGE_TYPES` key), so a message class here never names its own type in its fields.
"""

from __future__ import annotations

import attrs

# ---------------------------------------------------------------------------------------------
# Shared pieces


@attrs.frozen
class GpuInfo:
    """One GPU as the node sees it (NVML or fake)."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    memory_total_mib: int
    driver: str = ""


@attrs.frozen
class Hardware:
    """What a node reports at registration, like `slurmd -C`."""

    cpus: int
    boards: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mib: int
    tmp_disk_mib: int
    numa_nodes: int = 1
    gpus: tuple[GpuInfo, ...] = ()
    os: str = ""
    arch: str = ""
    hostname: str = ""


@attrs.frozen
class GpuMetrics:
    index: int
    util_pct: float
    memory_used_mib: int
    memory_total_mib: int
    temperature_c: float
    power_w: float


@attrs.frozen
class Metrics:
    """Live figures carried by every heartbeat."""

    cpu_pct: float
    load_1m: float
    memory_used_mib: int
    memory_total_mib: int
    max_temperature_c: float | None = None
    gpus: tuple[GpuMetrics, ...] = ()


@attrs.frozen
class HealthReport:
    """The last health-check verdict of a node: ok | drain | fail, plus non-draining warnings."""

    verdict: str
    message: str = ""
    warnings: tuple[str, ...] = ()
    ran_at: float = 0.0  # wall clock, seconds since the epoch


@attrs.frozen
class ConfigFile:
    """One file of the served configuration (the main file and every Include)."""

    name: str
    text: str


@attrs.frozen
class NodeSettings:
    """The part of the config a node acts on; pushed at registration and on reconfigure."""

    cluster_name: str
    heartbeat_interval: float
    slurmd_timeout: float
    message_timeout: float
    health_check_program: str | None
    health_check_interval: float
    health_check_timeout: float
    health_check_node_state: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# Node daemon <-> controller


@attrs.frozen
class Register:
    name: str
    hardware: Hardware
    boot_time: float
    rnoded_version: str
    config_hash: str = ""  # hash of the node's cached config, "" when it has none
    health: HealthReport | None = None  # the start-up health check's verdict


@attrs.frozen
class RegisterReply:
    accepted: bool
    reason: str = ""  # why not, when refused
    settings: NodeSettings | None = None
    config_files: tuple[ConfigFile, ...] = ()
    config_hash: str = ""
    node_state: str = ""  # Slurm's complete string, e.g. "IDLE+DRAIN"
    # Not registered yet: cache these settings and files, run the health check, then register
    # again with its report (Slurm's configless slurmd checks health before it registers).
    health_check_first: bool = False


@attrs.frozen
class Heartbeat:
    name: str
    seq: int
    metrics: Metrics
    job_ids: tuple[int, ...] = ()
    health: HealthReport | None = None  # present when a health check ran since the last beat


@attrs.frozen
class HeartbeatReply:
    node_state: str  # complete string, so the node can pick when to run its health check
    config_hash: str = ""  # a node whose cached hash differs should expect a ConfigPush


@attrs.frozen
class ConfigPush:
    """Controller -> node, unsolicited, on reconfigure."""

    settings: NodeSettings
    config_files: tuple[ConfigFile, ...]
    config_hash: str


@attrs.frozen
class ShutdownNotice:
    name: str
    reason: str = "rnoded shut down"


@attrs.frozen
class Ack:
    pass


# ---------------------------------------------------------------------------------------------
# Admin commands (rinfo, rcontrol) <-> controller: one request, one reply, then close


@attrs.frozen
class GetSnapshot:
    """Ask for every node and partition. The controller answers from a cached snapshot.

    `fields` names the node-record keys wanted (empty = all): each record then holds only those
    of its keys, unknown names are skipped; partitions and the other Snapshot fields are whole.
    A controller that ignores `fields` sends every key, and readers must accept that."""

    metrics: bool = False
    fields: tuple[str, ...] = ()


@attrs.frozen
class Snapshot:
    """Nodes and partitions as plain dicts (shape: docs/internals.md, "Snapshot records")."""

    cluster_name: str
    generated_at: float
    nodes: tuple[dict, ...]
    partitions: tuple[dict, ...]


@attrs.frozen
class UpdateNodes:
    node_names: str  # hostlist expression or ALL
    state: str | None = None
    reason: str | None = None
    user: str = ""
    uid: int = -1


@attrs.frozen
class UpdateResult:
    ok: bool
    changed: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


@attrs.frozen
class SetAllocation:
    """Set how many CPUs of each named node are allocated (the hook the job runner uses; tests use
    it to put nodes in alloc/mix). The base state follows from it through the state machine."""

    node_names: str
    cpus_alloc: int
    user: str = ""


@attrs.frozen
class GetConfig:
    pass


@attrs.frozen
class ConfigDump:
    path: str
    config_hash: str
    items: tuple[tuple[str, str], ...]  # ("SlurmdTimeout", "300 sec"), in Slurm's show-config order


@attrs.frozen
class Reconfigure:
    user: str = ""


@attrs.frozen
class ReconfigureResult:
    ok: bool
    errors: tuple[str, ...] = ()  # each "PATH:LINE:COL: message"
    config_hash: str = ""


@attrs.frozen
class Ping:
    pass


@attrs.frozen
class Pong:
    cluster_name: str
    version: str
    started_at: float


@attrs.frozen
class Error:
    """Any refusal: `code` is a stable word (bad_mac, stale, replay, unknown_type, too_large,
    bad_request, unknown_node, version, internal); `field` names the offending field if any."""

    code: str
    message: str
    field: str = ""


MESSAGE_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        Register,
        RegisterReply,
        Heartbeat,
        HeartbeatReply,
        ConfigPush,
        ShutdownNotice,
        Ack,
        GetSnapshot,
        Snapshot,
        UpdateNodes,
        UpdateResult,
        SetAllocation,
        GetConfig,
        ConfigDump,
        Reconfigure,
        ReconfigureResult,
        Ping,
        Pong,
        Error,
    )
}
