"""The messages of job steps (rrun, srun's twin): rrun <-> rctld, rctld <-> rnoded, rnoded <-> rrun.

How a step runs (issue 20): rrun opens a listener for its tasks' I/O and asks rctld for a step
(StepRequest, on rrun's credentialed connection); rctld checks who asks and what fits in the job,
records the step, and answers StepGranted with the layout and a fresh step key; it pushes
LaunchStep to each node's rnoded over that node's own connection. Each rnoded starts its tasks
and connects to rrun's listener itself: the frames on that connection (StepHello, TaskOutput,
TaskExit one way, StepSignal and TaskInput the other) are signed with the step key, which only
rctld, rrun and the step's nodes hold, so the output never passes through rctld. Each rnoded
reports its part's end to rctld (StepEnd), which records the step's end.
"""

from __future__ import annotations

import attrs

from ranch.protocol.usage import Usage

# ---------------------------------------------------------------------------------------------
# rrun <-> controller


@attrs.frozen
class StepRequest:
    """rrun: start a step in job `job_id` (srun inside an allocation). Sizes arrive resolved by
    rrun as srun resolves them (its options, else the allocation's SLURM_* variables); 0 means
    "not asked" and lets rctld choose: one task per node of the step, all the job's nodes."""

    job_id: int
    argv: tuple[str, ...]
    cwd: str
    io_host: str  # where the nodes reach rrun's I/O listener
    io_port: int
    env: tuple[tuple[str, str], ...] = ()
    name: str = ""  # -J; "" = the command's file name
    ntasks: int = 0  # -n
    nodes: int = 0  # -N
    ntasks_per_node: int = 0
    cpus_per_task: int = 0  # -c; 0 = 1
    gpus_per_task: int = 0
    gpus_per_node: int = 0
    nodelist: str = ""  # -w, hostlist expression: these nodes of the job
    exclusive: bool = False  # --exclusive: CPUs no other running step uses
    overlap: bool = False  # --overlap: may share CPUs with running steps
    stdout: str = ""  # -o pattern, written on the nodes ("" = streamed to rrun)
    stderr: str = ""  # -e pattern ("" = with stdout)
    input: str = ""  # -i: "" / "all" (rrun's stdin to every task) | "none" | task id | file
    unbuffered: bool = False  # -u: output leaves a task's node as it is read
    # --exact (or --exclusive, or -c given): the step holds the CPUs its tasks ask for;
    # without it, as srun 22.05's, every CPU of the job on its nodes that no other step holds
    exact: bool = False
    # rrun counts the output it took and says so (OutputAck): the nodes spool what they send
    # and, after an rnoded restart, send again what rrun missed (an older rctld drops it)
    io_resume: bool = False


@attrs.frozen
class StepGranted:
    """The step rctld made: its id, where its tasks run, and the key its I/O frames carry."""

    job_id: int
    step_id: int
    nodelist: str  # hostlist of the step's nodes (SLURM_STEP_NODELIST)
    nodes: tuple[str, ...]  # the same nodes, in task order
    tasks: tuple[tuple[int, ...], ...]  # the task ids of each node, in `nodes` order
    key: str  # hex: signs every frame between the step's nodes and rrun
    kill_wait: int = 30  # KillWait: what srun's "Job step aborted: Waiting up to N+2 s" says


# ---------------------------------------------------------------------------------------------
# Controller <-> node daemon


@attrs.frozen
class StepSpec:
    """What one node needs to run its tasks of a step."""

    job_id: int
    restarts: int  # the job's run (JobSpec.restarts): a step of an older run is refused
    step_id: int
    name: str
    user: str
    uid: int
    gid: int
    argv: tuple[str, ...]
    cwd: str
    env: tuple[tuple[str, str], ...]
    nodelist: str  # the step's nodes
    node_index: int  # this node's place among them (SLURM_NODEID)
    tasks: tuple[int, ...]  # this node's task ids (SLURM_PROCID), first is SLURM_LOCALID 0
    ntasks: int  # in the whole step
    tasks_per_node: str  # SLURM_STEP_TASKS_PER_NODE: "2(x3)"
    cpus_per_task: int
    io_host: str
    io_port: int
    key: str
    gpus: tuple[tuple[int, ...], ...] = ()  # per task here: its GPU indices (() = the job's)
    stdout: str = ""
    stderr: str = ""
    input: str = ""
    unbuffered: bool = False
    job_nodelist: str = ""  # SLURM_JOB_NODELIST
    partition: str = ""
    io_resume: bool = False  # StepRequest.io_resume: rrun answers each StepHello with OutputAck


@attrs.frozen
class LaunchStep:
    """Controller -> node: start these tasks; Ack once they run (or Error launch_failed, why)."""

    step: StepSpec


@attrs.frozen
class KillStep:
    """Controller -> node: signal a step's tasks here; signal 0 ends them (SIGTERM, then
    SIGKILL after KillWait) and the node reports its StepEnd. Answered with Ack."""

    job_id: int
    step_id: int
    signal: int = 0
    restarts: int = -1


@attrs.frozen
class StepEnd:
    """Node -> controller: how this node's tasks of a step ended (the highest exit code, the
    first signal that killed one). state: COMPLETED | FAILED | CANCELLED | OUT_OF_MEMORY |
    LAUNCH_FAILED. Answered with Ack once recorded."""

    job_id: int
    step_id: int
    state: str
    exit_code: int = 0
    signal: int = 0
    restarts: int = 0
    started_at: float = 0.0
    ended_at: float = 0.0
    message: str = ""
    usage: Usage | None = None  # issue 48: what its tasks here used (None: not measured)


# ---------------------------------------------------------------------------------------------
# Node daemon <-> rrun (signed with StepGranted.key; request id 0 throughout)


@attrs.frozen
class StepHello:
    """A node's first frame on its I/O connection to rrun."""

    job_id: int
    step_id: int
    node: str
    tasks: tuple[int, ...]


@attrs.frozen
class TaskOutput:
    """A piece of a task's stdout (fd 1) or stderr (fd 2): bytes as latin-1 text."""

    task: int
    fd: int
    data: str


@attrs.frozen
class TaskExit:
    task: int
    exit_code: int = 0
    signal: int = 0  # the signal that killed it, 0 if it exited


@attrs.frozen
class TaskInput:
    """rrun -> node: stdin for the node's tasks that read rrun's; eof closes their stdin."""

    data: str = ""  # latin-1 text
    eof: bool = False


@attrs.frozen
class StepSignal:
    """rrun -> node: deliver this signal to the step's tasks here (0: end them for good)."""

    signal: int


@attrs.frozen
class OutputAck:
    """rrun -> node: the bytes of each (task, fd) stream of the node's tasks rrun has taken,
    counted over every connection of the step (a stream not named: none). Sent in answer to
    each StepHello and then after every so much output: the node sends again from these
    counts what a killed rnoded had read but rrun never got, and lets go of what precedes them.
    An rnoded that does not know it skips the frame (unknown_type)."""

    received: tuple[tuple[int, int, int], ...] = ()  # (task, fd, bytes)


STEP_MESSAGES: tuple[type, ...] = (StepRequest, StepGranted, LaunchStep, KillStep, StepEnd,
                                   StepHello, TaskOutput, TaskExit, TaskInput, StepSignal,
                                   OutputAck)
