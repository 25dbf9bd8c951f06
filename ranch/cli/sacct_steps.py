"""sacct's step lines for rrun's steps (`12.0`, `12.1` ... under the job and its `12.batch`),
and `-j 12.1` / `12.batch`, which select step lines alone.

As sacct 22.05 over slurmdbd prints them (tests/conformance/test_step_acct.py compares them
with a private slurmdbd's): a step's own JobName, State, ExitCode `code:signal`, Start, End,
Elapsed, NodeList, NNodes, NTasks and AllocCPUS; the job's Account and Cluster; Partition, User,
Timelimit and DerivedExitCode empty; the job line's DerivedExitCode is its steps' highest. The
job history keeps at most ctld/jobs/acct.py's STEPS_KEPT steps of a job; a record that left some out
says how many (`steps_left_out`).
"""

from __future__ import annotations


def selected(words: list[str]) -> dict[int, set[str]]:
    """-j words naming steps: job id -> the step ids (`batch`, `0`...) chosen. A job also
    named whole (`12`) shows all its lines."""
    whole: set[int] = set()
    steps: dict[int, set[str]] = {}
    for group in words:
        for word in group.split(","):
            head, dot, step = word.strip().partition(".")
            if not head.isdigit():
                continue  # an array task (12_3.batch) selects its job whole
            if dot:
                steps.setdefault(int(head), set()).add(step)
            else:
                whole.add(int(head))
    return {j: s for j, s in steps.items() if j not in whole}


def step_value(field: str, rec: dict, step: dict, now: float) -> str:
    from ranch.cli.sacct_fields import STEP_EMPTY, USAGE_FIELDS, hms, job_id, stamp, value

    if field in STEP_EMPTY:
        return ""
    start, end = step.get("start_time"), step.get("end_time")
    took = max(0.0, (end or now) - start) if start else 0.0
    if field == "JobID":
        return f"{job_id(rec)}.{step['id']}"
    if field == "JobIDRaw":
        return f"{rec['job_id']}.{step['id']}"
    if field == "JobName":
        return step.get("name") or ""
    if field == "State":
        return step.get("state") or ""
    if field == "ExitCode":
        return f"{step.get('exit_code') or 0}:{step.get('signal') or 0}"
    if field == "NodeList":
        return step.get("nodes") or ""
    if field in ("NNodes", "AllocNodes"):
        return str(step.get("num_nodes") or 1)
    if field in ("AllocCPUS", "NCPUS", "ReqCPUS"):
        return str(step.get("cpus") or 0)
    if field == "NTasks":
        return str(step.get("ntasks") or 0)
    if field in ("Start", "Submit"):
        return stamp(start)
    if field == "End":
        return stamp(end)
    if field == "Elapsed":
        return hms(took)
    if field == "ElapsedRaw":
        return str(int(took))
    if field in USAGE_FIELDS:
        from ranch.cli.sacct_usage import line_value

        return line_value(field, step.get("usage"), rec, took, int(step.get("cpus") or 0))
    return value(field, rec, now)


def step_doc(rec: dict, step: dict, now: float) -> dict:
    """A step in sacct --json's `steps` list."""
    from ranch.cli.sacct_json import _exit
    from ranch.cli.sacct_usage import json_times, json_tres

    start, end = step.get("start_time"), step.get("end_time")
    sig = step.get("signal") or 0
    return {
        "step": {"id": f"{rec['job_id']}.{step['id']}", "name": step.get("name") or ""},
        "state": step.get("state") or "",
        "exit_code": _exit(step.get("exit_code") or 0, sig),
        "nodes": {"count": step.get("num_nodes") or 1, "range": step.get("nodes") or ""},
        "tasks": {"count": step.get("ntasks") or 0},
        "time": {"elapsed": int(max(0.0, (end or now) - start)) if start else 0,
                 "start": int(start or 0), "end": int(end or 0),
                 **json_times(step.get("usage"))},
        "tres": json_tres(step.get("usage")),
    }


def derived_exit_code(rec: dict) -> str:
    """sacct's DerivedExitCode: the highest exit code of the job's steps (with its signal)."""
    best = max(rec.get("steps") or (), default=None,
               key=lambda s: (s.get("exit_code") or 0, s.get("signal") or 0))
    if best is None:
        return ""
    return f"{best.get('exit_code') or 0}:{best.get('signal') or 0}"
