"""The slurm.conf keys Ranch knows: canonical spelling, scope, whether Ranch acts on it, default.

Keys that Slurm knows and Ranch does not act on are still accepted and kept (shown by the config
dump); a key nobody knows gets a "did you mean" suggestion from `suggest`.
"""

from __future__ import annotations

import difflib

import attrs

GLOBAL = "global"
NODE = "node"
PARTITION = "partition"
DOWNNODES = "downnodes"
NODESET = "nodeset"


@attrs.frozen(slots=True)
class KeySpec:
    """One key: `kind` is int, str, path, time, enum, list, hostlist, bool, gres or seconds."""

    name: str
    scope: str
    acted: bool
    kind: str = "str"
    default: object = None
    doc: str = ""


def _acted(scope: str, rows: list[tuple[str, str, object, str]]) -> list[KeySpec]:
    return [KeySpec(n, scope, True, k, d, doc) for n, k, d, doc in rows]


def _ignored(scope: str, names: str) -> list[KeySpec]:
    return [KeySpec(n, scope, False) for n in names.split()]


_GLOBAL_ACTED = _acted(GLOBAL, [
    ("ClusterName", "str", "cluster", "cluster name (lower-cased); `%c` in Include paths"),
    ("SlurmctldHost", "str", None,
     "controller host, `name` or `name(address)`; repeat for backups, first is primary"),
    ("ControlMachine", "str", None, "old spelling of SlurmctldHost (primary)"),
    ("ControlAddr", "str", None, "old: address of ControlMachine"),
    ("BackupController", "str", None, "old: backup controller host"),
    ("BackupAddr", "str", None, "old: address of BackupController"),
    ("SlurmctldPort", "int", 6817, "controller TCP port"),
    ("SrunPortRange", "str", None,
     "LOW-HIGH: the ports rrun listens on for its tasks' I/O (open them on submit hosts)"),
    ("StateSaveLocation", "path", None, "directory where the controller saves state"),
    ("SlurmctldLogFile", "path", None,
     "rctld's log file (unset: stderr, the journal under systemd); reopened on SIGUSR2/SIGHUP"),
    ("SlurmdLogFile", "path", None,
     "rnoded's log file on each node (unset: stderr); reopened on SIGUSR2/SIGHUP"),
    # issue 32: a controller pair on etcd
    ("StateStore", "enum", "file",
     "Ranch: where the controller's state lives: `file` (StateSaveLocation, one controller) or "
     "`etcd` (EtcdEndpoints; every SlurmctldHost campaigns, the winner serves)"),
    ("EtcdEndpoints", "list", None,
     "Ranch: etcd members as HOST:PORT, comma list (required with StateStore=etcd)"),
    ("EtcdPrefix", "str", None, "Ranch: key prefix in etcd (default /ranch/ClusterName)"),
    ("EtcdLeaseTTL", "seconds", 5,
     "Ranch: seconds of the controller's lease; a standby takes over within about this"),
    ("SlurmdSpoolDir", "str", None, "node daemon spool/cache directory (on the node)"),
    ("SlurmdTimeout", "seconds", 300,
     "seconds without contact before a node is set DOWN (0 = never)"),
    ("MessageTimeout", "seconds", 10, "round-trip timeout for one message"),
    ("ReturnToService", "int", 0, "0, 1 or 2: when a DOWN node returns on registration"),
    ("HealthCheckProgram", "path", None, "program each node runs as its health check"),
    ("HealthCheckInterval", "seconds", 0, "seconds between health checks (0 = startup only)"),
    ("HealthCheckTimeout", "seconds", 60, "seconds before a health check is killed"),
    ("HealthCheckNodeState", "list", "ANY",
     "node states eligible for periodic checks: ALLOC MIXED IDLE NONDRAINED_IDLE ANY CYCLE "
     "START_ONLY REBOOT_ONLY"),
    ("SuspendProgram", "path", None, "program called with a hostlist to power nodes down"),
    ("ResumeProgram", "path", None, "program called with a hostlist to power nodes up"),
    ("ResumeFailProgram", "path", None, "program called with nodes that failed to resume"),
    ("SuspendTime", "seconds", None,
     "idle seconds before a node is powered down; INFINITE/-1/NONE = power save off"),
    ("SuspendTimeout", "seconds", 30, "seconds a power-down may take"),
    ("ResumeTimeout", "seconds", 60, "seconds a power-up may take before the node is DOWN"),
    ("SuspendRate", "int", 60, "nodes powered down per minute (0 = unlimited)"),
    ("ResumeRate", "int", 300, "nodes powered up per minute (0 = unlimited)"),
    ("SuspendExcNodes", "hostlist", None,
     "nodes never powered down; `hostlist:N` keeps N of them up"),
    ("SuspendExcParts", "list", None, "partitions whose nodes are never powered down"),
    ("SuspendExcStates", "list", None, "node states that are never powered down"),
    ("HeartbeatInterval", "seconds", 10, "Ranch: seconds between node heartbeats"),
    # issue 33: reboots through the controller (`rcontrol reboot`)
    ("RebootProgram", "path", None,
     "program rnoded runs to reboot its node once `rcontrol reboot` found it idle"),
    ("SlurmdParameters", "str", None,
     "node daemon options; Ranch acts on shutdown_on_reboot (rnoded stops once RebootProgram "
     "returned)"),
    ("RebootUnhealthyMax", "int", 2,
     "Ranch: reboots in a row after which a node still failing its health check on the new "
     "boot is set FAIL for a human (0 = never)"),
    ("AuthKeyFile", "path", None, "Ranch: file with the cluster's shared HMAC key"),
    # issue 19: many users
    ("AuthType", "enum", None,
     "auth/munge: commands prove their user with the local munged (unset: the cluster key "
     "alone, a single-user setup)"),
    ("AuthInfo", "str", None, "options of AuthType, e.g. socket=/run/munge/munge.socket.2"),
    ("SlurmUser", "str", "root", "the controller's user: has admin rights like root"),
    ("AdminUsers", "list", None,
     "Ranch: users (or %group) with admin rights: nodes, reconfigure, anybody's jobs (Slurm "
     "keeps AdminLevel in slurmdbd, which Ranch has not)"),
    # issue 43: accounts, users, associations and QOS in rctld's own store (no slurmdbd)
    ("AccountingStorageType", "str", None,
     "accounting_storage/slurmdbd: rctld keeps the accounting tree racctmgr (sacctmgr) "
     "reads and changes (unset or accounting_storage/none: racctmgr refuses, as sacctmgr "
     "without slurmdbd)"),
    ("AccountingStorageEnforce", "list", None,
     "associations, limits, qos, safe, nojobs, nosteps: under accounting_storage/slurmdbd, "
     "a submission's association, QOS and MaxSubmitJobs checked (scheduling limits: issue 43's "
     "next step)"),
    ("PriorityDecayHalfLife", "time", "7-0",
     "usage's half-life (rshare's RawUsage; 0: no decay, PriorityUsageResetPeriod resets)"),
    ("PriorityCalcPeriod", "time", "5", "minutes between usage accruals and decays"),
    ("PriorityUsageResetPeriod", "enum", "NONE",
     "NONE NOW DAILY WEEKLY MONTHLY QUARTERLY YEARLY: when usage is cleared (half-life 0)"),
    ("PrivateData", "list", None,
     "what only admins see of others: jobs, nodes, usage (also accounts cloud events "
     "partitions reservations users, kept)"),
    ("DisableRootJobs", "bool", False, "YES: root may not submit jobs (a partition's own wins)"),
    ("NodeApproval", "enum", "auto",
     "Ranch: `auto` admits registering nodes, `manual` waits for `rcontrol approve`"),
    ("HttpListen", "str", None,
     "Ranch: HOST:PORT where rctld serves its JSON API, /metrics and web page (unset = off)"),
    ("HttpTokenFile", "path", None,
     "Ranch: file of `name:token` lines (mode 0600) for HTTP bearer tokens"),
    ("HttpAuth", "enum", "loopback",
     "Ranch: who reads over HTTP without a token: `loopback`, `token` (nobody), `none` (all)"),
    # membership (issue 13)
    ("NodeApprovalAuto", "hostlist", None,
     "Ranch: names admitted without `rcontrol approve` under NodeApproval=manual"),
    ("MaxNodeCount", "int", 0,
     "most nodes the cluster may hold; above the configured count, `rnoded --dynamic` nodes "
     "may join (0 = dynamic nodes off)"),
    ("EventLogMaxEvents", "int", 10000, "Ranch: events the membership/state event log keeps"),
    ("EventLogMaxAge", "seconds", 2592000,
     "Ranch: seconds an event is kept in the event log (default 30 days)"),
    # issue 12: jobs
    ("KillWait", "seconds", 30, "seconds between SIGTERM and SIGKILL when a job is ended"),
    ("MinJobAge", "seconds", 300, "seconds a finished job stays listed by rqueue"),
    ("InactiveLimit", "seconds", 0,
     "seconds an allocation (ralloc, rrun outside a job) lives once its command stopped "
     "saying it is alive, then it ends TIMEOUT, Reason InactiveLimit (0 = until its time "
     "limit)"),
    ("MaxJobCount", "int", 10000,
     "most jobs the controller holds (finished ones until MinJobAge); submissions beyond it "
     "are refused"),
    ("MaxArraySize", "int", 1001, "array task ids must be below this (0 = no job arrays)"),
    ("EnforcePartLimits", "enum", "NO",
     "NO: a job over its partition's limits (MaxTime, node count, CPUs) is queued and waits "
     "(PartitionTimeLimit, PartitionNodeLimit, PartitionConfig); ALL: refused at submission if "
     "it exceeds any partition it names; ANY: refused if it fits none (YES is ALL)"),
    # issue 44: scheduling
    ("SchedulerType", "enum", "sched/backfill",
     "sched/backfill: the event-driven FIFO pass, and a backfill planner every bf_interval that "
     "starts lower jobs that delay none ahead and sets each waiting job's StartTime estimate; "
     "sched/builtin: the FIFO pass alone"),
    ("SchedulerParameters", "list", None,
     "comma list; Ranch acts on bf_interval (30 s, -1 = no backfill), bf_window (1440 min), "
     "bf_resolution (60 s), bf_max_job_test (500), bf_max_job_user, bf_max_job_part (0 = no "
     "limit), bf_min_prio_reserve (0), bf_busy_nodes, bf_continue and kill_invalid_depend; "
     "Ranch's own ranch_estimate_all gives every pending job an estimate, past bf_max_job_test "
     "too (display only)"),
    ("PreemptType", "enum", "preempt/none",
     "preempt/qos: a pending job whose QOS lists others' in its Preempt= stops them to start "
     "(preempt/none: no preemption)"),
    ("PreemptMode", "enum", "OFF",
     "OFF, CANCEL (the victim ends PREEMPTED) or REQUEUE (requeued; a --no-requeue job is "
     "cancelled); a QOS's own PreemptMode wins; SUSPEND, GANG, WITHIN are refused"),
    ("PreemptExemptTime", "time", None,
     "how long a job runs before it may be preempted (a QOS's own wins); minutes or "
     "[D-]HH:MM:SS"),
    # issue 22: the finished-job history racct reads (slurmdbd.conf's key and value forms)
    ("PurgeJobAfter", "str", "12months",
     "Ranch: finished jobs older than this leave the job history (racct): N months, Nhours, "
     "Ndays, Nmonths; at least 1hour"),
    # issue 18: the controller's guards against mass DOWN and mass health drains
    ("DownGuardPercent", "int", 50,
     "Ranch: when at least this % of the nodes in service go silent within DownGuardWindow, "
     "they are held `*` instead of set DOWN, until an admin confirms (0 = off)"),
    ("DownGuardWindow", "seconds", 0,
     "Ranch: seconds within which the DownGuard counts silent nodes (0 = SlurmdTimeout)"),
    ("DownGuardMinNodes", "int", 4,
     "Ranch: the DownGuard acts only with at least this many nodes in service (FUTURE, "
     "never-registered and powered-down nodes are not)"),
    ("DrainGuardPercent", "int", 25,
     "Ranch: at most this % of the nodes in service may be drained by health checks within "
     "DrainGuardWindow; further automatic drains pause until an admin resets (0 = off)"),
    ("DrainGuardWindow", "seconds", 600,
     "Ranch: seconds over which the DrainGuard counts health-check drains"),
    ("DrainGuardMinNodes", "int", 4,
     "Ranch: the DrainGuard acts only with at least this many nodes in service (FUTURE, "
     "never-registered and powered-down nodes are not)"),
    # issue 44: priority/multifactor
    ("PriorityType", "enum", "priority/basic",
     "priority/basic (each later job one less) or priority/multifactor (the weighted factors; "
     "rsprio)"),
    ("PriorityWeightAge", "int", 0, "weight of the age factor (queued time over PriorityMaxAge)"),
    ("PriorityWeightAssoc", "int", 0, "weight of the association's Priority"),
    ("PriorityWeightFairshare", "int", 0, "weight of the fair-share factor (rshare's FairShare)"),
    ("PriorityWeightJobSize", "int", 0, "weight of the job-size factor"),
    ("PriorityWeightPartition", "int", 0, "weight of the partition's PriorityJobFactor"),
    ("PriorityWeightQOS", "int", 0, "weight of the QOS's Priority"),
    ("PriorityWeightTRES", "str", None, "CPU=1000,Mem=2000,GRES/gpu=3000: weights per TRES"),
    ("PriorityFlags", "list", None,
     "ACCRUE_ALWAYS CALCULATE_RUNNING DEPTH_OBLIVIOUS NO_FAIR_TREE INCR_ONLY MAX_TRES "
     "NO_NORMAL_ALL NO_NORMAL_ASSOC NO_NORMAL_PART NO_NORMAL_QOS NO_NORMAL_TRES "
     "SMALL_RELATIVE_TO_TIME"),
    ("PriorityMaxAge", "time", "7-0", "queued time at which the age factor reaches 1"),
    ("PriorityFavorSmall", "bool", False, "YES: the job-size factor favours small jobs"),
    ("FairShareDampeningFactor", "int", 1, "classic fair share's damping (NO_FAIR_TREE)"),
    # issue 47: relays
    ("RelayNodes", "hostlist", None,
     "Ranch: nodes whose rnoded relays the other nodes' traffic to rctld (one connection "
     "each); the others are spread over them and fall back to the next, then to rctld "
     "(unset: every node connects to rctld)"),
])

