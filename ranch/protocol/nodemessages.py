"""The node daemon's messages with the controller, and the pieces (hardware, metrics, job
spec) other messages share."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from operator import attrgetter

import attrs

from ranch.protocol.usage import Usage

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


GPU_FIELDS = tuple(f.name for f in attrs.fields(GpuMetrics))  # a GPU's figures, in order


@attrs.frozen
class GpuReadings:
    """A node's GpuMetrics, kept flat: each GPU's figures in GPU_FIELDS' order, one after the
    other. On the wire a list of GpuMetrics objects, as before (ranch.protocol.codec). The
    controller keeps a node's figures packed (ctld/nodes/node.py); building eight GpuMetrics a
    heartbeat only to pack them was most of its decode (docs/benchmarks.md, issue 50)."""

    flat: tuple[int | float, ...] = ()

    @classmethod
    def of(cls, gpus: Iterable[GpuMetrics] | GpuReadings) -> GpuReadings:
        if type(gpus) is GpuReadings:
            return gpus
        return cls(tuple(x for g in gpus for x in _figures(g)))

    def __len__(self) -> int:
        return len(self.flat) // PER_GPU

    def __getitem__(self, i: int) -> GpuMetrics:
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        at = (i % len(self)) * PER_GPU
        return GpuMetrics(*self.flat[at:at + PER_GPU])  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[GpuMetrics]:
        flat = self.flat
        for at in range(0, len(flat), PER_GPU):
            yield GpuMetrics(*flat[at:at + PER_GPU])  # type: ignore[arg-type]


PER_GPU = len(GPU_FIELDS)  # figures a GPU
_figures = attrgetter(*GPU_FIELDS)


def gpu_readings(gpus: Iterable[GpuMetrics] | GpuReadings) -> GpuReadings:
    """Metrics.gpus' converter: GpuMetrics (a tuple, a list) or GpuReadings, kept as the latter."""
    return GpuReadings.of(gpus)


@attrs.frozen
class Metrics:
    """Live figures carried by every heartbeat."""

    cpu_pct: float
    load_1m: float
    memory_used_mib: int
    memory_total_mib: int
    max_temperature_c: float | None = None
    # given as GpuMetrics (a tuple, a list) or as GpuReadings; kept as GpuReadings
    gpus: GpuReadings = attrs.field(default=GpuReadings(), converter=gpu_readings)


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
    log_file: str | None = None  # SlurmdLogFile (version 6)
    # issue 33 (version 6): what rnoded runs when the controller reboots it, and whether it
    # stops once that returned (SlurmdParameters=shutdown_on_reboot)
    reboot_program: str | None = None
    shutdown_on_reboot: bool = False
    # a controller pair's SlurmctldHost entries as HOST:PORT, in order (issue 32): the node
    # tries them in turn; empty with one controller (the node keeps its --server)
    controllers: tuple[str, ...] = ()
    # issue 47 (version 6, no new version): RelayNodes as NAME=HOST:PORT, in config order; a
    # node not among them tries its relay first (protocol/relaymessages.py:relay_order)
    relays: tuple[str, ...] = ()


@attrs.frozen
class JobSpec:
    """What one node needs to run its part of a batch job (the batch script runs on the first
    node of the allocation only; the others hold their resources, as sbatch's allocation does)."""

    job_id: int
    name: str  # -J; default the script's file name or "wrap"
    user: str
    uid: int
    gid: int
    script: str  # the batch script's text; --wrap "cmd" becomes "#!/bin/sh\ncmd\n"
    workdir: str  # -D, default the submit directory
    stdout: str  # path pattern, relative to workdir; %j %x %N %u %A %a %% expanded by the node
    stderr: str = ""  # "" = into stdout
    argv: tuple[str, ...] = ()  # the script's arguments
    env: tuple[tuple[str, str], ...] = ()  # the submitter's environment (sbatch --export=ALL)
    nodelist: str = ""  # the whole allocation, hostlist expression (SLURM_JOB_NODELIST)
    num_nodes: int = 1
    ntasks: int = 1
    cpus_per_task: int = 1
    cpus: int = 1  # CPUs of this node given to the job
    mem_mib: int = 0  # memory on this node, MiB (0 = no limit asked)
    gpus: tuple[int, ...] = ()  # GPU indices on this node (CUDA_VISIBLE_DEVICES)
    time_limit: float | None = None  # seconds; None = unlimited
    kill_wait: float = 30.0  # seconds between SIGTERM and SIGKILL (Slurm's KillWait)
    restarts: int = 0  # SLURM_RESTART_COUNT; above 0 the output files are appended, not truncated
    partition: str = ""
    submit_host: str = ""
    array_job_id: int = 0  # 0 = not part of an array
    array_task_id: int | None = None
    cluster_name: str = ""  # SLURM_CLUSTER_NAME (version 5)
    # issue 22 (sbatch's options on the node)
    open_mode: str = ""  # --open-mode: "append" | "truncate" | "" (truncate a first run)
    warn_signal: int = 0  # --signal: this signal warn_time seconds before the time limit
    warn_time: int = 0
    warn_batch: bool = False  # --signal=B:...: the batch shell only, not what it started
    input: str = ""  # -i: stdin file pattern, relative to workdir ("" = /dev/null)
    # the CPUs of every node of the allocation, in nodelist order (SLURM_JOB_CPUS_PER_NODE);
    # empty from an older rctld: the node then knows its own share only
    cpus_per_node: tuple[int, ...] = ()


