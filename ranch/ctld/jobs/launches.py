"""Launches: LaunchJob for a job's current run to each of its nodes (once the run is on disk),
its script and environment read back from their pack, and which runs each node has not named
since this rctld launched them there (a launch that never arrived is sent again)."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.jobs import jobextras
from ranch.ctld.jobs.jobrecord import Job, job_env, job_name
from ranch.ctld.state import bulkfiles
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from ranch.ctld.jobs.ports import NodesForJobs
    from ranch.ctld.jobs.settings import JobSettings
    from ranch.ctld.site import Site


class Launcher:
    """LaunchJob to the nodes, and the runs each node has not named yet."""

    def __init__(self, settings: JobSettings, nodes: NodesForJobs, *, site: Site,
                 epoch: int) -> None:
        """`epoch`: the seat this controller holds, on every LaunchJob."""
        self._settings = settings
        self._nodes = nodes
        self._site = site
        self._epoch = epoch
        # node -> runs this rctld launched there that the node has not yet named (in a beat, a
        # registration, a JobStarted): soft state, empty after a restart (then no run is taken
        # for never delivered, and a missing one is requeued as before)
        self._unheard: dict[str, set[tuple[int, int]]] = {}

    def _bulk(self, job: Job) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The job's script and environment: in memory until a snapshot put them in their
        files (one small read per launch then)."""
        if not job.bulk_on_disk or self._site.state_dir is None:
            return job.req.script, job_env(job)
        try:
            if job.bulk_at is not None:
                return bulkfiles.read_packed(self._site.state_dir, job.id, job.bulk_at)
            return bulkfiles.read(self._site.state_dir, job.id)
        except (OSError, ValueError) as exc:
            logs.event("job script unreadable", logging.ERROR, job=job.id, error=str(exc))
            why = f"rctld: the batch script of job {job.id} cannot be read: {exc}"
            return f"#!/bin/sh\necho {shlex.quote(why)} >&2\nexit 1\n", ()

    def heard(self, name: str, runs: Iterable[tuple[int, int]]) -> None:
        """The node named these runs: it has them (or had them and reported their end)."""
        unheard = self._unheard.get(name)
        if unheard:
            runs = set(runs)
            any_run = {jid for jid, run in runs if run == -1}  # an older rnoded's job ids
            unheard.difference_update({r for r in unheard if r in runs or r[0] in any_run})
            if not unheard:
                del self._unheard[name]

    def never_delivered(self, name: str, job: Job) -> bool:
        """Whether the node has never named the job's current run since this rctld launched
        it there: a node whose registration lists neither it nor its ending never had it (its
        LaunchJob went to a dead connection, or the node refused the frame: a controller clock
        stepped forward, issue 30), so the same run can be sent again without a requeue."""
        return (job.id, job.restarts) in self._unheard.get(name, ())

    def forget_unheard(self, name: str, keep: Iterable[tuple[int, int]]) -> None:
        """Drop the node's entries for runs that are no longer current there."""
        unheard = self._unheard.get(name)
        if unheard:
            unheard.intersection_update(keep)
            if not unheard:
                del self._unheard[name]

    def launch(self, job: Job, names: tuple[str, ...]) -> None:
        """The table's Launch effect: LaunchJob for the current run to each node, sent once the
        run is on disk (a crash after it never forgets a launch the node acted on)."""
        nodelist = hostlist.fold(list(job.nodes))
        req = job.req
        name = job_name(req)
        limit = None if job.time_limit is None else job.time_limit * 60.0
        if req.time_limit_s is not None and req.time_limit is not None:
            limit = req.time_limit_s
        script, env = self._bulk(job)
        job.run_limit = ()  # this run's node enforces the limit as it is now
        per_node = tuple(job.shares[n].cpus if n in job.shares else 0
                         for n in hostlist.expand(nodelist))
        for node_name in names:
            self._unheard.setdefault(node_name, set()).add((job.id, job.restarts))
            share = job.shares.get(node_name)
            if share is None:
                continue
            spec = m.JobSpec(
                job_id=job.id, name=name, user=req.user, uid=req.uid, gid=req.gid,
                script=script, workdir=req.workdir, stdout=job.stdout, stderr=req.stderr,
                argv=req.argv, env=env, nodelist=nodelist, num_nodes=len(job.nodes),
                ntasks=req.ntasks, cpus_per_task=req.cpus_per_task, cpus=share.cpus,
                mem_mib=share.mem, gpus=share.gpus, time_limit=limit,
                kill_wait=self._settings.kill_wait,
                restarts=job.restarts, partition=job.partition, submit_host=req.submit_host,
                array_job_id=job.array_job_id, array_task_id=job.array_task_id,
                cluster_name=self._settings.config.cluster_name, cpus_per_node=per_node,
                **jobextras.spec_fields(req),
            )
            # not connected: its silence is seen as a lost job after the grace time
            # the start time comes as the answer (no Ack, then JobStarted, a frame each way
            # more a job); an older rnoded ignores the field and sends both as before
            self._nodes.push(node_name, m.LaunchJob(spec, epoch=self._epoch,
                                                    started_answer=True))
        logs.event("job started", job=job.id, nodes=nodelist, restarts=job.restarts)
