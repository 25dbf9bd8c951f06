"""sbatch -d/--dependency: reading a dependency list and judging it against the job table, as
slurmctld 22.05 does (src/slurmctld/job_scheduler.c, test_job_dependency).

Forms: `after:ID[+MIN]`, `afterany:ID`, `afterok:ID`, `afternotok:ID`, `aftercorr:ID`,
`afterburstbuffer:ID` (each with `:ID...` for more jobs, `ID_TASK` one array task, `ID_*` or the
array's id the whole array), `singleton`, and a bare job id (afterany). `,` joins them all
(every one must be met), `?` any (one is enough). Each element is unfulfilled, fulfilled or
failed; a decided element stays decided (slurmctld keeps them so: an afterok whose job was
purged from memory stays failed). A job that is gone altogether fulfils it, as in slurmctld.

`evaluate` is pure: the spec, the elements' states so far and the job table in, the verdict
out. ctld/jobs/dependbook.py keeps the states per job for the controller.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from ranch.statemachine.jobstates import FINAL

UNFULFILLED, FULFILLED, FAILED = "unfulfilled", "fulfilled", "failed"
SATISFIED, PENDING, NEVER = "satisfied", "pending", "never"
KINDS = ("afternotok", "aftercorr", "afterany", "afterok", "afterburstbuffer", "after")
RUNNING_LIKE = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"})
PROBLEM = "Job dependency problem"


class DependencyError(ValueError):
    """The submitter's dependency string is not one slurmctld takes ("Job dependency
    problem")."""


@attrs.frozen
class Dep:
    kind: str  # one of KINDS, or "singleton"
    job_id: int = 0
    task: int | None = None  # one array task
    whole_array: bool = False  # ID_* (also set when ID turns out to name an array)
    minutes: int = 0  # after:ID+MIN
    state: str = UNFULFILLED  # as written: ID(failed) starts failed


@attrs.frozen
class Spec:
    deps: tuple[Dep, ...]
    any: bool = False  # joined by "?"


def parse(text: str) -> Spec:
    """The dependency list of `text`; DependencyError saying what slurmctld would refuse."""
    src = text.strip()
    if not src or src == "0":
        return Spec(())
    deps: list[Dep] = []
    any_of = False
    pos = 0

    def fail(why: str) -> DependencyError:
        return DependencyError(f"{PROBLEM}: {why} in {text!r}")

    while True:
        rest = src[pos:]
        if rest[:9].lower() == "singleton":
            pos += 9
            state, pos = _state(src, pos, fail)
            deps.append(Dep("singleton", state=state))
        elif rest[:1].isdigit() and ":" not in rest.split(",", 1)[0].split("?", 1)[0]:
            job_id, task, whole, pos = _job_id(src, pos, fail)  # the old form: bare ids
            deps.append(Dep("afterany", job_id, task, whole))
        else:
            kind = next((k for k in KINDS if rest[: len(k) + 1].lower() == k + ":"), None)
            if kind is None:
                head = rest.split(":", 1)[0]
                if head.lower() == "expand":
                    raise fail("expand is not supported by Ranch")
                raise fail(f"unknown dependency type {head!r} (after, afterany, afterok, "
                           "afternotok, aftercorr, singleton)")
            pos += len(kind) + 1
            while True:
                job_id, task, whole, pos = _job_id(src, pos, fail)
                minutes = 0
                if pos < len(src) and src[pos] == "+":
                    start = pos + 1
                    pos = start
                    while pos < len(src) and src[pos].isdigit():
                        pos += 1
                    if pos == start or int(src[start:pos]) <= 0:
                        raise fail("after '+' a number of minutes above 0 is expected")
                    minutes = int(src[start:pos])
                state, pos = _state(src, pos, fail)
                deps.append(Dep(kind, job_id, task, whole, minutes, state))
                if pos < len(src) and src[pos] == ":":
                    pos += 1
                    continue
                break
        if pos >= len(src):
            break
        if src[pos] == ",":
            pos += 1
        elif src[pos] == "?":
            any_of = True
            pos += 1
        else:
            raise fail(f"unexpected {src[pos]!r}")
        if pos >= len(src):
            raise fail("a dependency is missing after the last separator")
    return Spec(tuple(deps), any_of)


def _job_id(src: str, pos: int, fail: Callable[[str], Exception]
            ) -> tuple[int, int | None, bool, int]:
    start = pos
    while pos < len(src) and src[pos].isdigit():
        pos += 1
    if pos == start or int(src[start:pos]) == 0:
        raise fail("a job id is expected")
    job_id = int(src[start:pos])
    task, whole = None, False
    if pos < len(src) and src[pos] == "_":
        if src[pos + 1: pos + 2] == "*":
            whole, pos = True, pos + 2
        else:
            t0 = pos = pos + 1
            while pos < len(src) and src[pos].isdigit():
                pos += 1
            if pos == t0:
                raise fail("an array task id is expected after '_'")
            task = int(src[t0:pos])
    if pos < len(src) and src[pos] not in ",?:+(":
        raise fail(f"unexpected {src[pos]!r} after job id {job_id}")
    return job_id, task, whole, pos


def _state(src: str, pos: int, fail: Callable[[str], Exception]) -> tuple[str, int]:
    if pos < len(src) and src[pos] == "(":
        end = src.find(")", pos)
        if end < 0:
            raise fail("')' is missing")
        word = src[pos + 1:end].strip().lower()
        return (FAILED if word == "failed" else UNFULFILLED), end + 1
    return UNFULFILLED, pos