@attrs.frozen
class JobEnd:
    """How a job's processes on one node ended (node -> controller)."""

    job_id: int
    # COMPLETED (exit 0) | FAILED (exit != 0, or killed by a signal nobody sent) | TIMEOUT |
    # CANCELLED (a KillJob ended it) | OUT_OF_MEMORY | LAUNCH_FAILED (never started: bad uid,
    # missing workdir, unwritable output...; `message` says why)
    state: str
    exit_code: int = 0
    signal: int = 0  # the signal that ended the batch script, 0 if it exited
    message: str = ""
    started_at: float = 0.0  # wall clock
    ended_at: float = 0.0
    restarts: int = 0  # JobSpec.restarts of the run that ended (tells a stale run's report apart)
    # LAUNCH_FAILED for a fault of the node's (its spool, its job supervisor), not of the job's:
    # the controller drains the node, as slurmctld does (version 6)
    node_fault: bool = False
    # issue 48: what the batch script used here (None: not measured, as from an older rnoded)
    usage: Usage | None = None


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
    job_ids: tuple[int, ...] = ()  # jobs still running here (re-adopted after an rnoded restart)
    jobs_ended: tuple[JobEnd, ...] = ()  # endings not yet acknowledged (see Heartbeat)
    # `rnoded --dynamic` (Slurm's slurmd -Z): a node not in the config asks to join with its
    # hardware; `dynamic_conf` is extra NodeName keys ("Features=a,b Gres=gpu:2 Weight=5").
    dynamic: bool = False
    dynamic_conf: str = ""
    runs: tuple[tuple[int, int], ...] = ()  # (job id, restarts) of each job in job_ids
    # issue 19: the node credential rctld issued at its first admission (kept 0600 in its spool);
    # "" = none yet; None = an rnoded that predates node credentials (it is issued none)
    node_credential: str | None = None


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
    kill_job_ids: tuple[int, ...] = ()  # as HeartbeatReply.kill_job_ids
    kill_runs: tuple[tuple[int, int], ...] = ()  # as HeartbeatReply.kill_runs
    # issue 19: a node credential issued on this admission; the node keeps it and presents it
    # in every later Register under its name
    node_credential: str = ""
    epoch: int = 0  # the controller's seat (issue 32): older orders are refused from now on


@attrs.frozen
class Heartbeat:
    name: str
    seq: int
    metrics: Metrics
    job_ids: tuple[int, ...] = ()  # jobs whose processes run on this node now
    health: HealthReport | None = None  # present when a health check ran since the last beat
    # Jobs that ended since the last acknowledged beat. The node repeats an ending in every beat
    # (and in Register) until a HeartbeatReply/RegisterReply arrives for a message that held it:
    # at-least-once, so the controller must treat a second report of one (job_id, run) as a no-op.
    jobs_ended: tuple[JobEnd, ...] = ()
    # (job id, restarts) of each run the node holds until its ending is recorded (a job may
    # appear with two runs): an older run is never taken for the current one (version 5)
    runs: tuple[tuple[int, int], ...] = ()


@attrs.frozen
class HeartbeatReply:
    node_state: str  # complete string, so the node can pick when to run its health check
    config_hash: str = ""  # a node whose cached hash differs should expect a ConfigPush
    # Jobs the node reported running that the controller does not place there (requeued
    # elsewhere, cancelled while the node was away): the node kills them, reporting no ending.
    kill_job_ids: tuple[int, ...] = ()
    # Version 5: the runs to kill, (job id, restarts): a newer run of the same job is spared.
    kill_runs: tuple[tuple[int, int], ...] = ()


@attrs.frozen
class ConfigPush:
    """Controller -> node, unsolicited, on reconfigure."""

    settings: NodeSettings
    config_files: tuple[ConfigFile, ...]
    config_hash: str


@attrs.frozen
class LaunchJob:
    """Controller -> node, unsolicited: start this job. The node answers once the job's
    processes run: with its JobStarted when `started_answer` asks for it, else with an Ack and
    then a JobStarted request of its own (or Error with code "launch_failed" and why; it also
    reports a JobEnd)."""

    job: JobSpec
    epoch: int = 0  # the sending controller's seat (issue 32); 0: a controller without one
    # the start confirmed in the answer, one frame each way less a job (issue 50); an rnoded
    # from before it ignores the field and answers Ack, then sends JobStarted, as before
    started_answer: bool = False


@attrs.frozen
class KillJob:
    """Controller -> node, unsolicited; answered with Ack.

    signal 0 ends the job: SIGTERM to its whole process group, SIGKILL after its kill_wait, and a
    JobEnd (state CANCELLED) follows. Any other signal is only delivered (rcancel --signal)."""

    job_id: int
    signal: int = 0
    reason: str = ""  # cancelled | requeued | node_down | stale: for the node's log
    restarts: int = -1  # the run to act on (version 5); -1: whichever run is here
    epoch: int = 0  # as LaunchJob.epoch


@attrs.frozen
class JobStarted:
    """Node -> controller: its part of run `restarts` of the job runs since `started_at` (wall
    clock): the launch is confirmed. A request of the node's is answered with Ack (nothing the
    node keeps waits on it); the answer to a LaunchJob (`answers_launch`) is not answered."""

    job_id: int
    restarts: int
    started_at: float
    answers_launch: bool = False


@attrs.frozen
class ShutdownNotice:
    """A node leaving (rnoded's SIGUSR1, docs/daemons.md): DOWN, its jobs requeued. Before
    version 6 rnoded sent one on every stop; a notice without `leaving` is a daemon stopping."""

    name: str
    reason: str = "rnoded shut down"
    leaving: bool = False  # version 6


@attrs.frozen
class Ack:
    pass


NODE_MESSAGES: tuple[type, ...] = (Register, RegisterReply, Heartbeat, HeartbeatReply, ConfigPush,
                                   LaunchJob, KillJob, JobStarted, ShutdownNotice, Ack)
