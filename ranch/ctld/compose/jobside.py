"""The job side (ctld/compose/jobs.py JobSide) as the composition root and the node side use it:
what the coordinators call (`JobParts`), made of the components that do the work."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import attrs

from ranch.ctld.compose.jobs import JobSide, on_deadline
from ranch.ctld.state.changelog import Taken


@attrs.frozen
class JobParts:
    """What the composition root needs of the job side."""

    side: JobSide  # what the rpc and web layers and the daemon reach as `jobs`
    run_pass: Callable[[], None]  # the scheduling pass, when one is due
    on_deadline: Callable[[Any, str], bool]  # a job's deadline came: True when it was one
    restore: Callable[[dict[str, Any] | None], None]
    save_doc: Callable[[], dict[str, Any]]
    journal_records: Callable[[Taken], list[dict[str, Any]]]
    job_partition: Callable[[int], str]  # the resume file's jobs (ctld/nodes/powersave.py)

    @property
    def for_nodes(self) -> JobSide:
        """What the node side calls (nodes/ports.py JobsForNodes): the side's own doors."""
        return self.side


def parts_of(side: JobSide) -> JobParts:
    store = side.store
    return JobParts(
        side=side, run_pass=side.starts.run, on_deadline=partial(on_deadline, side),
        restore=store.restore, save_doc=store.save_doc, journal_records=store.journal_records,
        job_partition=lambda jid: store.jobs[jid].partition)