# ---------------------------------------------------------------------------------------------
# Judging


def _name(job: Any) -> str:
    from ranch.ctld.jobs.jobrecord import job_name

    return job_name(job.req)


def _members(jobs: Mapping[int, Any], dep: Dep) -> list[Any]:
    """The jobs an element is about: one job, one array task, or every task of an array."""
    if dep.task is not None:
        return [j for j in jobs.values()
                if j.array_job_id == dep.job_id and j.array_task_id == dep.task]
    one = jobs.get(dep.job_id)
    if not dep.whole_array and one is not None and not one.array_job_id:
        return [one]
    tasks = [j for j in jobs.values() if j.array_job_id == dep.job_id]
    return tasks or ([one] if one is not None else [])


def element(dep: Dep, job: Any, jobs: Mapping[int, Any], wall: float) -> tuple[str, float]:
    """(state of one unfulfilled element now, wall time to look again or inf)."""
    if dep.kind == "singleton":
        name, uid = _name(job), job.req.uid
        for other in jobs.values():
            if other is job or other.req.uid != uid or _name(other) != name:
                continue
            if other.state in RUNNING_LIKE or (other.state == "PENDING" and other.id < job.id):
                return UNFULFILLED, math.inf
        return FULFILLED, math.inf
    group = _members(jobs, dep)
    if dep.kind == "aftercorr" and job.array_task_id is not None:
        corr = [j for j in jobs.values()
                if j.array_job_id == dep.job_id and j.array_task_id == job.array_task_id]
        if corr:
            group = corr
    if not group:
        return FULFILLED, math.inf  # the job is gone: the dependency is lifted
    pending = any(j.state == "PENDING" for j in group)
    completed = all(j.state in FINAL for j in group)
    complete = all(j.state == "COMPLETED" for j in group)
    if dep.kind == "after":
        if pending:
            return UNFULFILLED, math.inf
        if not dep.minutes:
            return FULFILLED, math.inf
        starts = [j.start_time for j in group if j.start_time]
        due = (max(starts) if starts else wall) + dep.minutes * 60
        return (FULFILLED, math.inf) if wall >= due else (UNFULFILLED, due)
    if dep.kind in ("afterany", "afterburstbuffer"):
        return (FULFILLED if completed else UNFULFILLED), math.inf
    if not completed:
        return UNFULFILLED, math.inf
    if dep.kind == "afternotok":
        return (FAILED if complete else FULFILLED), math.inf
    return (FULFILLED if complete else FAILED), math.inf  # afterok, aftercorr


def evaluate(spec: Spec, states: tuple[str, ...] | None, job: Any, jobs: Mapping[int, Any],
             wall: float) -> tuple[str, tuple[str, ...], float]:
    """(SATISFIED | PENDING | NEVER, every element's state, wall time to look again or inf)."""
    now = list(states) if states is not None else [d.state for d in spec.deps]
    wake = math.inf
    for i, dep in enumerate(spec.deps):
        if now[i] != UNFULFILLED:
            continue
        now[i], due = element(dep, job, jobs, wall)
        wake = min(wake, due)
    if not spec.deps:
        return SATISFIED, (), math.inf
    if spec.any:
        if FULFILLED in now:
            verdict = SATISFIED
        elif UNFULFILLED in now:
            verdict = PENDING
        else:
            verdict = NEVER
    elif FAILED in now:
        verdict = NEVER
    elif UNFULFILLED in now:
        verdict = PENDING
    else:
        verdict = SATISFIED
    return verdict, tuple(now), wake if verdict == PENDING else math.inf


def describe(spec: Spec, states: Iterable[str] | None, jobs: Mapping[int, Any]) -> str:
    """scontrol's Dependency= / squeue's %E: the elements not yet fulfilled, or "(null)"."""
    states = list(states) if states is not None else [d.state for d in spec.deps]
    sep = "?" if spec.any else ","
    out = []
    for dep, state in zip(spec.deps, states, strict=True):
        if state == FULFILLED:
            continue
        if dep.kind == "singleton":
            out.append(f"singleton({state})")
            continue
        if dep.task is not None:
            ident = f"{dep.job_id}_{dep.task}"
        elif dep.whole_array or getattr(jobs.get(dep.job_id), "array_job_id", 0) == dep.job_id:
            ident = f"{dep.job_id}_*"
        else:
            ident = str(dep.job_id)
        plus = f"+{dep.minutes}" if dep.minutes else ""
        out.append(f"{dep.kind}:{ident}{plus}({state})")
    return sep.join(out) or "(null)"


def kill_invalid_default(settings: Iterable[tuple[str, str]]) -> bool:
    """SchedulerParameters=kill_invalid_depend: cancel never-satisfiable jobs by default."""
    params = dict(settings).get("SchedulerParameters", "")
    return "kill_invalid_depend" in [p.strip().lower() for p in params.split(",")]


@attrs.frozen
class Verdict:
    reason: str  # "Dependency" | "DependencyNeverSatisfied"
    wake: float = math.inf  # wall clock time to look again (after:ID+MIN)
    cancel: bool = False  # --kill-on-invalid-dep: end the job CANCELLED
    newly_never: bool = False  # first time judged never satisfiable (INVALID_DEPEND mail)


def check(text: str) -> str | None:
    """The refusal for a dependency string at submit, or None."""
    try:
        parse(text)
    except DependencyError as exc:
        return str(exc)
    return None
