"""Reconciling jobs with what nodes report: JobEnd endings, launch confirmations, the runs in
heartbeats and registrations (lost jobs, stale runs), and the loss or failure of a node.

Every report names a run (job id, restarts); the job table ignores a report about another run
than the current one, and a node that runs a run the controller does not place there is told to
kill that run (and only that run: a newer run of the same job on the same node is spared).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ranch.ctld import logs
from ranch.ctld.jobs.jobrecord import ACTIVE, COMPLETING, RUNNING
from ranch.ctld.jobs.usagerecord import node_usage
from ranch.protocol import messages as m
from ranch.statemachine import events
from ranch.statemachine import jobevents as je

if TYPE_CHECKING:
    from ranch.ctld.jobs.jobrecord import Job
    from ranch.ctld.jobs.ports import JobDoor, Launches, NodesForJobs, NodeView
    from ranch.ctld.jobs.settings import JobSettings

Run = tuple[int, int]
LAUNCH_FAILURE = "batch job complete failure"  # slurmctld's drain reason, word for word


def reported_runs(job_ids: Sequence[int], runs: Sequence[Sequence[int]]) -> set[Run]:
    """The runs a node says it holds: (job id, restarts), (job id, -1) for an id an older
    rnoded names without its run. One job may come with two runs (an old one ending while a
    newer one starts there)."""
    out = {(int(jid), int(restarts)) for jid, restarts in runs}
    named = {jid for jid, _ in out}
    out.update((int(j), -1) for j in job_ids if int(j) not in named)
    return out


def holds(runs: set[Run], job_id: int, restarts: int) -> bool:
    return (job_id, restarts) in runs or (job_id, -1) in runs


class JobReconciliation:
    """What nodes report, laid against the job store."""

    def __init__(self, jobs: JobDoor, settings: JobSettings, nodes: NodesForJobs,
                 launches: Launches, *, try_launch: Callable[[Job], None],
                 clock: Callable[[], float], wall: Callable[[], float]) -> None:
        """`try_launch`: a CONFIGURING job launched if its nodes are all up now
        (ctld/jobs/jobstart.py)."""
        self._jobs = jobs
        self._settings = settings
        self._nodes = nodes
        self._launches = launches
        self._try_launch = try_launch
        self._clock = clock
        self._wall = wall
        # node -> {job id: when its beats were first seen still running the ended run}
        self._still_running: dict[str, dict[int, float]] = {}
        # node -> {run: when a heartbeat first left out that current run of a job placed there}
        self._missing: dict[str, dict[Run, float]] = {}

    def ended(self, node: NodeView, ends: Sequence[m.JobEnd]) -> None:
        """JobEnd reports (at least once each: a repeat, or another run's, is a no-op)."""
        for end in ends:
            job = self._jobs.jobs.get(end.job_id)
            if job is None:
                continue
            if end.restarts != job.restarts:
                logs.event("ending of an older run recorded, not applied", job=job.id,
                           node=node.name, run=end.restarts, current=job.restarts,
                           state=end.state)
                continue
            if end.usage is not None:  # issue 48: what the run used there
                job.usage[node.name] = node_usage(end.usage)
            self._jobs.apply(job, je.EndReported(node.name, end.restarts, end.state, end.exit_code,
                                            end.signal, end.message))
            if end.state == "LAUNCH_FAILED" and end.node_fault:
                self._drain_for_launch(node, job.id, end.message)

    def _drain_for_launch(self, node: NodeView, job_id: int, why: str) -> None:
        """As slurmctld drains a node whose slurmd could not launch a batch job (as SlurmUser,
        reason "batch job complete failure"), so that the node takes no next job to fail."""
        logs.event("node cannot launch jobs; draining it", logging.WARNING, node=node.name,
                   job=job_id, error=why)
        request = events.AdminUpdate(now=self._wall(), request="DRAIN", reason=LAUNCH_FAILURE,
                                     user=self._settings.config.access.slurm_user)
        _, err = self._nodes.apply_event(node, request)
        if err:
            logs.event("launch-failure drain not applied", logging.WARNING, node=node.name,
                       error=err)

    def started(self, node: NodeView, msg: m.JobStarted) -> m.Ack:
        """A node confirms it launched a run (its start time is the job's)."""
        job = self._jobs.jobs.get(msg.job_id)
        self._launches.heard(node.name, ((msg.job_id, msg.restarts),))
        if job is not None:
            self._jobs.apply(job, je.LaunchConfirmed(node.name, msg.restarts, msg.started_at))
        return m.Ack()

    def _current(self, name: str, job_id: int, run: int) -> bool:
        """Whether the node should run this run of the job (-1: an older rnoded's any-run)."""
        job = self._jobs.jobs.get(job_id)
        return (job is not None and job.state in (RUNNING, COMPLETING) and name in job.awaiting
                and run in (-1, job.restarts))

    def _stale(self, name: str, runs: set[Run]) -> tuple[tuple[int, ...], tuple[Run, ...]]:
        """(job ids, runs) the node runs that are not its own: it kills them silently."""
        stale = [(j, r) for j, r in sorted(runs) if not self._current(name, j, r)]
        # an older rnoded kills by id alone: never name a job whose current run is also there
        ids = tuple(j for j, r in stale if r == -1)
        return ids, tuple((j, r) for j, r in stale if r != -1)

    def _look_for_missing(self, node: NodeView, runs: set[Run], ended: set[Run],
                          beat: bool) -> None:
        """Current runs placed on the node that it reports neither holding nor ended: lost
        there. A node lists every run it holds until the run's ending is recorded on its disk
        (and then reports the ending until acknowledged), so its silence is evidence; but a
        heartbeat may have left before the LaunchJob arrived, and an older rnoded leaves an
        ending run out for a moment. So a heartbeat's silence counts only after the launch grace
        and once it has lasted across beats more than a heartbeat interval apart; a
        registration, sent on a new connection after everything the old one carried, counts
        at once."""
        name = node.name
        use = self._jobs.uses.get(name)
        seen = self._missing.pop(name, {})
        if use is None or not use.jobs:
            if not beat:
                self._launches.forget_unheard(name, ())
            return
        now, grace_s = self._clock(), self._settings.missing_grace
        interval = self._settings.config.timeouts.heartbeat_interval
        missing: dict[Run, float] = {}
        current: list[Run] = []
        for jid in sorted(use.jobs):
            job = self._jobs.jobs.get(jid)
            if job is None or name not in job.awaiting or job.state not in ACTIVE:
                continue
            run = (jid, job.restarts)
            current.append(run)
            if holds(runs, jid, job.restarts) or run in ended:
                continue
            if not beat and job.state == RUNNING and self._launches.never_delivered(name, job):
                # never reached the node: the same run again, not a requeue (a requeue here
                # burnt a restart per try while the node refused our frames, and the job
                # never ran)
                logs.event("launch never reached the node: sent again", logging.WARNING,
                           node=name, job=job.id, run=job.restarts)
                self._launches.launch(job, (name,))
                continue
            if beat:
                since = missing[run] = seen.get(run, now)
                if job.launched_at is None or now - job.launched_at <= grace_s \
                        or now - since <= interval:
                    continue
                del missing[run]
            logs.event("node lost a job", logging.WARNING, node=name, job=job.id,
                       run=job.restarts)
            self._jobs.apply(job, je.NodeLost(name, requeue=True, why=f"lost by node {name}"))
        if missing:
            self._missing[name] = missing
        if not beat:
            self._launches.forget_unheard(name, current)

    def heartbeat(self, node: NodeView, msg: m.Heartbeat) -> tuple[tuple[int, ...],
                                                                     tuple[Run, ...]]:
        """Endings in a heartbeat, jobs it should run and does not (lost after a grace time),
        and the runs it has that are not its own any more."""
        if not (msg.job_ids or msg.jobs_ended or node.name in self._jobs.uses):
            return (), ()  # the hot path: a beat naming no job, of a node holding none
        if msg.jobs_ended:
            self.ended(node, msg.jobs_ended)
        runs = reported_runs(msg.job_ids, msg.runs)
        ended = {(e.job_id, e.restarts) for e in msg.jobs_ended}
        self._launches.heard(node.name, runs | ended)
        self._look_for_missing(node, runs, ended, beat=True)
        if runs or node.name in self._still_running:
            self._kill_again(node.name, runs)
        if not runs:
            return (), ()
        return self._stale(node.name, runs)

    def _kill_again(self, name: str, runs: set[Run]) -> None:
        """A node that still runs a COMPLETING job's run a grace time after the kill gets the
        KillJob again (slurmctld re-sends TERMINATE_JOB likewise): one lost on its way, or
        missed by the node, must not hold the job and the node COMPLETING for ever."""
        now, grace_s = self._clock(), self._settings.missing_grace
        seen, still = self._still_running.get(name, {}), {}
        for jid, run in sorted(runs):
            job = self._jobs.jobs.get(jid)
            if job is None or job.state != COMPLETING or name not in job.awaiting \
                    or run not in (-1, job.restarts):
                continue
            since = still[jid] = seen.get(jid, now)
            if now - since > grace_s:
                logs.event("node still runs an ended job: KillJob again", logging.WARNING,
                           node=name, job=jid, run=job.restarts)
                self._jobs.kill(job, (name,), 0, "completing")
                still[jid] = now
        if still:
            self._still_running[name] = still
        else:
            self._still_running.pop(name, None)

    def registered(self, node: NodeView, msg: m.Register) -> tuple[tuple[int, ...],
                                                                     tuple[Run, ...]]:
        """A (re)registration: endings, jobs the node lost, stale runs, launches that waited."""
        name = node.name
        if msg.jobs_ended:
            self.ended(node, msg.jobs_ended)
        runs = reported_runs(msg.job_ids, msg.runs)
        ended = {(e.job_id, e.restarts) for e in msg.jobs_ended}
        self._launches.heard(name, runs | ended)
        # The node does not hold it and did not report its end: lost with the old rnoded (or
        # its LaunchJob went to a dead connection).
        self._look_for_missing(node, runs, ended, beat=False)
        for jid in sorted(use.jobs) if (use := self._jobs.uses.get(name)) else ():
            job = self._jobs.jobs.get(jid)
            if job is not None:
                self._try_launch(job)
        self._jobs.sync_node(name)  # an allocation its earlier state refused (UNKNOWN at restart)
        self._jobs.kick()
        return self._stale(name, runs)

    def node_lost(self, node: NodeView, requeue: bool, wait: bool = False) -> None:
        """effects.KillJobs of the node table (DOWN, ResumeTimeout, POWER_DOWN_FORCE: the node
        is gone; State=FAIL with `wait`: it is alive, its processes are killed and awaited)."""
        use = self._jobs.uses.get(node.name)
        if use is None:
            return
        for jid in sorted(use.jobs):
            job = self._jobs.jobs.get(jid)
            if job is None:
                continue
            if wait:
                self._jobs.apply(job, je.NodeFailing(node.name, requeue=requeue))
            else:
                self._jobs.apply(job, je.NodeLost(node.name, requeue=requeue,
                                             why=f"node {node.name} failed"))
        self._jobs.kick()
