"""THE job transition table: every change of a batch job's state, in one place a user can audit.

Read JOB_ROWS (bottom of this file) first: each row says which event, in which states, runs which
named handler, and which states it may lead to. An event the table does not list for a state is
refused with JobRefused, worded as scontrol words it. Handlers (statemachine/jobhandlers.py)
return the job's new JobView and the effects (launch, kill, release) that ctld carries out; they
never do I/O. The view, the events and the effects are statemachine/jobevents.py.

Every event about a job's processes names the run it is about (`restarts`): a report of another
run is never taken for the current one (the handlers ignore it; ctld kills the stale run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ranch.statemachine.jobevents import EVENT_KINDS, Effects, Event, JobView, refuse
from ranch.statemachine.jobhandlers import (
    allocate,
    cancel_active,
    cancel_done,
    cancel_pending,
    complete_done,
    complete_pending,
    complete_running,
    confirm_launch,
    end_completing,
    end_running,
    fail_node_configuring,
    fail_node_running,
    hold,
    ignore,
    inactive,
    launch,
    lose_node,
    lose_node_completing,
    not_now,
    not_pending,
    preempt,
    release,
    release_not_held,
    requeue_active,
    requeue_completing,
    requeue_finished,
    requeue_pending,
    update_begin,
)
from ranch.statemachine.jobstates import COMPLETING, CONFIGURING, FINAL, PENDING, RUNNING

FINISHED = "FINISHED"  # the table's class for every FINAL state
SAME = "SAME"
# Each handler takes its row's event class (see statemachine/table.py for why Any).
Handler = Callable[[JobView, Any], tuple[JobView, Effects]]


def job_class(v: JobView) -> str:
    return FINISHED if v.state in FINAL else str(v.state)


# --- THE TABLE -------------------------------------------------------------------------------

@attrs.frozen
class Row:
    event: str
    states: tuple[str, ...]
    handler: Handler
    to: tuple[str, ...] = (SAME,)


_PD, _CF, _R, _CG, _DONE = str(PENDING), str(CONFIGURING), str(RUNNING), str(COMPLETING), FINISHED
CLASSES = (_PD, _CF, _R, _CG, _DONE)

# fmt: off
JOB_ROWS: tuple[Row, ...] = (
    Row("allocate",         (_PD,),             allocate,              (_R, _CF)),
    Row("allocate",         (_CF, _R, _CG, _DONE), not_pending),
    Row("nodes ready",      (_CF,),             launch,                (_R,)),
    Row("nodes ready",      (_PD, _R, _CG, _DONE), ignore),
    Row("launch confirmed", (_R, _CG),          confirm_launch),
    Row("launch confirmed", (_PD, _CF, _DONE),  ignore),   # an old run's news: ctld kills it
    Row("end reported",     (_R,),              end_running,           (SAME, _CG, _DONE, _PD)),
    Row("end reported",     (_CG,),             end_completing,        (SAME, _DONE, _PD)),
    Row("end reported",     (_PD, _CF, _DONE),  ignore),   # an old run's ending
    Row("cancel",           (_PD, _CF),         cancel_pending,        (_DONE,)),
    Row("cancel",           (_R,),              cancel_active,         (_CG, _DONE)),
    Row("cancel",           (_CG, _DONE),       cancel_done),
    Row("node lost",        (_CF, _R),          lose_node,             (SAME, _PD, _DONE)),
    Row("node lost",        (_CG,),             lose_node_completing,  (SAME, _PD, _DONE)),
    Row("node lost",        (_PD, _DONE),       ignore),
    Row("node failing",     (_CF,),             fail_node_configuring, (_PD, _DONE)),
    Row("node failing",     (_R,),              fail_node_running,     (_CG, _PD, _DONE)),
    Row("node failing",     (_PD, _CG, _DONE),  ignore),
    Row("requeue",          (_PD,),             requeue_pending),
    Row("requeue",          (_CF, _R),          requeue_active,        (_CG, _PD)),
    Row("requeue",          (_CG,),             requeue_completing),
    Row("requeue",          (_DONE,),           requeue_finished,      (_PD,)),
    Row("hold",             (_PD,),             hold),
    Row("hold",             (_CF, _R, _CG, _DONE), not_pending),
    Row("release",          (_PD,),             release),
    Row("release",          (_CF, _R, _CG, _DONE), release_not_held),
    Row("update begin",     (_PD,),             update_begin),
    Row("update begin",     (_CF, _R, _CG, _DONE), not_pending),
    Row("complete",         (_PD, _CF),         complete_pending,      (_DONE,)),
    Row("complete",         (_R,),              complete_running,      (_CG, _DONE)),
    Row("complete",         (_CG, _DONE),       complete_done),
    Row("inactive",         (_CF, _R),          inactive,              (_CG, _DONE)),
    Row("inactive",         (_PD, _CG, _DONE),  ignore),   # pending: not yet; ended: too late
    Row("not now",          (_PD,),             not_now,               (_DONE,)),
    Row("not now",          (_CF, _R, _CG, _DONE), ignore),  # it started after all
    Row("preempt",          (_CF, _R),          preempt,               (_CG, _PD, _DONE)),
    Row("preempt",          (_PD, _CG, _DONE),  ignore),   # it ended or was requeued meanwhile
)
# fmt: on


def _build(rows: tuple[Row, ...]) -> dict[tuple[str, str], Handler]:
    table: dict[tuple[str, str], Handler] = {}
    for row in rows:
        if row.event not in EVENT_KINDS:
            raise AssertionError(f"job table row for unknown event {row.event!r}")
        for cls in row.states:
            if (cls, row.event) in table:
                raise AssertionError(f"job table has two rows for ({cls}, {row.event})")
            table[(cls, row.event)] = row.handler
    return table


JOB_TABLE = _build(JOB_ROWS)


def apply_job(view: JobView, event: Event) -> tuple[JobView, Effects]:
    """The only way a job's state changes. Raises JobRefused for what JOB_ROWS refuses."""
    handler = JOB_TABLE.get((job_class(view), event.kind))
    if handler is None:
        raise refuse(view, event, f"job {view.id}: cannot {event.kind} a {view.state} job")
    return handler(view, event)


__all__ = ["CLASSES", "FINISHED", "JOB_ROWS", "JOB_TABLE", "SAME", "apply_job", "job_class"]
