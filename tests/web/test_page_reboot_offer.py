"""The node panel's Reboot button is the node table's answer to `rcontrol reboot` (a dry run of a
RebootRequest, ctld/web/actions.py reboot_offered): offered where the request would change the
node, never where it would be skipped (a reboot already pending or issued, a powered-down node)."""

from __future__ import annotations

import pytest

from ranch.ctld.web.actions import reboot_offered
from ranch.statemachine.model import Base, Flag, NodeState, Reason, ReasonSource
from ranch.statemachine.policy import Policy

WHY = Reason(ReasonSource.ADMIN, "bad fan", 1.0, "alice")


def _node(base: Base, *flags: Flag, alloc: int = 0, reason: Reason | None = None) -> NodeState:
    return NodeState("n1", base, frozenset(flags), reason, 4, alloc)


@pytest.mark.parametrize(("state", "want"), [
    (_node(Base.IDLE), True),
    (_node(Base.MIXED, alloc=2), True),  # `@`: once its jobs end
    (_node(Base.IDLE, Flag.DRAIN, reason=WHY), True),
    (_node(Base.IDLE, Flag.REBOOT_REQUESTED, reason=WHY), False),  # pending already
    (_node(Base.DOWN, Flag.REBOOT_ISSUED, reason=WHY), False),  # rebooting
    (_node(Base.IDLE, Flag.POWERED_DOWN), False),  # powered down: Slurm skips it
])
def test_reboot_offered_is_the_table(state: NodeState, want: bool) -> None:
    assert reboot_offered(state, Policy()) is want