_GLOBAL_IGNORED = _ignored(GLOBAL, """
AccountingStorageBackupHost AccountingStorageExternalHost
AccountingStorageHost AccountingStorageLoc AccountingStorageParameters AccountingStoragePass
AccountingStoragePort AccountingStorageTRES AccountingStorageUser
AccountingStoreFlags AccountingStoreJobComment AcctGatherEnergyType AcctGatherFilesystemType
AcctGatherInterconnectType AcctGatherNodeFreq AcctGatherProfileType AllowSpecResourcesUsage
AuthAltParameters AuthAltTypes BatchStartTimeout BcastExclude BcastParameters
BurstBufferType CacheGroups CertgenParameters CertgenType CertmgrParameters CertmgrType
CheckpointType CryptoType CliFilterParameters CliFilterPlugins CommunicationParameters CompleteWait
CoreSpecPlugin CpuFreqDef CpuFreqGovernors CredType DataParserParameters DebugFlags
DefaultStorageHost DefaultStorageLoc DefaultStoragePass DefaultStoragePort DefaultStorageType
DefaultStorageUser DefCpuPerGPU DefMemPerCPU DefMemPerGPU DefMemPerNode DependencyParameters
EioTimeout Epilog EpilogMsgTime EpilogSlurmctld EpilogTimeout
ExtSensorsFreq ExtSensorsType FastSchedule FederationParameters
FirstJobId GetEnvTimeout GpuFreqDef GresTypes GroupUpdateForce GroupUpdateTime HashPlugin
InteractiveStepOptions JobAcctGatherFrequency JobAcctGatherParams
JobAcctGatherType JobCheckpointDir JobCompHost JobCompLoc JobCompParams JobCompPass JobCompPort
JobCompType JobCompUser JobContainerType JobCredentialPrivateKey JobCredentialPublicCertificate
JobDefaults JobFileAppend JobRequeue JobSubmitPlugins KeepAliveTime KillOnBadExit
LaunchParameters LaunchType Licenses LogTimeFormat MailDomain MailProg
MaxBatchRequeue MaxDBDMsgs MaxJobId MaxMemPerCPU MaxMemPerNode
MaxStepCount MaxTasksPerNode MCSParameters MCSPlugin MemLimitEnforce MpiDefault
MpiParams NamespaceType NodeFeaturesPlugins OverTimeLimit PluginDir PlugStackConfig
PowerParameters PowerPlugin PreemptParameters
PrEpParameters PrEpPlugins
PriorityParameters PrioritySiteFactorParameters
PrioritySiteFactorPlugin ProctrackType Prolog PrologEpilogTimeout
PrologFlags PrologSlurmctld PrologTimeout PropagatePrioProcess PropagateResourceLimits
PropagateResourceLimitsExcept ReconfigFlags RequeueExit RequeueExitHold
ResvEpilog ResvOverRun ResvProlog RoutePlugin SallocDefaultCommand SchedulerPort
SchedulerRootFilter
SchedulerTimeSlice ScronParameters SelectType SelectTypeParameters SlurmctldAddr
SlurmctldDebug SlurmctldParameters SlurmctldPidFile SlurmctldPrimaryOffProg
SlurmctldPrimaryOnProg SlurmctldSyslogDebug SlurmctldTimeout SlurmdDebug
SlurmdPidFile SlurmdPort SlurmdSyslogDebug SlurmdUser SlurmSchedLogFile
SlurmSchedLogLevel SrunEpilog SrunProlog SwitchParameters SwitchType
TaskEpilog TaskPlugin TaskPluginParam TaskProlog TCPTimeout TLSParameters TLSType TmpFS
TopologyParam TopologyPlugin TrackWCKey TreeWidth UnkillableStepProgram UnkillableStepTimeout
UsePAM VSizeFactor WaitTime X11Parameters
""")

