"""The validated, typed cluster model that the rest of Ranch reads (frozen attrs records)."""

from __future__ import annotations

import attrs

from ranch.conf.errors import ConfDiagnostic


@attrs.frozen(slots=True)
class Gres:
    """One generic resource of a node, e.g. `gpu:a100:4`."""

    name: str
    type: str | None
    count: int

    def __str__(self) -> str:
        return f"{self.name}:{self.type}:{self.count}" if self.type else f"{self.name}:{self.count}"


@attrs.frozen(slots=True)
class NodeConfig:
    """One node as configured; `options` keeps Slurm node keys Ranch does not act on."""

    name: str
    hostname: str
    addr: str
    port: int | None = None
    cpus: int = 1
    boards: int = 1
    sockets: int = 1
    cores_per_socket: int = 1
    threads_per_core: int = 1
    real_memory: int = 1
    tmp_disk: int = 0
    gres: tuple[Gres, ...] = ()
    features: tuple[str, ...] = ()
    weight: int = 1
    state: str = "UNKNOWN"
    reason: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    suspend_time: int | None = None  # this node's own SuspendTime; None: unset, -1: INFINITE

    @property
    def gpus(self) -> int:
        return sum(g.count for g in self.gres if g.name == "gpu")

    @property
    def gres_str(self) -> str:
        """Slurm's comma-joined Gres string, "" when none."""
        return ",".join(str(g) for g in self.gres)


@attrs.frozen(slots=True)
class PartitionConfig:
    """One partition; `nodes` are names in config order, `options` every other key as written."""

    name: str
    nodes: tuple[str, ...] = ()
    default: bool = False
    state: str = "UP"
    max_time: int | None = None
    default_time: int | None = None
    hidden: bool = False
    options: tuple[tuple[str, str], ...] = ()
    suspend_time: int | None = None  # SuspendTime= on the line; None: unset, -1: INFINITE
    # Dynamic nodes (issue 13): Nodes=ALL takes every node that registers with `--dynamic`;
    # names in Nodes= that no NodeName line defines (allowed only with MaxNodeCount) wait for one.
    all_nodes: bool = False
    dynamic_nodes: tuple[str, ...] = ()
    # TRESBillingWeights (lower-case TRES, weight; mem per MB): usage's billing TRES
    billing: tuple[tuple[str, float], ...] = ()


@attrs.frozen(slots=True)
class ControllerHost:
    name: str
    addr: str


@attrs.frozen(slots=True)
class ControlSettings:
    hosts: tuple[ControllerHost, ...] = ()
    port: int = 6817
    state_save_location: str | None = None
    slurmd_spool_dir: str | None = None
    # SrunPortRange: the ports rrun listens on for its tasks' I/O (None: any the kernel gives)
    srun_port_range: tuple[int, int] | None = None
    log_file: str | None = None  # SlurmctldLogFile
    slurmd_log_file: str | None = None  # SlurmdLogFile, served to the nodes
    state_store: str = "file"  # file | etcd (issue 32)
    etcd_endpoints: tuple[str, ...] = ()  # "host:port" each
    etcd_prefix: str = ""  # "" until built: /ranch/<cluster name>
    etcd_lease_ttl: int = 5


@attrs.frozen(slots=True)
class Timeouts:
    slurmd_timeout: int = 300
    message_timeout: int = 10
    heartbeat_interval: int = 10
    return_to_service: int = 0


@attrs.frozen(slots=True)
class HealthSettings:
    program: str | None = None
    interval: int = 0
    timeout: int = 60
    node_state: tuple[str, ...] = ("ANY",)


@attrs.frozen(slots=True)
class ExcNodes:
    """SuspendExcNodes entry: these nodes, of which `count` stay up (None = all of them)."""

    nodes: tuple[str, ...]
    count: int | None = None


@attrs.frozen(slots=True)
class PowerSettings:
    suspend_program: str | None = None
    resume_program: str | None = None
    resume_fail_program: str | None = None
    suspend_time: int | None = None
    suspend_timeout: int = 30
    resume_timeout: int = 60
    suspend_rate: int = 60
    resume_rate: int = 300
    suspend_exc_nodes: tuple[ExcNodes, ...] = ()
    suspend_exc_parts: tuple[str, ...] = ()
    suspend_exc_states: tuple[str, ...] = ()
    save_interval: int = 10  # SlurmctldParameters=power_save_interval: seconds between passes


