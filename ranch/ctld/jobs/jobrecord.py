"""A batch job's record in the controller: the Job, its states, array specs, its name, and its
JSON form for the state file and the submission journal."""

from __future__ import annotations

import os
from typing import Any

import attrs
import orjson

from ranch.ctld.jobs.steprecord import Step, step_from_json, step_json
from ranch.protocol import messages as m
from ranch.protocol.codec import converter
from ranch.sched.model import Need, Share
from ranch.statemachine.jobstates import ACTIVE, COMPLETING, CONFIGURING, PENDING, RUNNING, JobState

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
    state: JobState = PENDING  # assigned by JobStore.apply alone (the job table's)
    reason: str = "None"
    held: str = ""  # "" | "user" | "admin" | "requeue" (rcontrol requeuehold)
    start_time: float | None = None
    end_time: float | None = None
    nodes: tuple[str, ...] = ()
    shares: dict[str, Share] = attrs.Factory(dict)
    # nodes whose JobEnd of this run is still due (replaced, never changed in place: the empty
    # one is shared by every job not ending)
    awaiting: frozenset[str] = frozenset()
    outcome: str = ""  # the state a COMPLETING job takes when `awaiting` empties
    restarts: int = 0
    exit_code: int = 0
    signal: int = 0
    message: str = ""
    array_job_id: int = 0
    array_task_id: int | None = None
    launched_at: float | None = None  # trio clock, for the submit->start figures
    submitted_at: float = 0.0  # trio clock
    saved: orjson.Fragment | None = None  # job_json encoded, until the job next changes
    listed: tuple[tuple[str, ...], bytes] | None = None  # (keys, that cut of its record)
    shown: bytes | None = None  # its whole listing record, encoded
    # the script and environment are in ctld/state/bulkfiles.py's files, not in `req` (nor memory):
    # at `bulk_at` (pack, offset, length), or in the job's own directory when that is None
    bulk_on_disk: bool = False
    bulk_at: tuple[int, int, int] | None = None
    # until then the environment, encoded (`req` holds none: 1 KB of bytes rather than 7 KB of
    # tuples and strings for every job a burst of submissions leaves waiting for a snapshot)
    env_json: bytes | None = None
    steps: list[Step] = attrs.Factory(list)  # the current run's steps (rrun), in id order
    next_step: int = 0
    # it waited in the queue, accruing age; an allocation the submission's own scheduling pass
    # started (or failed: salloc -I) never did, as slurmctld's (scontrol: AccrueTime=Unknown)
    accrued: bool = True
    usage: dict[str, dict] = attrs.Factory(dict)  # node -> what the run used there (issue 48)
    array_throttle: int = 0  # --array=...%N, ArrayTaskThrottle: at most N tasks at once (0: any)
    # rcontrol update TimeLimit of a running job: (the limit in minutes its node enforces,) —
    # rctld ends the run itself at the new one (ctld/jobs/jobupdate.py RunLimits); () if unchanged
    run_limit: tuple[int | None, ...] = ()
    alt_parts: tuple[str, ...] = ()  # -p a,b while pending: the partitions after `partition`
    # sched/backfill's estimate while pending (StartTime, SchedNodeList; issue 44): recomputed
    # every cycle, so neither is saved (a saved record without them loads as it did)
    est_start: float | None = None
    sched_nodes: tuple[str, ...] = ()
    direct_prio: bool = False  # an admin's Priority= (multifactor keeps it: direct_set_prio)
    site_factor: int = 0  # an admin's SiteFactor= (added to the multifactor total unweighted)

    @property
    def batch_host(self) -> str:
        return self.nodes[0] if self.nodes else ""