_NODE_ACTED = _acted(NODE, [
    ("NodeName", "hostlist", None, "node names (hostlist); DEFAULT sets defaults for later lines"),
    ("NodeHostname", "hostlist", None, "host names, one per node (default: NodeName)"),
    ("NodeAddr", "hostlist", None, "addresses, one per node (default: NodeHostname)"),
    ("Port", "int", None, "node daemon port"),
    ("CPUs", "int", None, "logical CPUs (default Boards*Sockets*CoresPerSocket*ThreadsPerCore)"),
    ("Procs", "int", None, "old spelling of CPUs"),
    ("Boards", "int", 1, "baseboards"),
    ("Sockets", "int", 1, "sockets (per node)"),
    ("SocketsPerBoard", "int", 1, "sockets per board"),
    ("CoresPerSocket", "int", 1, "cores per socket"),
    ("ThreadsPerCore", "int", 1, "hardware threads per core"),
    ("RealMemory", "int", 1, "memory in MiB"),
    ("TmpDisk", "int", 0, "temporary disk in MiB"),
    ("Gres", "gres", None, "generic resources, `name[:type]:count`, comma list"),
    ("Features", "list", None, "features, comma list"),
    ("Feature", "list", None, "alias of Features"),
    ("Weight", "int", 1, "scheduling weight (lower preferred)"),
    ("State", "enum", "UNKNOWN", "CLOUD DOWN DRAIN FAIL FAILING FUTURE UNKNOWN"),
    ("Reason", "str", None, "reason for a DOWN/DRAIN/FAIL State"),
    ("SuspendTime", "seconds", None,
     "this node's idle seconds before power down (beats partition and global); INFINITE = never"),
])