@attrs.frozen(slots=True)
class RebootSettings:
    """Issue 33: RebootProgram, SlurmdParameters=shutdown_on_reboot, RebootUnhealthyMax."""

    program: str | None = None
    shutdown_on_reboot: bool = False
    unhealthy_max: int = 2


@attrs.frozen(slots=True)
class AuthSettings:
    key_file: str | None = None
    node_approval: str = "auto"


@attrs.frozen(slots=True)
class AccessSettings:
    """Issue 19: how users prove who they are, who is an admin, what others may not see."""

    auth_type: str = ""  # "" (the cluster key alone) | "auth/munge"
    auth_info: tuple[tuple[str, str], ...] = ()  # AuthInfo's `key=value` options, keys lower
    slurm_user: str = "root"
    admin_users: tuple[str, ...] = ()  # names, or %group
    private_data: tuple[str, ...] = ()  # lower-case words: jobs, nodes, usage, ...
    disable_root_jobs: bool = False  # the global default; a partition's own wins

    @property
    def munge_socket(self) -> str | None:
        return dict(self.auth_info).get("socket") or None


@attrs.frozen(slots=True)
class AccountingSettings:
    """Issue 43: AccountingStorageType=accounting_storage/slurmdbd turns rctld's accounting
    store on (racctmgr); AccountingStorageEnforce then checks submissions (assoc/enforce.py)."""

    storage_type: str = ""  # as written, lower case ("" unset)
    enforce: tuple[str, ...] = ()  # lower-case words: associations, limits, qos, safe, ...
    half_life: int = 7 * 86400  # PriorityDecayHalfLife, seconds (0: no decay)
    calc_period: int = 300  # PriorityCalcPeriod, seconds
    reset_period: str = "NONE"  # PriorityUsageResetPeriod, upper case

    @property
    def enabled(self) -> bool:
        return self.storage_type == "accounting_storage/slurmdbd"


@attrs.frozen(slots=True)
class HttpSettings:
    """rctld's HTTP server (Ranch keys): off unless `listen` is set."""

    listen: str | None = None  # "HOST:PORT" as written
    token_file: str | None = None
    auth: str = "loopback"  # loopback | token | none: who may read without a token


@attrs.frozen(slots=True)
class MembershipSettings:
    """Issue 13: who may join (NodeApprovalAuto, MaxNodeCount) and the event log's bounds."""

    node_approval_auto: tuple[str, ...] = ()  # names admitted without `rcontrol approve`
    max_node_count: int = 0  # 0: only nodes named in the config (no dynamic nodes)
    event_log_max_events: int = 10000
    event_log_max_age: int = 30 * 86400  # seconds


@attrs.frozen(slots=True)
class JobSettings:
    """The controller's job limits and timings (issue 12 keys)."""

    kill_wait: int = 30  # seconds between SIGTERM and SIGKILL
    min_job_age: int = 300  # seconds a finished job stays listed
    max_job_count: int = 10000  # jobs held at once, finished ones until MinJobAge
    max_array_size: int = 1001  # array task ids must be below it; 0: no arrays
    purge_job_after: int = 365 * 86400  # seconds a finished job stays in the history (racct)
    inactive_limit: int = 0  # seconds an allocation outlives its silent command; 0: no limit
    enforce_part_limits: str = "NO"  # NO | ALL | ANY: a job over its partitions' limits


@attrs.frozen(slots=True)
class SchedulerSettings:
    """SchedulerType and SchedulerParameters' bf_* keys (issue 44), Slurm 22.05's defaults."""

    type: str = "sched/backfill"  # sched/builtin: the event-driven FIFO pass alone
    bf_interval: int = 30  # seconds between backfill cycles; -1: none
    bf_window: int = 1440  # minutes planned ahead
    bf_resolution: int = 60  # seconds a plan's slots are aligned to
    bf_max_job_test: int = 500  # jobs a cycle plans (the rest: N/A)
    bf_max_job_user: int = 0  # of one user (0: no limit)
    bf_max_job_part: int = 0  # of one partition (0: no limit)
    bf_min_prio_reserve: int = 0  # jobs below this priority only start now, reserve nothing
    # ranch_estimate_all (Ranch's own word): every pending job gets a StartTime estimate, those
    # past bf_max_job_test too (for display: starts still obey bf_max_job_test)
    estimate_all: bool = False
    bf_busy_nodes: bool = False  # a reservation prefers nodes already in use
    # read, and always so in Ranch: its cycle plans a snapshot off the event loop and never
    # yields a lock mid-queue, so it never restarts from the top (docs/slurm-compat.md)
    bf_continue: bool = False

    @property
    def backfill(self) -> bool:
        return self.type == "sched/backfill" and self.bf_interval > 0


