"""What the controller shows of its jobs: the job record (rqueue, show job, HTTP), the cached
JobList body and rqueue's cut of it, the jobs holding given nodes (the resume file), and when
the jobs on each node may run until (reservations)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ranch.conf import hostlist
from ranch.ctld.jobs import jobfields
from ranch.ctld.jobs.jobextras import record_fields
from ranch.ctld.jobs.jobrecord import ACTIVE, PENDING, Job, job_name
from ranch.ctld.jobs.steprecord import step_record
from ranch.ctld.jobs.usagerecord import gpus_used, merged
from ranch.ctld.kept import kept

if TYPE_CHECKING:
    from ranch.ctld.jobs.ports import JobReader, NodesForJobs


class JobListing:
    """Views of the job store: records, the cached JobList body, jobs holding nodes."""

    def __init__(self, jobs: JobReader, nodes: NodesForJobs, *, wall: Callable[[], float],
                 dependency: Callable[[Job], str]) -> None:
        """`dependency`: what a job's record shows of its dependency (ctld/jobs/dependbook.py)."""
        self._jobs = jobs
        self._nodes = nodes
        self._wall = wall
        self._dependency = dependency

    def jobs_holding(self, names: Sequence[str]) -> list[tuple[int, list[str]]]:
        """(job id, every node of the job) for the active jobs holding any of `names` (the
        resume program's SLURM_RESUME_FILE)."""
        seen: dict[int, list[str]] = {}
        for name in names:
            use = self._jobs.uses.get(name)
            for jid in sorted(use.jobs) if use else ():
                job = self._jobs.jobs.get(jid)
                if job is not None and job.state in ACTIVE and jid not in seen:
                    seen[jid] = list(job.nodes)
        return sorted(seen.items())

    def _cpus(self, job: Job) -> int:
        """The CPUs of a job that holds none now: an exclusive one that ran held every CPU of
        its nodes (Slurm still shows them once it ended), any other what it asks for."""
        if job.req.exclusive and job.nodes:
            nodes = self._nodes.nodes
            return sum(nodes[n].cfg.cpus for n in job.nodes if n in nodes)
        if job.need.spread:
            return job.req.ntasks * job.req.cpus_per_task
        return job.need.cpus * job.need.nodes

    def record(self, job: Job) -> dict[str, Any]:
        """The job's record, built anew: kept for every job, the ~70-key dicts cost 1.6 KB a
        job (8 MB with 5,000 queued) once anything listed them; the record is kept encoded
        instead (`encoded`), and what rqueue reads of it (ctld/jobs/jobfields.py)."""
        req = job.req
        # a job held until it ended was never eligible (Slurm: EligibleTime=Unknown)
        eligible = None if job.held and job.start_time == job.end_time else max(
            job.submit_time, req.begin_time or 0.0)
        rec: dict[str, Any] = {
            "job_id": job.id,
            "array_job_id": job.array_job_id,
            "array_task_id": job.array_task_id,
            "name": job_name(req),
            "user": req.user,
            "uid": req.uid,
            "gid": req.gid,
            # -p a,b: the list while it waits, as squeue shows it; where it runs once started
            "partition": ",".join((job.partition, *job.alt_parts)),
            "state": job.state,
            "reason": job.reason,
            "priority": job.priority,
            "submit_time": job.submit_time,
            "start_time": job.start_time,
            "end_time": job.end_time,
            "eligible_time": eligible,
            "accrue_time": eligible if job.accrued else None,
            "time_limit": job.time_limit,
            "nodes": hostlist.fold(list(job.nodes)) if job.nodes else "",
            "node_count": len(job.nodes) or job.need.nodes,
            "cpus": sum(s.cpus for s in job.shares.values()) or self._cpus(job),
            "ntasks": req.ntasks,
            "cpus_per_task": req.cpus_per_task,
            "mem_per_node": req.mem_mib,
            "gpus_per_node": req.gpus,
            "gpu_indices": {n: list(s.gpus) for n, s in job.shares.items() if s.gpus},
            "req_nodes": hostlist.fold(list(job.req_nodes)) if job.req_nodes else "",
            "exc_nodes": hostlist.fold(list(job.exc_nodes)) if job.exc_nodes else "",
            "exclusive": req.exclusive,
            "workdir": req.workdir,
            "command": req.command or "(wrap)",
            "stdout": job.stdout,
            "stderr": req.stderr,
            "requeue": req.requeue,
            "restarts": job.restarts,
            "exit_code": job.exit_code,
            "signal": job.signal,
            "held": job.held,
            "array_throttle": job.array_throttle,
            "batch_host": job.batch_host,
            "submit_host": req.submit_host,
            "message": job.message,
            # issue 20: Slurm's BatchFlag (0: an allocation, ralloc/rrun), and each node's
            # CPUs in node order (SLURM_JOB_CPUS_PER_NODE of the allocation's environment)
            "batch_flag": 0 if req.allocation else 1,
            "node_cpus": [job.shares[n].cpus for n in job.nodes if n in job.shares],
        }
        self._add_extras(rec, job)
        return rec

    def _add_extras(self, rec: dict[str, Any], job: Job) -> None:
        """What the record adds for sbatch's further options (issue 22), what the job used,
        and its steps."""
        req = job.req
        rec.update(record_fields(job, self._dependency(job)))
        if job.state == PENDING and job.start_time is None:  # sched/backfill's estimate
            rec["start_time"] = job.est_start  # (squeue --start; None: N/A)
        rec["sched_nodes"] = hostlist.fold(list(job.sched_nodes)) if job.sched_nodes else ""
        if job.usage:  # issue 48: the batch script's figures, the GPUs of every node
            if job.batch_host in job.usage and not req.allocation:
                rec["usage"] = merged({job.batch_host: job.usage[job.batch_host]})
            rec["gpu_usage"] = gpus_used(job.usage)
        if job.steps:  # rrun's steps (ctld/jobs/steps.py)
            rec["steps"] = [step_record(s) for s in job.steps]

    def list_fields(self, fields: tuple[str, ...]) -> bytes:
        """rqueue's view: only the keys it reads, of every job (issue 23: jobfields.py)."""
        return jobfields.list_body(self._jobs.jobs.values(), self.record, self._wall(), fields)

    def running_until(self) -> dict[str, float]:
        """Node -> when the last job on it may run until (its start + time limit; inf with no
        limit), for a reservation that must not cut a job short."""
        out: dict[str, float] = {}
        for job in self._jobs.jobs.values():
            if job.start_time is None or not job.nodes or job.state not in (
                    "RUNNING", "CONFIGURING", "SUSPENDED", "COMPLETING"):
                continue
            end = float("inf") if job.time_limit is None else job.start_time + job.time_limit * 60
            for n in job.nodes:
                out[n] = max(out.get(n, float("-inf")), end)
        return out

    def list_body(self, ids: Sequence[int] = ()) -> bytes:
        """The JobList body (orjson, the codec's shape). Each job's record is encoded once per
        change of the job (`Job.shown`) and the body is those joined, so that after a change
        only the jobs that changed are encoded again; "now" (generated_at, from which rqueue's
        TIME and show job's RunTime count) is written fresh into every answer."""
        if ids:
            table = self._jobs.jobs
            wanted = [table[j] for j in ids if j in table]
            extra = [j for j in table.values() if j.array_job_id in ids and j.id not in ids]
            records = b",".join([self.encoded(j) for j in [*wanted, *extra]])
        else:
            records = b",".join([self.encoded(j) for j in self._jobs.jobs.values()])
        return b'{"generated_at":%s,"jobs":[%s]}' % (orjson.dumps(self._wall()), records)

    def encoded(self, job: Job) -> bytes:
        """The job's whole record, encoded (kept until the job changes: ~1 KB)."""
        shown = job.shown
        if shown is None:
            shown = job.shown = kept(orjson.dumps(self.record(job)))
        return shown