_NODE_IGNORED = _ignored(NODE, """
ActiveFeatures AvailableFeatures BcastAddr CoreSpecCount CpuBind CpuSpecList Extra MemSpecLimit
Parameters ResumeTimeout RestrictedCoresPerGPU SuspendTimeout Topology TRESWeights
""")

_PARTITION_ACTED = _acted(PARTITION, [
    ("PartitionName", "str", None, "partition name; DEFAULT sets defaults for later lines"),
    ("Nodes", "hostlist", None, "member nodes: hostlists, NodeSet names, ALL, or empty"),
    ("Default", "bool", False, "YES makes this the default partition"),
    ("State", "enum", "UP", "UP DOWN DRAIN INACTIVE"),
    ("MaxTime", "time", None, "longest job time limit (default UNLIMITED)"),
    ("DefaultTime", "time", None, "job time limit when none is asked (default MaxTime)"),
    ("TRESBillingWeights", "str", None,
     "CPU=1.0,Mem=0.25G,GRES/gpu=2.0: the billing TRES usage accrues (default: CPUs)"),
    ("Hidden", "bool", False, "YES hides the partition from rinfo unless -a"),
    ("SuspendTime", "seconds", None,
     "idle seconds before its nodes power down (beats global, a node's own wins); INFINITE never"),
    ("DisableRootJobs", "bool", None, "YES: root may not submit jobs here (default: global)"),
    # acted on under AccountingStorageEnforce (ranch/assoc/partpolicy.py)
    ("QOS", "str", None, "the partition's QOS: its limits apply first (unless OverPartQOS)"),
    ("AllowAccounts", "str", None, "accounts that may use it (ALL: any)"),
    ("DenyAccounts", "str", None, "accounts that may not (without AllowAccounts)"),
    ("AllowQos", "str", None, "QOS that may use it (ALL: any)"),
    ("DenyQos", "str", None, "QOS that may not (without AllowQos)"),
    ("PriorityJobFactor", "int", 1, "the partition factor of priority/multifactor (0-65533)"),
    ("PriorityTier", "int", 1, "pending jobs of a higher tier are considered first (0-65533)"),
    ("Priority", "int", None, "sets both PriorityJobFactor and PriorityTier"),
])

