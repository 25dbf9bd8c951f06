"""Protocol versions: what each one added, and how to write a body an older peer understands.

Changes are additive only: a field added in version N has a default, so a body from an older
peer decodes (cattrs fills the default), and a body for an older peer drops the newer fields.

Version 5 changed the frame (its header carries a MAC of its own, protocol/rawframe.py, so that
rctld can check a large frame's sender before reading its body) and added the fields below (run
identity, sbatch's further options, the guards' messages).
A frame is written in the version of the peer it goes to, so a version-4 peer never sees one.

Within version 5, without a new field (issue 30): Register/Heartbeat `runs` list every run the
node holds until its ending is recorded (announced, starting, running, ending), and may name one
job twice (an old run ending while a newer one starts). A controller that kept one run per job
id keeps the last of the sorted pairs, the newer run: the one it asked for.

Version 6 (issue 31): rnoded no longer sends a ShutdownNotice when its daemon stops (SIGTERM:
the node and its jobs stay); it sends one with `leaving` only when the node goes away (SIGUSR1).
rctld takes an older peer's notice (no `leaving`) as its daemon stopping, so upgrading a node
under a running job neither DOWNs the node nor requeues the job.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import attrs

from ranch.protocol import messages as m

CURRENT = 6
# From this version rnoded holds a LaunchStep until its job has started there (as slurmd holds a
# step); an older one refuses it, so the controller grants such a node's step only then.
HOLDS_STEPS = 6
# The current version and every one before it: keeping version 1 costs nothing (its frames
# are held to the unproven size limit). Slurm 24.11+ accepts the current and the three before.
SUPPORTED: tuple[int, ...] = (1, 2, 3, 4, 5, 6)

# version -> {class: names of the fields that version added}
FIELDS_ADDED: dict[int, dict[type, tuple[str, ...]]] = {
    2: {
        m.GpuInfo: ("driver",),
        m.Hardware: ("numa_nodes", "os", "arch", "hostname"),
        m.HealthReport: ("warnings", "ran_at"),
        m.Heartbeat: ("health",),
    },
    3: {
        m.Register: ("config_hash", "health"),
        m.RegisterReply: ("node_state", "health_check_first"),
        m.HeartbeatReply: ("config_hash",),
    },
    4: {
        m.Register: ("job_ids", "jobs_ended", "dynamic", "dynamic_conf"),
        m.RegisterReply: ("kill_job_ids",),
        m.Heartbeat: ("jobs_ended",),
        m.HeartbeatReply: ("kill_job_ids",),
        m.SubmitJob: ("max_nodes", "begin_time"),  # issue 12: -n over nodes, --begin
        m.JobControl: ("begin_time",),
    },
    5: {  # issue 24: every message about a job names its run
        m.Register: ("runs",),
        # issue 32: the controller's epoch on its orders; a version-5 node from before it
        # ignores the field (extra keys are tolerated), a version-4 one never sees it
        m.RegisterReply: ("kill_runs", "epoch"),
        m.LaunchJob: ("epoch",),
        m.NodeSettings: ("controllers",),
        m.Heartbeat: ("runs",),
        m.HeartbeatReply: ("kill_runs",),
        m.KillJob: ("restarts", "epoch"),
        # issue 22: the rest of sbatch's options (a v4 controller or node drops them)
        m.SubmitJob: ("ntasks_per_node", "gpus_per_task", "cpus_per_gpu", "mem_per_cpu",
                      "mem_per_gpu", "account", "qos", "wckey", "comment", "constraint",
                      "dependency", "kill_on_invalid_dep", "nice", "mail_type", "mail_user",
                      "open_mode", "warn_signal", "warn_time", "warn_batch", "oversubscribe",
                      "hint", "export", "get_user_env", "input", "test_only",
                      "allocation",  # issue 20: ralloc, rrun outside a job
                      "held_by", "immediate"),  # its holder (InactiveLimit), salloc -I
        m.SubmitReply: ("start_time", "nodes", "cpus", "partition"),
        m.GetJobs: ("fields",),  # issue 23: rqueue asks for the keys it shows
        m.CancelJobs: ("steps",),  # issue 20: rcancel N.S
        m.JobControl: ("exit_code", "signal"),  # issue 20: an allocation's release
        m.JobSpec: ("open_mode", "warn_signal", "warn_time", "warn_batch", "input",
                    "cluster_name"),
    },
    6: {  # issue 31 (daemons) and issue 33 (reboots: a v5 rnoded is never sent RebootNode; its
        # reboot times out)
        m.ShutdownNotice: ("leaving",),  # a daemon stopping is not its node leaving
        m.NodeSettings: ("log_file", "reboot_program", "shutdown_on_reboot",
                         "relays"),  # SlurmdLogFile; relays: issue 47 (an older v6 node ignores it)
        m.ReconfigureResult: ("warnings",),  # rcontrol reconfigure shows them
        m.ConfigDump: ("ignored",),  # rcontrol show config sets them apart
        # a launch failure of the node's drains it (node_fault); issue 48 without a new version:
        # what a job or step used (usage), which a version-6 controller from before it ignores
        # (extra keys are tolerated) and a version-5 one never sees
        m.JobEnd: ("node_fault", "usage"),
        m.StepEnd: ("usage",),
        # issue 35, no new version: an older ralloc ignores it, a newer one against an older
        # controller asks with GetJobs as before
        m.SubmitReply: ("job",),
        # issue 34 (no new version): a job's options given blank and whether -n was, for show
        # job; a version-6 controller from before it ignores the field (extra keys are
        # tolerated), a version-5 one never sees it, and either shows those options as not given
        m.SubmitJob: ("given_blank", "ntasks_given"),
        # issue 48 (no new version): rcontrol update JobId= Key=Value...; a version-6
        # controller from before it ignores the field and refuses the unknown action "update"
        m.JobControl: ("updates",),
        # step output across an rnoded kill (no new version): rrun says it acknowledges its
        # output (OutputAck, a step message: an rnoded from before it skips the frame as an
        # unknown type); an older controller or node ignores the field, a version-5 one never
        # sees it, and the step's output goes as before, unspooled
        m.StepRequest: ("io_resume",),
        m.StepSpec: ("io_resume",),
        # issue 50 (no new version): the start confirmed in LaunchJob's answer. An older
        # version-6 rnoded ignores `started_answer` and answers Ack, then JobStarted; a
        # version-5 one never sees it; only an rnoded that saw it sends `answers_launch`
        m.LaunchJob: ("started_answer",),
        m.JobStarted: ("answers_launch",),
    },
}

# Message types that did not exist in version 1, by the version that introduced them.
# SetAllocation (versions 3 to 5) left the wire in issue 24: only jobs allocate a node's CPUs, and
# a peer that still sends one is refused with unknown_type like any other unknown message.
MESSAGE_SINCE: dict[str, int] = {
    "LaunchJob": 4, "KillJob": 4,
    "NodeMembership": 4, "GetEvents": 4, "Events": 4,
    # issue 12: the job commands
    "SubmitJob": 4, "SubmitReply": 4, "GetJobs": 4, "JobList": 4, "CancelJobs": 4,
    "JobControl": 4, "JobResult": 4,
    "JobStarted": 5,
    # issue 18: the controller's guards
    "GuardRequest": 5, "GuardStatus": 5,
    # issue 22: racct (a controller without them answers unknown_type, which racct words)
    "GetAcct": 5, "AcctList": 5,
    # issue 19: a command's MUNGE credential (a controller without it refuses the frame)
    "Credential": 5,
    # issue 32: rcontrol takeover (a controller without it answers unknown_type)
    "Takeover": 5,
    # issue 20: job steps (rrun)
    **{cls.__name__: 5 for cls in m.STEP_MESSAGES},
    # issue 33: rcontrol reboot, and the controller's word to rnoded
    "RebootNodes": 6, "RebootNode": 6, "ReservationRequest": 6, "ReservationReply": 6,
    # issue 47: relays (a controller without them answers unknown_type; the relay retries)
    "RelayJoin": 6, "RelayUp": 6, "RelayDown": 6,
    # issue 44: rcontrol reconfigure --dry-run (a controller without it answers unknown_type)
    "ReconfigureDryRun": 6, "ReconfigureDryRunReply": 6,
}


def message_known(type_name: str, version: int) -> bool:
    return type_name in m.MESSAGE_TYPES and MESSAGE_SINCE.get(type_name, 1) <= version


def _fields_after(cls: type, version: int) -> set[str]:
    return {
        name
        for added_in, table in FIELDS_ADDED.items()
        if added_in > version
        for name in table.get(cls, ())
    }


def downgrade(value: Any, cls: Any, version: int) -> Any:
    """Drop from an unstructured body every field `version` does not know, recursively."""
    if version >= CURRENT or value is None:
        return value
    if cls is m.GpuReadings:  # on the wire a list of GpuMetrics (ranch.protocol.codec)
        cls = tuple[m.GpuMetrics, ...]
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(cls) if a is not type(None)]
        return downgrade(value, inner[0], version) if len(inner) == 1 else value
    if origin is tuple:
        args = typing.get_args(cls)
        if len(args) == 2 and args[1] is Ellipsis:
            return [downgrade(v, args[0], version) for v in value]
        return value
    if isinstance(cls, type) and attrs.has(cls) and isinstance(value, dict):
        attrs.resolve_types(cls)
        drop = _fields_after(cls, version)
        return {
            f.name: downgrade(value[f.name], f.type, version)
            for f in attrs.fields(cls)
            if f.name in value and f.name not in drop
        }
    return value
