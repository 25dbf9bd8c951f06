"""rcontrol update NodeName=...: a hostlist or ALL resolved against the cluster, State= and
Reason= fed to the node table as admin events (a reason alone is its own row)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.protocol import messages as m
from ranch.protocol.limits import MAX_REASON_CHARS, too_long
from ranch.statemachine import events
from ranch.statemachine.events import REASON_REQUIRED_MESSAGE
from ranch.statemachine.predicates import reason_required

if TYPE_CHECKING:
    from ranch.ctld.nodes.ports import NodeBook


def expand(nodes: Mapping[str, Any], expr: str) -> tuple[list[str], list[str]]:
    """(names, errors) of a hostlist expression or ALL."""
    expr = expr.strip()
    if expr.upper() == "ALL":
        return list(nodes), []
    try:
        wanted = hostlist.expand(expr)
    except ValueError as exc:  # it names the expression (cut short when long) and the limit
        return [], [str(exc)]
    unknown = [n for n in wanted if n not in nodes]
    if unknown:  # folding 100,000 names would cost the loop 0.1 s: name the first 1,000
        more = f" and {len(unknown) - 1000:,} more" if len(unknown) > 1000 else ""
        return [], [f"unknown node(s): {hostlist.fold(unknown[:1000])}{more}"]
    return wanted, []

def update_nodes(c: NodeBook, msg: m.UpdateNodes, *, wall: Callable[[], float],
                 after_change: Callable[[], None]) -> m.UpdateResult:
    """`after_change`: the programs and the scheduling pass the changes set off."""
    if msg.reason and len(msg.reason) > MAX_REASON_CHARS:  # refused, never cut: docs/limits.md
        return m.UpdateResult(ok=False, errors=(
            too_long("Reason", len(msg.reason), MAX_REASON_CHARS, "characters"),))
    node_names, errors = expand(c.nodes, msg.node_names)
    if errors:
        return m.UpdateResult(ok=False, errors=tuple(errors))
    reason = (msg.reason or "").strip() or None
    if msg.state is None:
        if reason is None:
            return m.UpdateResult(ok=False, errors=("nothing to update: give State= or "
                                                    "Reason=",))
        return apply_each(c, node_names, events.ReasonUpdate(now=wall(), reason=reason,
                                                              user=msg.user))
    try:
        request = events.parse_admin_state(msg.state)
    except ValueError as exc:
        return m.UpdateResult(ok=False, errors=(str(exc),))
    if reason_required(request) and reason is None:
        return m.UpdateResult(ok=False, errors=(REASON_REQUIRED_MESSAGE,))
    result = apply_each(c, node_names, events.AdminUpdate(now=wall(), request=request,
                                                            reason=reason, user=msg.user))
    after_change()
    logs.event("update nodes", nodes=msg.node_names, state=request, user=msg.user or "-",
               changed=len(result.changed), refused=len(result.errors))
    return result

def apply_each(c: NodeBook, node_names: list[str], event: Any) -> m.UpdateResult:
    """One admin event to each node (Reason= without State= is a row of the node table like
    every other change)."""
    changed: list[str] = []
    errs: list[str] = []
    for name in node_names:
        ok, err = c.apply_event(c.nodes[name], event)
        if err:
            errs.append(err)
        elif ok:
            changed.append(name)
    return m.UpdateResult(ok=not errs, changed=tuple(changed), errors=tuple(errs))