_PARTITION_IGNORED = _ignored(PARTITION, """
AllocNodes AllowGroups Alternate CpuBind DefCpuPerGPU DefMemPerCPU
DefMemPerGPU DefMemPerNode ExclusiveTopo ExclusiveUser
GraceTime LLN MaxCPUsPerNode MaxCPUsPerSocket MaxMemPerCPU MaxMemPerNode MaxNodes MinNodes
OverSubscribe OverTimeLimit PowerDownOnIdle PreemptMode
ReqResv ResumeTimeout RootOnly SelectTypeParameters Shared SuspendTimeout
Topology
""")

_DOWNNODES = _acted(DOWNNODES, [
    ("DownNodes", "hostlist", None, "nodes to mark at start"),
    ("State", "enum", "DOWN", "DOWN DRAIN FAIL FAILING FUTURE UNKNOWN"),
    ("Reason", "str", None, "reason shown for these nodes"),
])

_NODESET = _acted(NODESET, [
    ("NodeSet", "str", None, "name usable in a partition's Nodes"),
    ("Nodes", "hostlist", None, "member nodes"),
    ("Feature", "str", None, "member nodes are those with this feature"),
])

# Line kinds Slurm knows whose lines Ranch keeps as ignored settings.
IGNORED_LINE_KEYS = ("FrontendName", "FrontendAddr")

ALL_SPECS: tuple[KeySpec, ...] = tuple(
    _GLOBAL_ACTED + _GLOBAL_IGNORED + _NODE_ACTED + _NODE_IGNORED + _PARTITION_ACTED
    + _PARTITION_IGNORED + _DOWNNODES + _NODESET
)


def _table(scope: str) -> dict[str, KeySpec]:
    return {s.name.lower(): s for s in ALL_SPECS if s.scope == scope}


GLOBAL_KEYS = _table(GLOBAL)
NODE_KEYS = _table(NODE)
PARTITION_KEYS = _table(PARTITION)
DOWNNODES_KEYS = _table(DOWNNODES)
NODESET_KEYS = _table(NODESET)
for _k in IGNORED_LINE_KEYS:
    GLOBAL_KEYS[_k.lower()] = KeySpec(_k, GLOBAL, False)

_ALL_NAMES = sorted({s.name for s in ALL_SPECS})


def suggest(key: str, table: dict[str, KeySpec] | None = None) -> str | None:
    """The closest known canonical key to a misspelt one, or None."""
    names = [s.name for s in table.values()] if table is not None else _ALL_NAMES
    lowered = {n.lower(): n for n in names}
    hits = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.75)
    return lowered[hits[0]] if hits else None
