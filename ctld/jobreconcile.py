"""Reconciling jobs with what nodes report: JobEnd endings, the job ids in heartbeats and
registrations (lost jobs, stale copies), and the loss or failure of a node."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctld import logs
from ctld.jobrecord import COMPLETING, CONFIGURING, END_STATES, REQUEUE, RUNNING, Job
from ctld.scheduler import NodeUse
from protocol import messages as m

if TYPE_CHECKING:
    from ctld.node import NodeRecord


class JobReconciliation:
    """Mixed into ctld.jobs.Jobs."""

    def ended(self, node: NodeRecord, ends: Sequence[m.JobEnd]) -> None:
        """JobEnd reports (at least once each: a repeat is a no-op)."""
        for end in ends:
            job = self.jobs.get(end.job_id)
            if job is None or end.restarts != job.restarts or node.name not in job.awaiting:
                continue
            job.awaiting.discard(node.name)
            outcome = END_STATES.get(end.state, "FAILED")
            if job.state == RUNNING and (node.name == job.batch_host or outcome in (
                    "FAILED", "OUT_OF_MEMORY")):
                job.exit_code, job.signal = end.exit_code, end.signal
                job.message = end.message
                if end.state == "LAUNCH_FAILED":
                    job.message = f"launch failed on {node.name}: {end.message}"
                self._release(job, node.name)
                self._end_with(job, outcome, "ended")
                continue
            self._release(job, node.name)
            if job.state == COMPLETING and not job.awaiting:
                self._finish(job, job.outcome or outcome)
            else:
                self._touch(job)

    def _expected(self, name: str, job_id: int) -> bool:
        job = self.jobs.get(job_id)
        return job is not None and job.state in (RUNNING, COMPLETING) and name in job.awaiting

    def heartbeat(self, node: NodeRecord, msg: m.Heartbeat) -> tuple[int, ...]:
        """Endings in a heartbeat, jobs it should run and does not (lost after a grace time),
        and the jobs it runs that are not its own any more."""
        if msg.jobs_ended:
            self.ended(node, msg.jobs_ended)
        name = node.name
        use = self.uses.get(name)
        if use is not None and use.jobs:
            now = self.c.clock()
            running = set(msg.job_ids)
            for jid in sorted(use.jobs):
                job = self.jobs.get(jid)
                if (job is not None and name in job.awaiting and jid not in running
                        and job.launched_at is not None
                        and now - job.launched_at > self.missing_grace):
                    self._gone_from(job, name)
        if not msg.job_ids:
            return ()
        return tuple(j for j in msg.job_ids if not self._expected(name, j))

    def _gone_from(self, job: Job, name: str) -> None:
        """The node does not run the job and reported no ending for it."""
        logs.event("node lost a job", logging.WARNING, node=name, job=job.id)
        job.awaiting.discard(name)
        self._release(job, name)
        if job.state == COMPLETING:
            if not job.awaiting:
                self._finish(job, job.outcome)
        else:
            self._lost(job, f"lost by node {name}")

    def registered(self, node: NodeRecord, msg: m.Register) -> tuple[int, ...]:
        """A (re)registration: endings, jobs the node lost, stale copies, launches that waited."""
        name = node.name
        if msg.jobs_ended:
            self.ended(node, msg.jobs_ended)
        running = set(msg.job_ids)
        use = self.uses.get(name)
        for jid in sorted(use.jobs) if use else ():
            job = self.jobs.get(jid)
            if job is None or name not in job.awaiting or jid in running:
                continue
            # The node does not run it and did not report its end: lost with the old rnoded
            # (or its LaunchJob went to a dead connection).
            self._gone_from(job, name)
        for jid in sorted(use.jobs) if (use := self.uses.get(name)) else ():
            job = self.jobs.get(jid)
            if job is not None and job.state == CONFIGURING:
                self._try_launch(job)
        self._sync_node(name)  # an allocation its earlier state refused (UNKNOWN at restart)
        self.kicked = True
        return tuple(j for j in msg.job_ids if not self._expected(name, j))

    def _lost(self, job: Job, why: str, requeue: bool = True) -> None:
        """A job's node died under it: requeued if both `requeue` and the job allow it
        (--requeue), else NODE_FAIL; every node it still holds is told to stop it."""
        self._kill(job, sorted(job.awaiting), 0, "node_down")
        job.message = why
        self._finish(job, REQUEUE if requeue and job.req.requeue else "NODE_FAIL")

    def node_lost(self, node: NodeRecord, requeue: bool, wait: bool = False) -> None:
        """effects.KillJobs of the state machine (DOWN, ResumeTimeout, POWER_DOWN_FORCE...)."""
        use = self.uses.get(node.name)
        if use is None:
            return
        if wait:
            self._fail_jobs_on(node.name, use, requeue)
            return
        for jid in sorted(use.jobs):
            job = self.jobs.get(jid)
            if job is None:
                continue
            if job.state == COMPLETING:  # already ending: this node's part is gone
                job.awaiting.discard(node.name)
                self._release(job, node.name)
                if not job.awaiting:
                    self._finish(job, job.outcome)
                continue
            self._lost(job, f"node {node.name} failed", requeue)
        self.kicked = True

    def _fail_jobs_on(self, name: str, use: NodeUse, requeue: bool) -> None:
        """State=FAIL: the node is alive, so its jobs' processes are killed and awaited
        (COMPLETING, the node `failg`) before each job is requeued (--requeue) or NODE_FAIL."""
        for jid in sorted(use.jobs):
            job = self.jobs.get(jid)
            if job is None or job.state not in (CONFIGURING, RUNNING):
                continue  # a COMPLETING job already ends its own way
            job.message = f"node {name} failed"
            self._end_with(job, REQUEUE if requeue and job.req.requeue else "NODE_FAIL",
                           "node_fail")
        self.kicked = True