def parse_array(text: str, max_size: int) -> list[int]:
    """sbatch --array: "1-8", "0,4,7-9", "1-9:2", "%limit" apart (array_throttle); every task id
    below
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


def held_reason(held: str) -> str:
    """A held job's Reason: who held it (rcontrol requeuehold: slurmctld's own words)."""
    return {"user": "JobHeldUser", "requeue": "job requeued in held state"}.get(held,
                                                                             "JobHeldAdmin")


def array_throttle(spec: str) -> int:
    """--array=1-10%2: at most 2 tasks at once (0: no limit)."""
    _, sep, limit = spec.partition("%")
    return int(limit) if sep and limit.strip().isdigit() else 0


def job_name(req: m.SubmitJob) -> str:
    """-J, else the script's file name, else "wrap" (sbatch --wrap), as Slurm names jobs
    (`-J ''` leaves it unnamed)."""
    if not req.name and "job-name" in req.given_blank:
        return ""
    return req.name or (os.path.basename(req.command) if req.command else "wrap")


# (field, default) of a request: the saved form holds only what differs from the default
REQ_DEFAULTS = tuple((f.name, f.default) for f in attrs.fields(m.SubmitJob))
NEED_DEFAULTS = tuple((f.name, f.default) for f in attrs.fields(Need))
# the job record's keys left out when they hold these (job_from_json's defaults)
JOB_DEFAULTS = (("req_nodes", ()), ("exc_nodes", ()), ("held", ""), ("start_time", None),
                ("end_time", None), ("nodes", ()), ("outcome", ""), ("restarts", 0),
                ("exit_code", 0), ("signal", 0), ("message", ""), ("array_job_id", 0),
                ("array_task_id", None), ("bulk_on_disk", False), ("bulk_at", None),
                ("accrued", True), ("array_throttle", 0), ("run_limit", ()),
                ("alt_parts", ()), ("direct_prio", False), ("site_factor", 0))


def _differing(obj: Any, defaults: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    return {name: value for name, default in defaults
            if (value := getattr(obj, name)) != default}


def req_json(req: m.SubmitJob) -> dict[str, Any]:
    """The request as the codec writes it, less the fields that hold their default (a queued
    job's saved record was 1.4 KB, mostly defaults, kept in memory twice; docs/benchmarks.md,
    issue 23). The fields are all JSON values as they are (str, numbers, tuples)."""
    return _differing(req, REQ_DEFAULTS)


def job_json(job: Job) -> dict[str, Any]:
    req = req_json(job.req)
    if job.env_json is not None:
        req["env"] = orjson.Fragment(job.env_json)
    out = {
        "id": job.id,
        "req": req,
        "partition": job.partition,
        "time_limit": job.time_limit,
        "priority": job.priority,
        "submit_time": job.submit_time,
        "need": _differing(job.need, NEED_DEFAULTS),
        "stdout": job.stdout,
        "state": job.state,
        "reason": job.reason,
        **_differing(job, JOB_DEFAULTS),
    }
    if job.shares:
        out["shares"] = {n: [s.cpus, s.mem, list(s.gpus)] for n, s in job.shares.items()}
    if job.awaiting:
        out["awaiting"] = sorted(job.awaiting)
    if job.usage:
        out["usage"] = job.usage
    if job.steps or job.next_step:
        out["steps"] = [step_json(s) for s in job.steps]
        out["next_step"] = job.next_step
    return out


def job_env(job: Job) -> tuple[tuple[str, str], ...]:
    """The environment of a job whose bulk is not on disk yet."""
    if job.env_json is None:
        return job.req.env
    return tuple((str(k), str(v)) for k, v in orjson.loads(job.env_json))


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
        awaiting=frozenset(d.get("awaiting", ())),
        outcome=d.get("outcome", ""),
        restarts=int(d.get("restarts", 0)),
        exit_code=int(d.get("exit_code", 0)),
        signal=int(d.get("signal", 0)),
        message=d.get("message", ""),
        array_job_id=int(d.get("array_job_id", 0)),
        array_task_id=d.get("array_task_id"),
        bulk_on_disk=bool(d.get("bulk_on_disk", False)),
        bulk_at=tuple(map(int, d["bulk_at"])) if d.get("bulk_at") else None,  # type: ignore
        steps=[step_from_json(s) for s in d.get("steps", ())],
        next_step=int(d.get("next_step", 0)),
        accrued=bool(d.get("accrued", True)),
        usage=dict(d.get("usage") or {}),
        array_throttle=int(d.get("array_throttle", 0)),
        run_limit=tuple(d.get("run_limit", ())),
        alt_parts=tuple(d.get("alt_parts", ())),
        direct_prio=bool(d.get("direct_prio", False)),
        site_factor=int(d.get("site_factor", 0)),
    )


__all__ = ["ACTIVE", "COMPLETING", "CONFIGURING", "PENDING", "RUNNING", "Job", "JobState",
           "job_from_json", "job_json", "job_name", "parse_array"]
