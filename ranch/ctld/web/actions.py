"""Which buttons the page offers: a node's admin requests and a job's commands, each asked of the
transition table the controller applies (a dry run of statemachine.table.apply / apply_job), so
the page never keeps a copy of the rules and never offers what the controller would refuse."""

from __future__ import annotations

from ranch.statemachine import events as ev
from ranch.statemachine import jobevents as je
from ranch.statemachine.errors import InvalidTransition
from ranch.statemachine.jobevents import JobRefused, JobView
from ranch.statemachine.jobtable import apply_job
from ranch.statemachine.model import NodeState
from ranch.statemachine.policy import Policy
from ranch.statemachine.table import apply

# The requests the page's node panel has buttons for, in the order it shows them.
NODE_REQUESTS = ("DRAIN", "RESUME")
JOB_ACTIONS = ("cancel", "hold", "release", "requeue")


def node_actions(state: NodeState, policy: Policy) -> list[str]:
    """The requests of NODE_REQUESTS that `rcontrol update State=...` would accept for a node in
    `state` and that would change it (DRAIN on a drained node only rewrites its reason: the page
    offers the reason's change through no button, so it is not offered)."""
    out = []
    for request in NODE_REQUESTS:
        event = ev.AdminUpdate(now=0.0, request=request, reason="(dry run)", user="")
        try:
            new, _ = apply(state, event, policy)
        except InvalidTransition:
            continue
        if (new.base, new.flags) != (state.base, state.flags):
            out.append(request)
    return out


_JOB_EVENTS: dict[str, je.Event] = {
    "cancel": je.Cancel(), "hold": je.Hold(), "release": je.Release(), "requeue": je.Requeue()}


def job_actions(view: JobView, may_act: bool, admin: bool) -> list[str]:
    """The commands of JOB_ACTIONS the job table accepts for the job now, for a caller who may
    act on it (its owner or an admin: ranch.ctld.rights.may_act_on); a hold that holds a held
    job again is left out."""
    if not may_act:
        return []
    out = []
    for name in JOB_ACTIONS:
        event = je.Hold(admin=admin) if name == "hold" else _JOB_EVENTS[name]
        try:
            apply_job(view, event)
        except JobRefused:
            continue
        if name == "hold" and view.held:
            continue
        out.append(name)
    return out


def reboot_offered(state: NodeState, policy: Policy) -> bool:
    """Whether `rcontrol reboot NODE` would take the node now: the node table's answer to a
    RebootRequest changes it (a node rebooting already, or powered down, is left as it is)."""
    try:
        new, _ = apply(state, ev.RebootRequest(now=0.0, reason="(dry run)"), policy)
    except InvalidTransition:
        return False
    return (new.base, new.flags) != (state.base, state.flags)
