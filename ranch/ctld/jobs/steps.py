"""Job steps in the controller (rrun, srun's twin): granting a step inside a running job, its
record, LaunchStep to its nodes, their StepEnds, rcancel N.S, and the steps' end with their job.

rctld only authorises and records: the tasks' output goes from each node straight to rrun (the
frames signed with the step's own key, protocol/stepmessages.py). Every step state change goes
through statemachine/steptable.py. A step is durable before StepGranted leaves (the job's record
carries its steps), and so is its end before the node's Ack.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.jobs.steprecord import Step
from ranch.ctld.jobs.usagerecord import node_usage
from ranch.ctld.rights import DENIED, Identity, may_act_on
from ranch.protocol import messages as m
from ranch.protocol.tasklayout import block_layout
from ranch.protocol.versions import HOLDS_STEPS
from ranch.statemachine import steptable as st
from ranch.statemachine.jobstates import RUNNING

if TYPE_CHECKING:
    from ranch.ctld.jobs.jobrecord import Job
    from ranch.ctld.jobs.ports import JobDoor, NodesForJobs
    from ranch.ctld.jobs.settings import JobSettings

# srun's words for a step that cannot be made (slurm_strerror of the codes slurmctld answers)
NOT_AVAILABLE = "Requested node configuration is not available"
TOO_MANY_CPUS = "More processors requested than permitted"
BUSY = "Requested nodes are busy"  # srun retries: "Job N step creation temporarily disabled"
NOT_RUNNING = "Job is pending execution"  # wait: sbatch's job not started yet (srun retries)
ENDED = "Job/step already completing or completed"
# scancel N.S's words, measured on Slurm 22.05: a running job without that step (slurmctld
# forgets a step once it ended), and a step of somebody else's job; both name the job alone
NO_STEP = "Kill job error on job step id {job}: Invalid job id specified"
NOT_YOURS = "Kill job error on job step id {job}: Invalid user id"
# ... and a job that is not running (ended, or unknown): the whole step id
NO_JOB = "Kill job error on job step id {job}.{step}: Invalid job id specified"
MAX_STEPS = 40000  # Slurm's MaxStepCount default: a runaway loop of srun stops here


class StepError(Exception):
    """A step that cannot be made; `code` tells rrun whether to retry (busy, pending)."""

    def __init__(self, message: str, code: str = "step_refused") -> None:
        super().__init__(message)
        self.code = code


class JobSteps:
    """The steps of every job (each job record holds its own list)."""

    def __init__(self, jobs: JobDoor, settings: JobSettings, nodes: NodesForJobs, *,
                 wall: Callable[[], float], never_delivered: Callable[[str, Job], bool],
                 step_ended: Callable[[Job], None]) -> None:
        """`never_delivered`: whether a node never named the job's run since its launch
        (ctld/jobs/jobstart.py); `step_ended`: a step of the job ended (rrun's own allocation
        may be orphaned: ctld/jobs/inactive.py)."""
        self._jobs = jobs
        self._settings = settings
        self._nodes = nodes
        self._wall = wall
        self._never_delivered = never_delivered
        self._step_ended = step_ended

    # -- rrun asks for a step --------------------------------------------------------------------

    def request(self, msg: m.StepRequest, actor: Identity) -> m.StepGranted | m.Error:
        """StepRequest -> StepGranted, recorded (durable before the reply: its route waits).
        `actor`: who asks; the job's owner or an admin may (ctld/rpc/permissions.py)."""
        job = self._jobs.jobs.get(msg.job_id)
        try:
            if job is None:
                raise StepError("Invalid job id specified")
            if not may_act_on(actor, job.req.uid, job.req.user):
                raise StepError(DENIED, "permission_denied")
            step = self._plan(job, msg)
        except StepError as exc:
            return m.Error(exc.code, f"Unable to create step for job {msg.job_id}: {exc}")
        job.steps.append(step)
        job.next_step = step.id + 1
        key = secrets.token_hex(32)
        self._launch(job, step, msg, key)
        self._jobs.touch(job)
        logs.event("step started", job=job.id, step=step.id, nodes=len(step.nodes),
                   tasks=step.ntasks)
        return m.StepGranted(job.id, step.id, hostlist.fold(list(step.nodes)), step.nodes,
                             step.tasks, key, int(self._settings.kill_wait))

    def _started_everywhere(self, job: Job) -> bool:
        """Whether every node of the job that would refuse a step of a job it has not started
        yet (an rnoded older than HOLDS_STEPS) has named the job's run since its launch."""
        for name in job.nodes:
            node = self._nodes.nodes.get(name)
            if (node is not None and node.protocol < HOLDS_STEPS
                    and self._never_delivered(name, job)):
                return False
        return True

    def _plan(self, job: Job, msg: m.StepRequest) -> Step:
        if job.state != RUNNING:
            if job.state in ("PENDING", "CONFIGURING"):
                raise StepError(NOT_RUNNING, "step_pending")
            raise StepError(ENDED)
        if not self._started_everywhere(job):
            raise StepError(NOT_RUNNING, "step_pending")
        if len(job.steps) >= MAX_STEPS:
            raise StepError(f"the job has {MAX_STEPS} steps (MaxStepCount)")
        ntasks, want = max(0, msg.ntasks), max(0, msg.nodes)
        cpt = max(1, msg.cpus_per_task)
        nodes = list(job.nodes)
        if msg.nodelist and not want:
            try:
                want = len(set(hostlist.expand(msg.nodelist)))
            except ValueError as exc:
                raise StepError(f"-w {msg.nodelist}: {exc}") from None
        if not want:
            want = min(len(nodes), ntasks) if ntasks else len(nodes)
        if msg.ntasks_per_node and not ntasks:
            ntasks = msg.ntasks_per_node * want
        ntasks = ntasks or want
        if want > len(nodes) or want < 1:
            raise StepError(NOT_AVAILABLE)
        if ntasks < want:
            want = ntasks  # srun: "can't run N processes on M nodes, setting nnodes to N"
        free = self._free_cpus(job)
        counts = [ntasks // want + (1 if i < ntasks % want else 0) for i in range(want)]
        if msg.ntasks_per_node and any(c > msg.ntasks_per_node for c in counts):
            raise StepError(NOT_AVAILABLE)
        chosen = self._place(msg, nodes, want, free, counts[0] * cpt)
        if not msg.ntasks_per_node:  # srun's block layout over the job's CPUs on each node
            counts = block_layout(ntasks, [job.shares[n].cpus // cpt if n in job.shares else 0
                                           for n in chosen])
            if not all(counts):
                raise StepError(TOO_MANY_CPUS)
        for name, count in zip(chosen, counts, strict=True):
            share = job.shares.get(name)
            if share is None or count * cpt > share.cpus:
                raise StepError(TOO_MANY_CPUS)
            gpus = len(share.gpus)
            if count * max(0, msg.gpus_per_task) > gpus or max(0, msg.gpus_per_node) > gpus:
                raise StepError("Invalid generic resource (gres) specification")
        exclusive = not msg.overlap
        held = []
        for name, count in zip(chosen, counts, strict=True):
            if exclusive and free.get(name, 0) < count * cpt:
                raise StepError(BUSY, "step_busy")
            # without --exact a step holds every CPU of the job there that is free (srun 22.05)
            held.append(count * cpt if msg.exact or not exclusive else free.get(name, 0))
        tasks, first = [], 0
        for count in counts:
            tasks.append(tuple(range(first, first + count)))
            first += count
        name = msg.name or (msg.argv[0].rsplit("/", 1)[-1] if msg.argv else "step")
        return Step(job.next_step, name, job.req.user, job.req.uid, tuple(chosen),
                    tuple(tasks), tuple(held), exclusive, self._wall(),
                    job.restarts, awaiting=set(chosen), host=msg.io_host)

    @staticmethod
    def _place(msg: m.StepRequest, nodes: list[str], want: int, free: dict[str, int],
               need: int) -> list[str]:
        """The step's nodes, in the allocation's order: those -w names, then (as slurmctld
        picks them) the ones with the most CPUs that other steps leave free."""
        asked: list[str] = []
        if msg.nodelist:
            try:
                asked = hostlist.expand(msg.nodelist)
            except ValueError as exc:
                raise StepError(f"-w {msg.nodelist}: {exc}") from None
            if not set(asked) <= set(nodes) or len(set(asked)) > want:
                raise StepError(NOT_AVAILABLE)
        rest = sorted((n for n in nodes if n not in asked),
                      key=lambda n: (free.get(n, 0) < need, -free.get(n, 0), nodes.index(n)))
        chosen = [n for n in nodes if n in set(asked)] + rest[:want - len(set(asked))]
        return sorted(chosen, key=nodes.index)

    @staticmethod
    def _free_cpus(job: Job) -> dict[str, int]:
        """CPUs of each node of the job that no running step holds (--overlap steps hold none)."""
        free = {n: s.cpus for n, s in job.shares.items()}
        for s in job.steps:
            if s.state == st.RUNNING and s.exclusive:
                for n, c in zip(s.nodes, s.cpus, strict=True):
                    free[n] = free.get(n, 0) - c
        return free

    def _launch(self, job: Job, step: Step, msg: m.StepRequest, key: str) -> None:
        """LaunchStep to each node of the step, once the step is on disk."""
        per_node = hostlist.compress_counts(len(t) for t in step.tasks)
        nodelist = hostlist.fold(list(step.nodes))
        for index, (name, tasks) in enumerate(zip(step.nodes, step.tasks, strict=True)):
            share = job.shares.get(name)
            if share is None:
                self._node_ended(job, step, name, "FAILED", 1, 0)
                continue
            gpus: tuple[tuple[int, ...], ...] = ()
            if msg.gpus_per_task:
                per = msg.gpus_per_task
                gpus = tuple(share.gpus[i * per:(i + 1) * per] for i in range(len(tasks)))
            elif msg.gpus_per_node:
                gpus = tuple(share.gpus[:msg.gpus_per_node] for _ in tasks)
            spec = m.StepSpec(
                job_id=job.id, restarts=job.restarts, step_id=step.id, name=step.name,
                user=job.req.user, uid=job.req.uid, gid=job.req.gid, argv=msg.argv,
                cwd=msg.cwd, env=msg.env, nodelist=nodelist, node_index=index, tasks=tasks,
                ntasks=step.ntasks, tasks_per_node=per_node,
                cpus_per_task=max(1, msg.cpus_per_task), io_host=msg.io_host,
                io_port=msg.io_port, key=key, gpus=gpus, stdout=msg.stdout,
                stderr=msg.stderr, input=msg.input, unbuffered=msg.unbuffered,
                job_nodelist=hostlist.fold(list(job.nodes)), partition=job.partition,
                io_resume=msg.io_resume)
            if not self._nodes.push(name, m.LaunchStep(spec)):  # the node is not connected
                self._node_ended(job, step, name, "FAILED", 1, 0)

    # -- what nodes and users report ---------------------------------------------------------

    def node_ended(self, node: str | None, msg: m.StepEnd) -> m.Ack | m.Error:
        job = self._jobs.jobs.get(msg.job_id)
        if node is None:
            return m.Error("bad_request", "StepEnd comes from a node daemon")
        if job is None or job.restarts != msg.restarts:
            return m.Ack()  # a step of a run that is gone: nothing to record
        step = self._step(job, msg.step_id)
        if step is not None:
            if msg.usage is not None:  # issue 48: what its tasks there used
                step.usage[node] = node_usage(msg.usage)
                self._jobs.touch(job)
            self._node_ended(job, step, node, msg.state, msg.exit_code, msg.signal)
        return m.Ack()

    def _node_ended(self, job: Job, step: Step, node: str, state: str, code: int,
                    sig: int) -> None:
        self._apply(job, step, st.NodeEnded(node, state, code, sig))

    def cancel(self, job: Job, step_id: int, signal: int) -> str | None:
        """rcancel N.S: the refusal's text, or None. A signal other than 0 is only delivered."""
        step = self._step(job, step_id)
        if step is None or step.state != st.RUNNING:  # an ended step is gone for scancel
            return NO_STEP.format(job=job.id)
        if signal:
            self._kill(job, step, tuple(sorted(step.awaiting)), signal)
            return None
        return self._apply(job, step, st.Cancel())

    def job_ended(self, job: Job) -> None:
        """The job reached a final state: its running steps end with it (no kill: the job's
        own kill takes every process of it on its nodes)."""
        for step in job.steps:
            if step.state == st.RUNNING:
                self._apply(job, step, st.JobEnded(str(job.state)))

    def requeued(self, job: Job) -> None:
        """A new run starts from scratch: the old run's steps are gone with it."""
        job.steps = []
        job.next_step = 0
        job.usage = {}  # and what it used (issue 48)

    # -- the one place a step's state changes -----------------------------------------------

    def _apply(self, job: Job, step: Step, event: st.Event) -> str | None:
        old = st.StepView(job.id, step.id, step.state, frozenset(step.awaiting), step.outcome,
                          step.exit_code, step.signal)
        try:
            new, effects = st.apply(old, event)
        except st.StepRefused as exc:
            return str(exc)
        if new == old and not effects:
            return None
        step.state, step.awaiting, step.outcome = new.state, set(new.awaiting), new.outcome
        step.exit_code, step.signal = new.exit_code, new.signal
        for eff in effects:
            if isinstance(eff, st.KillTasks):
                self._kill(job, step, eff.nodes, 0)
        if old.state == st.RUNNING and new.state != st.RUNNING:
            step.end_time = self._wall()
            logs.event("step ended", job=job.id, step=step.id, state=step.state,
                       exit_code=step.exit_code, signal=step.signal)
            self._step_ended(job)  # rrun's own allocation: is rrun still there?
        self._jobs.touch(job)
        return None

    def _kill(self, job: Job, step: Step, nodes: tuple[str, ...], signal: int) -> None:
        msg = m.KillStep(job.id, step.id, signal, job.restarts)
        for name in nodes:
            if not self._nodes.push(name, msg) and signal == 0:
                # nobody to end them there: the node's part is over
                self._node_ended(job, step, name, "CANCELLED", 0, 0)

    @staticmethod
    def _step(job: Job, step_id: int) -> Step | None:
        for step in job.steps:
            if step.id == step_id:
                return step
        return None


