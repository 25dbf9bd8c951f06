"""`rcontrol reconfigure --dry-run` (issue 44): the request and its reply, the queue under a
candidate config."""

from __future__ import annotations

import attrs


@attrs.frozen
class ReconfigureDryRun:
    """`rcontrol reconfigure --dry-run [FILE]` (issue 44): the queue under a candidate config
    (`path`, read by rctld; "" the cluster's own file), nothing applied. Admins only."""

    path: str = ""
    user: str = ""


@attrs.frozen
class DryRunRow:
    """One pending job: its priority and place in the queue now and under the candidate
    (positions from 1)."""

    job_id: int
    user: str
    partition: str
    priority_now: int
    priority_after: int
    position_now: int
    position_after: int


@attrs.frozen
class DryRunStart:
    """A pending job the candidate would start at once: on which nodes, by which pass
    ("main": the event pass a reconfigure runs; "backfill": the planner's first cycle)."""

    job_id: int
    nodes: str
    by: str


@attrs.frozen
class ReconfigureDryRunReply:
    ok: bool
    errors: tuple[str, ...] = ()  # each "PATH:LINE:COL: message"; nothing changed
    path: str = ""
    priority_now: str = ""  # PriorityType in force
    priority_after: str = ""  # the candidate's
    rows: tuple[DryRunRow, ...] = ()  # in the candidate's order
    starts: tuple[DryRunStart, ...] = ()


DRY_RUN_MESSAGES: tuple[type, ...] = (ReconfigureDryRun, DryRunRow, DryRunStart,
                                      ReconfigureDryRunReply)
