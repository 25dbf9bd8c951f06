"""THE step transition table: every change of a job step's state (srun's N.0, N.1 ...).

A step is born RUNNING (rctld records it when it grants it) and ends once every node of it has
reported its part (StepEnd), or at once when its job ends. Read STEP_ROWS at the bottom first.
Handlers return the new StepView and the effects ctld carries out; they never do I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

RUNNING = "RUNNING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
CANCELLED = "CANCELLED"
OUT_OF_MEMORY = "OUT_OF_MEMORY"
NODE_FAIL = "NODE_FAIL"
FINAL = frozenset({COMPLETED, FAILED, CANCELLED, OUT_OF_MEMORY, NODE_FAIL})
# A node's part ended so; the step takes the worst of its nodes' (later in this list is worse).
_SEVERITY = (COMPLETED, CANCELLED, FAILED, OUT_OF_MEMORY, NODE_FAIL)
_NODE_STATES = {"COMPLETED": COMPLETED, "FAILED": FAILED, "CANCELLED": CANCELLED,
                "OUT_OF_MEMORY": OUT_OF_MEMORY, "LAUNCH_FAILED": FAILED, "TIMEOUT": CANCELLED}


class StepRefused(Exception):
    """An event the table does not allow in the step's state; the message is for the user."""


@attrs.frozen(slots=True)
class StepView:
    """What the table reads and writes of a step (the rest of the record is ctld's)."""

    job_id: int
    id: int
    state: str = RUNNING
    awaiting: frozenset[str] = frozenset()  # nodes whose StepEnd is still due
    outcome: str = ""  # the worst node ending so far, or CANCELLED once a cancel was asked
    exit_code: int = 0  # the highest task exit code reported
    signal: int = 0  # the first signal that killed a task

    @property
    def name(self) -> str:
        return f"{self.job_id}.{self.id}"


# --- events ----------------------------------------------------------------------------------

@attrs.frozen(slots=True)
class NodeEnded:
    """A node's StepEnd: its tasks of the step are gone."""

    node: str
    state: str  # StepEnd.state
    exit_code: int = 0
    signal: int = 0
    kind = "node ended"


@attrs.frozen(slots=True)
class Cancel:
    """rcancel N.S (signal 0): end the tasks on every node still running them."""

    kind = "cancel"


@attrs.frozen(slots=True)
class JobEnded:
    """The step's job ended (its processes are killed with it): the step ends now."""

    job_state: str
    kind = "job ended"


Event = NodeEnded | Cancel | JobEnded


@attrs.frozen(slots=True)
class KillTasks:
    """Effect: KillStep to these nodes."""

    nodes: tuple[str, ...]


Effects = tuple[KillTasks, ...]


# --- handlers ----------------------------------------------------------------------------------

def _worse(a: str, b: str) -> str:
    return max(a or COMPLETED, b or COMPLETED, key=_SEVERITY.index)


def node_ended(v: StepView, e: NodeEnded) -> tuple[StepView, Effects]:
    if e.node not in v.awaiting:
        return v, ()  # a repeated report (the node resent it after a lost Ack)
    outcome = v.outcome if v.outcome == CANCELLED else _worse(
        v.outcome, _NODE_STATES.get(e.state, FAILED))
    awaiting = v.awaiting - {e.node}
    v = attrs.evolve(v, awaiting=awaiting, outcome=outcome,
                     exit_code=max(v.exit_code, e.exit_code), signal=v.signal or e.signal)
    return (attrs.evolve(v, state=outcome) if not awaiting else v), ()


def cancel(v: StepView, e: Cancel) -> tuple[StepView, Effects]:
    if not v.awaiting:
        return attrs.evolve(v, state=CANCELLED, outcome=CANCELLED), ()
    return attrs.evolve(v, outcome=CANCELLED), (KillTasks(tuple(sorted(v.awaiting))),)


def job_ended(v: StepView, e: JobEnded) -> tuple[StepView, Effects]:
    # Slurm records a step cut short by its job's end as CANCELLED, by a node's failure NODE_FAIL
    state = NODE_FAIL if e.job_state == NODE_FAIL else CANCELLED
    if v.outcome and v.outcome not in (CANCELLED, COMPLETED):
        state = _worse(v.outcome, state) if state == NODE_FAIL else v.outcome
    return attrs.evolve(v, state=state, outcome=state, awaiting=frozenset()), ()


def already_ended(v: StepView, e: Event) -> tuple[StepView, Effects]:
    return v, ()  # the step's record is final: late reports change nothing


def refuse_ended(v: StepView, e: Event) -> tuple[StepView, Effects]:
    raise StepRefused(f"Kill job error on job id {v.name}: Job/step already completing or "
                      "completed")


# Each handler takes its row's event kind (see statemachine/table.py for why Any).
Handler = Callable[[StepView, Any], tuple[StepView, Effects]]

# fmt: off
# (event kind, the state class it applies in) -> handler. "ended": any FINAL state.
STEP_ROWS: dict[tuple[str, str], Handler] = {
    ("node ended", RUNNING): node_ended,   # RUNNING, or its outcome once no node is awaited
    ("cancel",     RUNNING): cancel,       # RUNNING (outcome CANCELLED), KillTasks to the rest
    ("job ended",  RUNNING): job_ended,    # CANCELLED | NODE_FAIL | a failure already seen
    ("node ended", "ended"): already_ended,
    ("job ended",  "ended"): already_ended,
    ("cancel",     "ended"): refuse_ended,
}
# fmt: on


def apply(v: StepView, e: Event) -> tuple[StepView, Effects]:
    """The step after event `e`, and what ctld must do; raises StepRefused where the table says."""
    handler = STEP_ROWS[(e.kind, "ended" if v.state in FINAL else RUNNING)]
    return handler(v, e)