@attrs.frozen(slots=True)
class PrioritySettings:
    """Issue 44: PriorityType and priority/multifactor's keys (sched/priority.py reads them)."""

    type: str = "priority/basic"  # lower case
    weight_age: int = 0
    weight_assoc: int = 0
    weight_fairshare: int = 0
    weight_jobsize: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    tres: tuple[tuple[str, float], ...] = ()  # PriorityWeightTRES, lower-case names, mem per MB
    flags: tuple[str, ...] = ()  # upper case; NO_NORMAL_ALL expanded
    max_age: int = 7 * 86400  # PriorityMaxAge, seconds
    favor_small: bool = False
    damp: int = 1  # FairShareDampeningFactor
    user_top: bool = False  # SchedulerParameters=enable_user_top

    @property
    def multifactor(self) -> bool:
        return self.type == "priority/multifactor"


@attrs.frozen(slots=True)
class PreemptSettings:
    """PreemptType, PreemptMode and PreemptExemptTime (issue 44): preempt/qos with CANCEL or
    REQUEUE, or off (preempt/none, the default)."""

    type: str = "preempt/none"  # preempt/none | preempt/qos
    mode: str = "off"  # off | cancel | requeue (lower case)
    exempt_time: int | None = None  # seconds a job runs before it may be preempted; None: unset

    @property
    def enabled(self) -> bool:
        return self.type == "preempt/qos" and self.mode != "off"


@attrs.frozen(slots=True)
class GuardSettings:
    """Issue 18: the breakers over the controller's mass decisions (DownGuard*, DrainGuard*)."""

    down_percent: int = 50  # % of the nodes in service silent at once that trips it; 0: off
    down_window: int = 0  # seconds; 0: SlurmdTimeout
    down_min_nodes: int = 4
    drain_percent: int = 25  # % of the nodes that health checks may drain per window; 0: off
    drain_window: int = 600  # seconds
    drain_min_nodes: int = 4


@attrs.frozen(slots=True)
class ClusterConfig:
    """Everything read from cluster.conf and its includes, validated."""

    path: str
    config_hash: str
    files: tuple[tuple[str, str], ...]
    cluster_name: str = "cluster"
    control: ControlSettings = ControlSettings()
    timeouts: Timeouts = Timeouts()
    health: HealthSettings = HealthSettings()
    power: PowerSettings = PowerSettings()
    auth: AuthSettings = AuthSettings()
    http: HttpSettings = HttpSettings()
    nodes: tuple[NodeConfig, ...] = ()
    partitions: tuple[PartitionConfig, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
    ignored: tuple[str, ...] = ()
    warnings: tuple[ConfDiagnostic, ...] = ()
    membership: MembershipSettings = MembershipSettings()
    jobs: JobSettings = JobSettings()
    guards: GuardSettings = GuardSettings()
    access: AccessSettings = AccessSettings()
    reboot: RebootSettings = RebootSettings()
    accounting: AccountingSettings = AccountingSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    priority: PrioritySettings = PrioritySettings()
    relays: tuple[str, ...] = ()  # RelayNodes (issue 47): nodes whose rnoded relays others
    preempt: PreemptSettings = PreemptSettings()
    _node_index: dict[str, NodeConfig] = attrs.field(init=False, eq=False, repr=False)
    _part_index: dict[str, tuple[str, ...]] = attrs.field(init=False, eq=False, repr=False)

    @_node_index.default
    def _index_nodes(self) -> dict[str, NodeConfig]:
        return {n.name: n for n in self.nodes}

    @_part_index.default
    def _index_partitions(self) -> dict[str, tuple[str, ...]]:
        acc: dict[str, list[str]] = {}
        for p in self.partitions:
            for n in p.nodes:
                acc.setdefault(n, []).append(p.name)
        return {k: tuple(v) for k, v in acc.items()}

    def node(self, name: str) -> NodeConfig | None:
        return self._node_index.get(name)

    def partitions_of(self, name: str) -> tuple[str, ...]:
        return self._part_index.get(name, ())

    def partition(self, name: str) -> PartitionConfig | None:
        for p in self.partitions:
            if p.name == name:
                return p
        return None

    @property
    def default_partition(self) -> PartitionConfig | None:
        for p in self.partitions:
            if p.default:
                return p
        return None
