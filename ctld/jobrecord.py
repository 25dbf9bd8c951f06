"""A batch job's record in the controller: the Job, its states, array specs, its name, and its
JSON form for the state file and the submission journal."""

from __future__ import annotations

import os
from typing import Any

import attrs
import orjson

from ctld.scheduler import Need, Share
from ctld.steps import Step, step_from_json, step_json
from ctld.wire import kept
from protocol import messages as m
from protocol.codec import converter
from statemachine.jobstates import ACTIVE, COMPLETING, CONFIGURING, PENDING, RUNNING, JobState

TOP_PRIORITY = 4294901760  # Slurm's priority/basic: each later job one less
NOT_AVAILABLE = "Requested node configuration is not available"
BEGIN_KEY = ("", "begin")  # Cluster.deadlines key: a pending job's BeginTime has come


@attrs.define(eq=False, slots=True)
class Job:
    id: int
    req: m.SubmitJob
    partition: str
    time_limit: int | None  # minutes; None = UNLIMITED
    priority: int
    submit_time: float  # wall clock
    need: Need
    req_nodes: tuple[str, ...] = ()  # -w, expanded
    exc_nodes: tuple[str, ...] = ()  # -x, expanded
    stdout: str = ""
    state: JobState = PENDING  # assigned by ctld/jobs.py Jobs._apply alone (the job table's)
    reason: str = "None"
    held: str = ""  # "" | "user" | "admin"
    start_time: float | None = None
    end_time: float | None = None
    nodes: tuple[str, ...] = ()
    shares: dict[str, Share] = attrs.Factory(dict)
    awaiting: set[str] = attrs.Factory(set)  # nodes whose JobEnd of this run is still due
    outcome: str = ""  # the state a COMPLETING job takes when `awaiting` empties
    restarts: int = 0
    exit_code: int = 0
    signal: int = 0
    message: str = ""
    array_job_id: int = 0
    array_task_id: int | None = None
    launched_at: float | None = None  # trio clock, for the submit->start figures
    submitted_at: float = 0.0  # trio clock
    saved: orjson.Fragment | None = None
    record: dict | None = None
    # the script and environment are in ctld/jobbulk.py's files, not in `req` (nor memory)
    bulk_on_disk: bool = False
    # `req` encoded, with the request it encodes: it changes far less often than the job
    req_saved: tuple[m.SubmitJob, orjson.Fragment] | None = None
    steps: list[Step] = attrs.Factory(list)  # the current run's steps (rrun), in id order
    next_step: int = 0

    @property
    def batch_host(self) -> str:
        return self.nodes[0] if self.nodes else ""


def parse_array(text: str, max_size: int) -> list[int]:
    """sbatch --array: "1-8", "0,4,7-9", "1-9:2", with an ignored "%limit"; every task id below
    `max_size` (MaxArraySize), checked before anything is built."""
    spec = text.split("%", 1)[0].strip()
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"empty element in --array={text}")
        rng, _, step_s = part.partition(":")
        lo_s, dash, hi_s = rng.partition("-")
        lo = int(lo_s)
        hi = int(hi_s) if dash else lo
        step = int(step_s) if step_s else 1
        if lo < 0 or hi < lo or step < 1:
            raise ValueError(f"bad range {part!r} in --array={text}")
        if hi >= max_size:
            raise ValueError(f"Invalid job array specification: --array={text}: task ids must "
                             f"be below MaxArraySize={max_size}, got {hi}")
        out.extend(range(lo, hi + 1, step))
    return sorted(set(out))


def job_name(req: m.SubmitJob) -> str:
    """-J, else the script's file name, else "wrap" (sbatch --wrap), as Slurm names jobs."""
    return req.name or (os.path.basename(req.command) if req.command else "wrap")


def req_fragment(job: Job) -> orjson.Fragment:
    """The job's request as JSON, encoded once (and again only after `job.req` is replaced)."""
    cached = job.req_saved
    if cached is None or cached[0] is not job.req:
        # kept(): orjson's spare capacity was 16 KB a queued job, most of its memory
        cached = job.req_saved = (job.req, orjson.Fragment(kept(orjson.dumps(
            converter.unstructure(job.req)))))
    return cached[1]


def job_json(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "req": req_fragment(job),
        "partition": job.partition,
        "time_limit": job.time_limit,
        "priority": job.priority,
        "submit_time": job.submit_time,
        "need": attrs.asdict(job.need),
        "req_nodes": list(job.req_nodes),
        "exc_nodes": list(job.exc_nodes),
        "stdout": job.stdout,
        "state": job.state,
        "reason": job.reason,
        "held": job.held,
        "start_time": job.start_time,
        "end_time": job.end_time,
        "nodes": list(job.nodes),
        "shares": {n: [s.cpus, s.mem, list(s.gpus)] for n, s in job.shares.items()},
        "awaiting": sorted(job.awaiting),
        "outcome": job.outcome,
        "restarts": job.restarts,
        "exit_code": job.exit_code,
        "signal": job.signal,
        "message": job.message,
        "array_job_id": job.array_job_id,
        "array_task_id": job.array_task_id,
        "bulk_on_disk": job.bulk_on_disk,
        **({"steps": [step_json(s) for s in job.steps], "next_step": job.next_step}
           if job.steps or job.next_step else {}),
    }


def job_from_json(d: dict[str, Any]) -> Job:
    return Job(
        id=int(d["id"]),
        req=converter.structure(d["req"], m.SubmitJob),
        partition=d["partition"],
        time_limit=d.get("time_limit"),
        priority=int(d.get("priority", 1)),
        submit_time=float(d.get("submit_time") or 0.0),
        need=Need(**d["need"]),
        req_nodes=tuple(d.get("req_nodes", ())),
        exc_nodes=tuple(d.get("exc_nodes", ())),
        stdout=d.get("stdout", "slurm-%j.out"),
        state=JobState(d.get("state", PENDING)),
        reason=d.get("reason", "None"),
        held=d.get("held", ""),
        start_time=d.get("start_time"),
        end_time=d.get("end_time"),
        nodes=tuple(d.get("nodes", ())),
        shares={n: Share(int(v[0]), int(v[1]), tuple(v[2])) for n, v in
                d.get("shares", {}).items()},
        awaiting=set(d.get("awaiting", ())),
        outcome=d.get("outcome", ""),
        restarts=int(d.get("restarts", 0)),
        exit_code=int(d.get("exit_code", 0)),
        signal=int(d.get("signal", 0)),
        message=d.get("message", ""),
        array_job_id=int(d.get("array_job_id", 0)),
        array_task_id=d.get("array_task_id"),
        bulk_on_disk=bool(d.get("bulk_on_disk", False)),
        steps=[step_from_json(s) for s in d.get("steps", ())],
        next_step=int(d.get("next_step", 0)),
    )


__all__ = ["ACTIVE", "COMPLETING", "CONFIGURING", "PENDING", "RUNNING", "Job", "JobState",
           "job_from_json", "job_json", "job_name", "parse_array"]
