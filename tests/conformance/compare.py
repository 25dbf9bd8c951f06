"""How two outcomes are put side by side: what is normalised away (ids, paths, times, which node
a job landed on) and the table of known Ranch gaps the tests expect to fail (xfail, strict)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conformance.runner import Outcome, normalise

TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\b")
ELAPSED = re.compile(r"^(\d+-)?\d\d:\d\d:\d\d$")
ABSENT = "<absent>"
# show job keys whose value names the job's files: the job id in them is normalised too
PATH_KEYS = frozenset({"StdOut", "StdErr", "StdIn"})

# Ranch gaps whose fix belongs to the job layer (ctld/job*.py, noded/jobs.py, the JobSpec
# message): (scenario or "*", field) -> the finding. Each is an xfail(strict=True): the day the
# job layer fixes it, the test passes, fails as XPASS, and the line here is deleted.
GAPS: dict[tuple[str, str], str] = {}


def gap(scenario: str, field: str) -> str | None:
    return GAPS.get((scenario, field)) or GAPS.get(("*", field))


def param(scenario: str, field: str):
    reason = gap(scenario, field)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(scenario, field, marks=marks, id=f"{scenario}|{field}")


def _batch_host(o: Outcome) -> str:
    host = o.fields.get("BatchHost", "")
    return host if host and host != "(null)" else ""


def _one_node(o: Outcome) -> str:
    """The node of a job that ran on one node ("" otherwise)."""
    return _batch_host(o) if o.fields.get("NumNodes") == "1" else ""


def nodes_out(text: str, o: Outcome) -> str:
    """The node a one-node job ran on as <node> (placement is each scheduler's own choice)."""
    host = _one_node(o)
    if not host:
        return text
    return re.sub(rf"(?<![A-Za-z0-9]){re.escape(host)}(?![A-Za-z0-9])", "<node>", text)


def record_value(o: Outcome, key: str, workdir: str) -> str:
    """One `scontrol show job -o` value, comparable across the two systems."""
    value = o.fields.get(key)
    if value is None:
        return ABSENT
    value = value.replace(workdir, "<workdir>")
    if key in PATH_KEYS:
        value = normalise(value, o.job_id, Path(workdir))
    if key == "RunTime" and ELAPSED.match(value):
        return "<elapsed>"
    if key == "Priority":  # the number is each scheduler's own; 0 means held in both
        return value if value == "0" else "<positive>"
    if key == "TRES":  # memory is consumable in Ranch only (README: deliberate)
        value = ",".join(t for t in value.split(",") if not t.startswith("mem="))
    if key in ("NodeList", "BatchHost"):
        value = nodes_out(value, o)
    return TIME.sub("<time>", value)


def env_of(o: Outcome) -> dict[str, str]:
    """The job's environment as `env -0` wrote it on the job's batch host."""
    host = _batch_host(o)
    text = next((t for n, t in o.files.items() if host and n.endswith(f"env-{host}")), "")
    env = {}
    for item in text.split("\0"):
        name, sep, value = item.partition("=")
        if sep and name:
            env[name] = value
    return env


ENV_IDS = frozenset({"SLURM_JOB_ID", "SLURM_JOBID"})


def env_value(o: Outcome, name: str, workdir: str) -> str:
    value = env_of(o).get(name)
    if value is None:
        return ABSENT
    if name in ENV_IDS:
        return normalise(value, o.job_id, Path(workdir))
    if name == "SLURM_TASK_PID":
        return "<pid>" if value.isdigit() else value
    return nodes_out(value.replace(workdir, "<workdir>"), o)


def files_of(o: Outcome, hostname: str = "") -> dict[str, str]:
    """The job's files (names with <jobid>, texts with times as <time>); `hostname` (what
    Slurm's %N writes) becomes the job's node, as Ranch writes it."""
    out = {}
    for name, text in o.files.items():
        if hostname and _one_node(o):
            name = name.replace(hostname, _one_node(o))
        # times first: a job id may also be an hour or minute in them
        out[nodes_out(name, o)] = nodes_out(normalise(
            TIME.sub("<time>", text), o.job_id, Path("/nonexistent")), o)
    return out


def explain(slurm: Outcome, ranch: Outcome) -> str:
    """Both outcomes' raw facts, for an assertion message."""
    def one(o: Outcome) -> str:
        f = o.fields
        return (f"{o.system}: job {o.job_id} submit={o.submit!r} ended={o.ended} "
                f"before={o.before!r} end={o.end_letter!r} JobState={f.get('JobState')} "
                f"Reason={f.get('Reason')} ExitCode={f.get('ExitCode')} "
                f"Restarts={f.get('Restarts')}")

    return one(slurm) + "\n" + one(ranch)
