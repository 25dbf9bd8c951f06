"""A submission's own fields checked, before the config and the nodes are asked: numbers in
range, the bounds of issue 18 (protocol/limits.py), what only an allocation or only a batch job
may carry."""

from __future__ import annotations

from ranch.protocol import messages as m
from ranch.protocol.limits import MAX_SCRIPT_BYTES, MAX_TIME_LIMIT_MINUTES


def refused(req: m.SubmitJob) -> m.Error | None:
    """The refusal of a request whose own fields are out of range or contradict each other (the
    config aside), or None."""

    def bad(message: str, fld: str) -> m.Error:
        return m.Error("bad_request", message, field=fld)

    for fld, value in (("num_nodes", req.num_nodes), ("ntasks", req.ntasks),
                       ("cpus_per_task", req.cpus_per_task)):
        if value < 1:
            return bad(f"{fld} must be 1 or more, got {value}", fld)
    for fld, value in (("uid", req.uid), ("gid", req.gid)):
        if value < 0:
            return bad(f"{fld} must be 0 or more, got {value}", fld)
    if req.mem_mib < 0:
        return bad(f"mem_mib must be 0 or more, got {req.mem_mib}", "mem_mib")
    if req.gpus < 0:
        return bad(f"gpus must be 0 or more, got {req.gpus}", "gpus")
    if req.time_limit_s is not None and req.time_limit_s <= 0:
        return bad(f"time_limit_s must be above 0, got {req.time_limit_s}", "time_limit_s")
    if req.time_limit is not None and req.time_limit < 0:
        return bad(f"time_limit must be 0 or more minutes, got {req.time_limit}",
                   "time_limit")
    if req.begin_time is not None and not 0 <= req.begin_time < 1e11:  # NaN fails too
        return bad(f"begin_time must be seconds since the epoch, got {req.begin_time}",
                   "begin_time")
    # issue 18: bounds on what a submission may carry (protocol/limits.py, docs/limits.md)
    if req.time_limit is not None and req.time_limit > MAX_TIME_LIMIT_MINUTES:
        return bad(f"time_limit of {req.time_limit:,} minutes is above the largest time "
                   f"limit, {MAX_TIME_LIMIT_MINUTES:,} minutes", "time_limit")
    if req.time_limit_s is not None and not req.time_limit_s <= MAX_TIME_LIMIT_MINUTES * 60:
        return bad(f"time_limit_s of {req.time_limit_s:g} seconds is above the largest time "
                   f"limit, {MAX_TIME_LIMIT_MINUTES * 60:,} seconds", "time_limit_s")
    script_bytes = len(req.script.encode("utf-8", "surrogatepass"))
    if script_bytes > MAX_SCRIPT_BYTES:
        return bad(f"the batch script is {script_bytes:,} bytes; the limit is "
                   f"{MAX_SCRIPT_BYTES:,} (Slurm's max_script_size)", "script")
    if req.allocation:  # ralloc / rrun outside a job: nothing runs but its steps
        if req.script:
            return bad("an allocation (ralloc, rrun) has no batch script", "script")
        if req.array:
            return bad("an allocation (ralloc, rrun) cannot be a job array", "array")
        if req.held_by not in ("", "ralloc", "rrun"):
            return bad(f"held_by must be ralloc, rrun or empty, got {req.held_by!r}",
                       "held_by")
    elif req.held_by or req.immediate:
        field = "held_by" if req.held_by else "immediate"
        return bad(f"{field} is for allocations (ralloc, rrun) only", field)
    elif not req.script.strip():
        return bad("the batch script is empty", "script")
    if not req.workdir.startswith("/"):
        return bad(f"workdir must be an absolute path, got {req.workdir!r}", "workdir")
    return None
